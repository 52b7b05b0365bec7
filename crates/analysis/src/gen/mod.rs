//! Task-set generators.
