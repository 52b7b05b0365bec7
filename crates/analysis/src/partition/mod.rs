//! Partitioned and clustered assignment of tasks to CPUs or clusters.
