//! The block cache: decoded data blocks shared between all readers, keyed by
//! `(file_number, block offset)`.
//!
//! It is sharded like RocksDB's LRU cache: the key's hash picks one of N shards, each an
//! independent LRU list behind its own mutex with a byte budget of `capacity / N`, so
//! concurrent readers rarely contend on one lock. Blocks are charged by
//! [`Block::size_in_bytes`](crate::sst::block::Block::size_in_bytes); an insert evicts
//! least-recently-used blocks of its shard until it fits, so usage never exceeds capacity.
//!
//! Each shard also indexes its keys by file, so that when a compaction deletes a file its
//! blocks are dropped at once ([`BlockCache::erase_file`]) rather than aging out while
//! occupying space. The number dropped is reported as invalidations: it is what a
//! compaction costs the cache, which the prefetcher (paper 002) sets out to repair.
//!
//! Memory the engine holds outside its blocks (table index and filter blocks, value index
//! maps, the lifetime policies' tables) is charged to the capacity with a
//! [`CacheCharge`], as RocksDB charges index and filter blocks and its other reservations
//! to its block cache: the cache's capacity is then a bound on all of them together.

mod block_cache;
mod shard;
mod stats;

pub use block_cache::{thread_misses, BlockCache, CacheCharge, EraseListener, DEFAULT_SHARDS};
pub use stats::CacheStats;
