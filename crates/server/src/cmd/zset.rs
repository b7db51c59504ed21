//! Placeholder: filled in by a later commit.

use super::table::Spec;

pub static COMMANDS: &[Spec] = &[];
