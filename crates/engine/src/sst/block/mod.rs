//! Blocks: the unit of reading and caching. A block holds sorted entries with
//! prefix-compressed keys and a small array of restart points for binary search.
//!
//! # Layout
//!
//! ```text
//! entry*            one per key-value pair, in internal-key order (internal_key::cmp_internal)
//! restarts: [u32 LE; num_restarts]   offset of every restart entry
//! num_restarts: u32 LE
//! ```
//!
//! Each entry is
//!
//! ```text
//! shared: varint32 | non_shared: varint32 | value_len: varint32
//! key_delta: [u8; non_shared] | value: [u8; value_len]
//! ```
//!
//! where the entry's key is the first `shared` bytes of the previous entry's key followed by
//! `key_delta`. Every `restart_interval`-th entry (16 by default) is a restart point: it
//! stores its key whole (`shared == 0`), so a seek binary-searches the restart array and then
//! scans at most one interval. Sorted keys share long prefixes, which is what makes the
//! delta encoding pay off; the interval bounds the cost of a seek. An empty block is just
//! `num_restarts = 0`.
//!
//! Keys in data and index blocks are internal keys (user key + 8-byte trailer). A block is
//! validated completely when it is parsed ([`Block::new`]), so iterating it afterwards
//! cannot fail and never reads out of bounds, whatever bytes the file held.

mod builder;
mod iter;
mod parsed;

pub use builder::BlockBuilder;
pub use iter::BlockIter;
pub use parsed::{Block, MalformedBlock};

#[cfg(test)]
mod tests;
