//! One module per subcommand.

pub mod bench;
pub mod compare;
pub mod lss;
pub mod vat;
pub mod vigil;
