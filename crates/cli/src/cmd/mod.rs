//! One module per subcommand.

pub mod bench;
pub mod check;
pub mod compare;
pub mod leaper;
pub mod lss;
pub mod vat;
pub mod vat_validate;
pub mod vigil;
