//! One module per subcommand.

pub mod backup;
pub mod bench;
pub mod check;
pub mod compare;
pub mod leaper;
pub mod lss;
pub mod serve;
pub mod vat;
pub mod vat_validate;
pub mod vigil;
