//! The storage interface. Every byte the engine reads or writes passes through a
//! [`Storage`], tagged with the [`IoCause`] that made it, and is counted in [`IoStats`]:
//! write amplification is measured here, not estimated. Later layers (an emulated
//! predictable-latency device, a striped volume) are other implementations of the same
//! small trait.

mod cause;
mod fs;
mod mapped;
pub mod parallel;
mod readonly;
mod stats;
mod storage;
mod sync;

pub use cause::IoCause;
pub use fs::FileStorage;
pub use readonly::ReadOnlyStorage;
pub use stats::{CauseCounters, IoStats, IoStatsSnapshot};
pub use storage::{read_all, ReadableFile, Storage, SyncHandle, WritableFile};
