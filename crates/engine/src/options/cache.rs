//! The block cache and what enters it ([`Options::cache`](super::Options)): its capacity
//! and the cache-warming policy that fills it after flushes and compactions.

use super::warming::CacheWarmingConfig;
use crate::error::Result;

/// The block cache's size and warming.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheOptions {
    /// Bytes of table blocks the block cache holds. 64 MiB; the learned policy's write
    /// history and recent pointers are charged to it too (see
    /// [`LifetimeOptions`](super::LifetimeOptions)).
    pub block_cache_capacity: usize,
    /// Which output blocks of flushes and compactions are put into the block cache as they
    /// are written (paper 002, [`crate::warming`]). None by default: blocks enter the
    /// cache when read, as in RocksDB.
    pub cache_warming: CacheWarmingConfig,
    /// With `cache_warming` `None`, still count the block-cache misses that compactions'
    /// invalidations cause (the baseline of the warming comparison). Off by default: the
    /// accounting keeps key ranges per data block of every compaction input, memory that
    /// grows with the data (the other warming policies need it and always keep it).
    pub warming_accounting: bool,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            block_cache_capacity: 64 << 20,
            cache_warming: CacheWarmingConfig::None,
            warming_accounting: false,
        }
    }
}

impl CacheOptions {
    /// Checks the group; the error names the first bad field.
    pub fn validate(&self) -> Result<()> {
        self.cache_warming.validate()
    }
}
