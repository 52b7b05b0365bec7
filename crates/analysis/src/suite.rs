//! Runs every applicable test on a task set: what `pacer analyze` prints.
