//! The write-ahead log. Every write batch is one record of the [`log`] format; a WAL file is
//! numbered like table files and belongs to one memtable. It is deleted once that memtable
//! is flushed and the manifest says so.

pub mod log;
mod recovery_mode;

pub use log::{Damage, LogReader, LogWriter, ReadOutcome};
pub use recovery_mode::WalRecoveryMode;
