//! Prototype: not yet.
