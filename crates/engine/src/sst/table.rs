//! Opens a table file and answers point lookups; [`Table::iter`] does range reads
//! ([`super::TableIter`]).
//!
//! Opening reads the footer, then the index, filter and properties blocks, verifying the
//! checksum of each; they stay in memory for the life of the table. Data blocks are read on
//! demand through the optional [`DataBlockCache`], keyed by `(file_number, block offset)`.
//! The index and filter blocks a table holds are charged to that cache's capacity while
//! the table is open (RocksDB's `cache_index_and_filter_blocks`, without evicting them):
//! the cache's budget bounds them with the data blocks.

use super::block::{Block, MalformedBlock};
use super::filter::BloomFilter;
use super::format::{block_checksum, BlockHandle, Footer, BLOCK_TRAILER_LEN, FOOTER_LEN};
use super::properties::TableProperties;
use super::stats::TableStats;
use crate::error::{Error, Result};
use crate::internal_key::TRAILER_LEN;
use crate::io::{IoCause, ReadableFile};
use std::path::Path;
use std::sync::Arc;

/// What a table needs of a block cache ([`crate::cache::BlockCache`] is the engine's).
/// The table format defines it and the cache implements it: the cache holds the format's
/// blocks, so it sits above the format, and the format reads through it without knowing
/// it.
pub trait DataBlockCache: Send + Sync {
    /// The cached block at `offset` of table file `file`, counted as a hit or a miss.
    fn get(&self, file: u64, offset: u64) -> Option<Arc<Block>>;
    /// The same for a background reader: counts nothing, leaves the LRU order alone.
    fn peek(&self, file: u64, offset: u64) -> Option<Arc<Block>>;
    fn insert(&self, file: u64, offset: u64, block: Arc<Block>);
    /// Memory held outside the cache's blocks (a table's index and filter), charged to its
    /// capacity: the `old` bytes charged so far become `new`.
    fn recharge(&self, old: usize, new: usize);
}

/// An open, immutable table file.
pub struct Table {
    file: Arc<dyn ReadableFile>,
    file_number: u64,
    cache: Option<Arc<dyn DataBlockCache>>,
    /// Where the footer starts: no block may extend past it.
    data_end: u64,
    index: Arc<Block>,
    filter: BloomFilter,
    props: TableProperties,
    stats: Arc<TableStats>,
    /// Bytes of the index and filter blocks, charged to `cache` while the table is open.
    charged: usize,
}

impl Drop for Table {
    fn drop(&mut self) {
        if let Some(c) = &self.cache {
            c.recharge(self.charged, 0);
        }
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.file.path())
            .field("file_number", &self.file_number)
            .field("num_entries", &self.props.num_entries)
            .finish_non_exhaustive()
    }
}

impl Table {
    /// Opens a table with its own read counters.
    pub fn open(
        file: Arc<dyn ReadableFile>,
        file_number: u64,
        cache: Option<Arc<dyn DataBlockCache>>,
    ) -> Result<Arc<Table>> {
        Self::open_with_stats(file, file_number, cache, Arc::default())
    }

    /// Opens a table whose reads are counted in `stats` (usually shared by all tables).
    pub fn open_with_stats(
        file: Arc<dyn ReadableFile>,
        file_number: u64,
        cache: Option<Arc<dyn DataBlockCache>>,
        stats: Arc<TableStats>,
    ) -> Result<Arc<Table>> {
        let path = file.path().to_path_buf();
        let len = file.len();
        if len < FOOTER_LEN as u64 {
            return Err(Error::corruption(
                &path,
                format!("file of {len} bytes is too short to be a table (footer is {FOOTER_LEN})"),
            ));
        }
        let data_end = len - FOOTER_LEN as u64;
        let raw = file.read_at(data_end, FOOTER_LEN, IoCause::Other)?;
        let raw: &[u8; FOOTER_LEN] = raw
            .as_slice()
            .try_into()
            .map_err(|_| Error::corruption(&path, "short read of the footer".to_string()))?;
        let footer = Footer::decode(raw)
            .map_err(|e| Error::corruption(&path, format!("footer at offset {data_end}: {e}")))?;

        let read = |h: BlockHandle| read_block(file.as_ref(), data_end, h, IoCause::Other);
        let parse_err = |h: BlockHandle, what: &str, e: MalformedBlock| {
            Error::corruption(&path, format!("{what} block at offset {}: {e}", h.offset))
        };
        let index =
            Block::new(read(footer.index)?).map_err(|e| parse_err(footer.index, "index", e))?;
        let filter = BloomFilter::new(read(footer.filter)?)
            .map_err(|e| parse_err(footer.filter, "filter", e))?;
        let mut props = TableProperties::decode(&read(footer.properties)?)
            .map_err(|e| parse_err(footer.properties, "properties", e))?;
        props.file_size = len;
        let charged = index.size_in_bytes() + filter.size_in_bytes();
        if let Some(c) = &cache {
            c.recharge(0, charged);
        }
        Ok(Arc::new(Table {
            file,
            file_number,
            cache,
            data_end,
            index: Arc::new(index),
            filter,
            props,
            stats,
            charged,
        }))
    }

    pub fn properties(&self) -> &TableProperties {
        &self.props
    }

    pub fn file_number(&self) -> u64 {
        self.file_number
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    pub fn stats(&self) -> &Arc<TableStats> {
        &self.stats
    }

    /// False if the Bloom filter proves no version of `user_key` is in this table.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.may_contain(user_key)
    }

    /// The first entry whose internal key is >= `seek_ikey`, if it has the same user key
    /// (i.e. the newest version of that key visible at the seek key's sequence number).
    /// The Bloom filter is consulted first.
    pub fn get(&self, seek_ikey: &[u8], cause: IoCause) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        debug_assert!(
            seek_ikey.len() >= TRAILER_LEN,
            "seek key must be an internal key"
        );
        let user_key = &seek_ikey[..seek_ikey.len().saturating_sub(TRAILER_LEN)];
        let filtered = self.filter.is_present();
        if filtered {
            self.stats.filter_checked();
            if !self.filter.may_contain(user_key) {
                self.stats.filter_useful();
                return Ok(None);
            }
        }
        let mut index = self.index.iter();
        index.seek(seek_ikey);
        if index.valid() {
            let handle = self.index_handle(index.key(), index.value())?;
            let block = self.data_block(handle, cause)?;
            let mut it = block.iter();
            it.seek(seek_ikey);
            if it.valid() && &it.key()[..it.key().len() - TRAILER_LEN] == user_key {
                return Ok(Some((it.key().to_vec(), it.value().to_vec())));
            }
        }
        if filtered {
            self.stats.filter_false_positive();
        }
        Ok(None)
    }

    pub(crate) fn index_block(&self) -> &Arc<Block> {
        &self.index
    }

    /// Decodes the block handle stored as an index entry's value.
    pub(crate) fn index_handle(&self, key: &[u8], value: &[u8]) -> Result<BlockHandle> {
        BlockHandle::decode(value).ok_or_else(|| {
            Error::corruption(
                self.path(),
                format!(
                    "index entry for a {}-byte key holds a malformed block handle",
                    key.len()
                ),
            )
        })
    }

    /// A data block, from the cache if it is there, else from the file (and then into the
    /// cache unless `cause` is compaction).
    pub(crate) fn data_block(&self, handle: BlockHandle, cause: IoCause) -> Result<Arc<Block>> {
        if let Some(cache) = &self.cache {
            // A compaction reading its inputs takes a cached block if there is one, but is
            // not a reader of the cache: no hit or miss is counted, no LRU order changed.
            let cached = if cause == IoCause::Compaction {
                cache.peek(self.file_number, handle.offset)
            } else {
                cache.get(self.file_number, handle.offset)
            };
            if let Some(block) = cached {
                return Ok(block);
            }
        }
        let contents = read_block(self.file.as_ref(), self.data_end, handle, cause)?;
        self.stats
            .data_block_read(handle.size + BLOCK_TRAILER_LEN as u64);
        let block = Arc::new(Block::new(contents).map_err(|e| {
            Error::corruption(
                self.path(),
                format!("data block at offset {}: {e}", handle.offset),
            )
        })?);
        if let Some(cache) = &self.cache {
            if cause != IoCause::Compaction {
                cache.insert(self.file_number, handle.offset, Arc::clone(&block));
            }
        }
        Ok(block)
    }
}

/// Reads a block, verifies its trailer and decompresses it. `data_end` bounds the handle so a
/// corrupt handle is reported before it sizes a read.
fn read_block(
    file: &dyn ReadableFile,
    data_end: u64,
    handle: BlockHandle,
    cause: IoCause,
) -> Result<Vec<u8>> {
    let path = file.path();
    let in_bounds = handle.end_with_trailer().is_some_and(|end| end <= data_end);
    if !in_bounds {
        return Err(Error::corruption(
            path,
            format!(
                "block handle (offset {}, size {}) points past the data region ({data_end} bytes)",
                handle.offset, handle.size
            ),
        ));
    }
    let n = handle.size as usize;
    let mut buf = file.read_at(handle.offset, n + BLOCK_TRAILER_LEN, cause)?;
    if buf.len() != n + BLOCK_TRAILER_LEN {
        return Err(Error::corruption(
            path,
            format!("short read of the block at offset {}", handle.offset),
        ));
    }
    let block_type = buf[n];
    let stored = u32::from_le_bytes([buf[n + 1], buf[n + 2], buf[n + 3], buf[n + 4]]);
    let actual = block_checksum(&buf[..n], block_type);
    if stored != actual {
        return Err(Error::corruption(
            path,
            format!(
                "checksum mismatch in block at offset {} (stored {stored:#010x}, computed {actual:#010x})",
                handle.offset
            ),
        ));
    }
    buf.truncate(n);
    super::compression::decompress(block_type, buf)
        .map_err(|e| Error::corruption(path, format!("block at offset {}: {e}", handle.offset)))
}
