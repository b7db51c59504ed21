//! Writes a table file: data blocks as entries arrive, then the filter, index and
//! properties blocks and the footer (file layout in the module docs of [`crate::sst`]).

use super::block::{Block, BlockBuilder};
use super::compression;
use super::compression::Compression;
use super::filter::BloomFilterBuilder;
use super::format::{block_checksum, BlockHandle, Footer, BLOCK_TYPE_UNCOMPRESSED};
use super::properties::TableProperties;
use crate::error::{Error, Result};
use crate::internal_key::{
    cmp_internal, make_internal_key, parse_internal_key, ValueKind, KIND_SEEK, MAX_SEQ, TRAILER_LEN,
};
use crate::io::WritableFile;
use std::cmp::Ordering;
use std::sync::Arc;

/// How a table is laid out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableOptions {
    /// Target size of a data block's contents; a block is cut once it reaches this size.
    pub block_size: usize,
    /// Bloom filter bits per user key; 0 writes no filter.
    pub bloom_bits_per_key: u32,
    /// A whole key is stored every this many entries of a data block.
    pub restart_interval: usize,
    /// Codec of the data blocks.
    pub compression: Compression,
}

impl TableOptions {
    pub fn new() -> Self {
        TableOptions {
            block_size: 4096,
            bloom_bits_per_key: 10,
            restart_interval: 16,
            compression: Compression::None,
        }
    }

    pub fn block_size(mut self, bytes: usize) -> Self {
        self.block_size = bytes;
        self
    }

    pub fn bloom_bits_per_key(mut self, bits: u32) -> Self {
        self.bloom_bits_per_key = bits;
        self
    }

    pub fn restart_interval(mut self, n: usize) -> Self {
        self.restart_interval = n;
        self
    }

    pub fn compression(mut self, c: Compression) -> Self {
        self.compression = c;
        self
    }
}

impl Default for TableOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// Called with `(block offset, block)` for every data block right after it is written, so
/// that a cache can be warmed with blocks that were never read ([`crate::warming`]).
pub type BlockSink = Box<dyn FnMut(u64, &Arc<Block>) + Send>;

/// Index blocks restart at every entry: they are small and a seek in them must be exact.
const INDEX_RESTART_INTERVAL: usize = 1;

/// Builds one table file from entries in increasing internal-key order.
pub struct TableBuilder {
    file: Box<dyn WritableFile>,
    opts: TableOptions,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    filter: BloomFilterBuilder,
    props: TableProperties,
    /// Bytes written so far: the offset of the next block.
    offset: u64,
    sink: Option<BlockSink>,
    /// The last key and encoded handle of the block just written; its index entry waits
    /// for the next block's first key so that a short separator can stand in for the key.
    pending_index: Option<(Vec<u8>, Vec<u8>)>,
}

impl TableBuilder {
    pub fn new(file: Box<dyn WritableFile>, opts: TableOptions) -> Self {
        TableBuilder {
            data_block: BlockBuilder::new(opts.restart_interval),
            index_block: BlockBuilder::new(INDEX_RESTART_INTERVAL),
            filter: BloomFilterBuilder::new(opts.bloom_bits_per_key),
            props: TableProperties::default(),
            offset: file.len(),
            file,
            opts,
            sink: None,
            pending_index: None,
        }
    }

    /// Registers a callback that sees every data block as it is written.
    pub fn set_block_sink(&mut self, sink: BlockSink) {
        self.sink = Some(sink);
    }

    /// Appends an entry. `ikey` must be a well-formed internal key, strictly greater than
    /// the previous one in [`cmp_internal`] order.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let parsed = parse_internal_key(ikey).ok_or_else(|| {
            Error::corruption(
                self.file.path(),
                format!(
                    "table builder given a malformed internal key of {} bytes",
                    ikey.len()
                ),
            )
        })?;
        debug_assert!(
            self.props.num_entries == 0
                || cmp_internal(&self.props.largest_key, ikey) == Ordering::Less,
            "table keys must be strictly increasing"
        );
        let p = &mut self.props;
        if p.num_entries == 0 {
            p.smallest_key = ikey.to_vec();
            p.smallest_seq = parsed.seq;
            p.largest_seq = parsed.seq;
        }
        p.smallest_seq = p.smallest_seq.min(parsed.seq);
        p.largest_seq = p.largest_seq.max(parsed.seq);
        p.largest_key.clear();
        p.largest_key.extend_from_slice(ikey);
        p.num_entries += 1;
        p.raw_key_bytes += ikey.len() as u64;
        p.raw_value_bytes += value.len() as u64;
        match parsed.kind {
            ValueKind::Deletion => p.num_deletions += 1,
            ValueKind::Pointer | ValueKind::ExpiringPointer => p.num_pointers += 1,
            ValueKind::Value | ValueKind::ExpiringValue => {}
        }
        if let Some(t) = crate::expiry::split(parsed.kind, value).and_then(|s| s.expire_at) {
            // 0 means "none": an entry expiring at the epoch counts as expiring at 1 ms.
            let t = t.max(1);
            if p.earliest_expiry == 0 || t < p.earliest_expiry {
                p.earliest_expiry = t;
            }
        }
        if let Some((last, handle)) = self.pending_index.take() {
            let sep = separator(&last, parsed.user_key);
            self.index_block.add(&sep, &handle);
        }
        self.filter.add_key(parsed.user_key);
        self.data_block.add(ikey, value);
        if self.data_block.current_size_estimate() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Bytes the file would have if finished now, not counting filter, index and footer.
    pub fn estimated_size(&self) -> u64 {
        self.offset + self.data_block.current_size_estimate() as u64
    }

    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Writes the pending data block; its index entry is added once the next key (or the
    /// end of the table) is known. An index key K of a block satisfies
    /// last key of the block <= K < first key of the next block, so the first block whose
    /// index key is >= a target holds the target's position or is followed by it.
    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let last_key = self.data_block.last_key().to_vec();
        let contents = self.data_block.finish();
        let handle = match compression::compress(self.opts.compression, &contents) {
            Some((block_type, stored)) => self.write_block_as(&stored, block_type)?,
            None => self.write_block(&contents)?,
        };
        let mut encoded = Vec::with_capacity(20);
        handle.encode_to(&mut encoded);
        self.pending_index = Some((last_key, encoded));
        self.props.num_data_blocks += 1;
        if let Some(sink) = self.sink.as_mut() {
            match Block::new(contents) {
                Ok(block) => sink(handle.offset, &Arc::new(block)),
                Err(e) => debug_assert!(false, "builder produced a malformed block: {e}"),
            }
        }
        Ok(())
    }

    /// Appends uncompressed block contents plus the type/checksum trailer.
    fn write_block(&mut self, contents: &[u8]) -> Result<BlockHandle> {
        self.write_block_as(contents, BLOCK_TYPE_UNCOMPRESSED)
    }

    /// Appends stored contents of `block_type` plus the trailer.
    fn write_block_as(&mut self, contents: &[u8], block_type: u8) -> Result<BlockHandle> {
        let handle = BlockHandle::new(self.offset, contents.len() as u64);
        let mut trailer = [block_type, 0, 0, 0, 0];
        trailer[1..].copy_from_slice(&block_checksum(contents, block_type).to_le_bytes());
        self.file.append(contents)?;
        self.file.append(&trailer)?;
        self.offset += (contents.len() + trailer.len()) as u64;
        Ok(handle)
    }

    /// Writes the remaining blocks and the footer, syncs the file, and returns the
    /// properties of the finished table.
    pub fn finish(mut self) -> Result<TableProperties> {
        self.flush_data_block()?;
        if let Some((last, handle)) = self.pending_index.take() {
            self.index_block.add(&successor(&last), &handle);
        }
        let filter = self.filter.finish();
        let filter = self.write_block(&filter)?;
        let index = self.index_block.finish();
        let index = self.write_block(&index)?;
        let props = self.props.encode();
        let properties = self.write_block(&props)?;
        let footer = Footer {
            index,
            filter,
            properties,
        }
        .encode();
        self.file.append(&footer)?;
        self.offset += footer.len() as u64;
        self.file.sync()?;
        self.props.file_size = self.offset;
        Ok(self.props)
    }
}

/// A short index key between internal key `last` and the next block's first user key
/// `next_user`: with long keys (paper 000 uses 256 bytes) full index keys would make the
/// index, held in memory per open table, as large as a sizeable fraction of the data.
/// The user key is cut after the first differing byte, which is incremented (LevelDB's
/// shortest separator), and given the largest trailer of its user key, so it sorts after
/// every version of the block's last key and before the next block's first key.
fn separator(last: &[u8], next_user: &[u8]) -> Vec<u8> {
    let a = &last[..last.len() - TRAILER_LEN];
    let i = a.iter().zip(next_user).take_while(|(x, y)| x == y).count();
    if i < a.len() && i < next_user.len() {
        let byte = a[i];
        if byte < 0xff && byte + 1 < next_user[i] && i + 1 < a.len() {
            let mut u = a[..=i].to_vec();
            u[i] += 1;
            return make_internal_key(&u, MAX_SEQ, KIND_SEEK);
        }
    }
    last.to_vec()
}

/// A short index key at or after every key of the table's last block: the user key cut
/// after its first byte that can be incremented.
fn successor(last: &[u8]) -> Vec<u8> {
    let a = &last[..last.len() - TRAILER_LEN];
    match a.iter().position(|&b| b != 0xff) {
        Some(i) if i + 1 < a.len() => {
            let mut u = a[..=i].to_vec();
            u[i] += 1;
            make_internal_key(&u, MAX_SEQ, KIND_SEEK)
        }
        _ => last.to_vec(),
    }
}

#[cfg(test)]
mod separator_tests {
    use super::*;
    use crate::internal_key::ValueKind;

    #[test]
    fn separators_sort_between_their_neighbours_and_are_short() {
        let last = make_internal_key(b"user12345xxxxxxxx", 7, ValueKind::Value);
        let sep = separator(&last, b"user19999yyyy");
        assert_eq!(&sep[..sep.len() - TRAILER_LEN], b"user13");
        assert_eq!(cmp_internal(&last, &sep), Ordering::Less);
        let next = make_internal_key(b"user19999yyyy", MAX_SEQ, ValueKind::Pointer);
        assert_eq!(cmp_internal(&sep, &next), Ordering::Less);
        // Adjacent bytes or equal user keys: the full key is kept.
        assert_eq!(separator(&last, b"user2"), last);
        let adjacent = make_internal_key(b"user1a", 1, ValueKind::Value);
        assert_eq!(separator(&adjacent, b"user1b"), adjacent);
        let same = make_internal_key(b"k", 9, ValueKind::Value);
        assert_eq!(separator(&same, b"k"), same);
        let succ = successor(&last);
        assert_eq!(&succ[..succ.len() - TRAILER_LEN], b"v");
        assert_eq!(cmp_internal(&last, &succ), Ordering::Less);
        let ff = make_internal_key(&[0xff, 0xff], 3, ValueKind::Value);
        assert_eq!(successor(&ff), ff);
    }
}
