//! Sorted table files (in progress).
