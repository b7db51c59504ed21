//! A block's bytes parsed and validated ([`Block`]): the form blocks are cached and read
//! in (layout in the parent module's docs).

use crate::internal_key::TRAILER_LEN;
use crate::sst::coding::{get_fixed32, get_varint32};
use std::fmt;

/// Why a block's bytes could not be parsed. The table reader turns it into an
/// [`Error::Corruption`](crate::Error::Corruption) naming the file and the block offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MalformedBlock(pub String);

impl fmt::Display for MalformedBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn malformed(detail: impl Into<String>) -> MalformedBlock {
    MalformedBlock(detail.into())
}

/// A parsed, immutable block, shared through `Arc` between the cache and iterators.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    /// Where the restart array begins, i.e. the end of the entries.
    restarts_offset: usize,
    num_restarts: usize,
    num_entries: usize,
}

/// The decoded header of one entry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EntryHeader {
    pub shared: usize,
    pub non_shared: usize,
    pub value_len: usize,
    /// Offset of `key_delta`.
    pub delta_offset: usize,
}

impl EntryHeader {
    pub fn value_offset(&self) -> usize {
        self.delta_offset + self.non_shared
    }

    /// Offset of the entry after this one.
    pub fn end(&self) -> usize {
        self.value_offset() + self.value_len
    }
}

impl Block {
    /// Parses and fully validates block contents (without the trailer).
    pub fn new(data: Vec<u8>) -> Result<Block, MalformedBlock> {
        let len = data.len();
        let num_restarts = get_fixed32(&data, len.wrapping_sub(4))
            .filter(|_| len >= 4)
            .ok_or_else(|| malformed(format!("block of {len} bytes is too short")))?
            as usize;
        if num_restarts > (len - 4) / 4 {
            return Err(malformed(format!(
                "{num_restarts} restart points do not fit in a block of {len} bytes"
            )));
        }
        let restarts_offset = len - 4 - 4 * num_restarts;
        let mut block = Block {
            data,
            restarts_offset,
            num_restarts,
            num_entries: 0,
        };
        block.num_entries = block.validate_entries()?;
        Ok(block)
    }

    /// Walks every entry once, checking bounds, key lengths and that each restart point
    /// sits on an entry boundary with a whole key. Returns the number of entries.
    fn validate_entries(&self) -> Result<usize, MalformedBlock> {
        if self.num_restarts == 0 {
            return if self.restarts_offset == 0 {
                Ok(0)
            } else {
                Err(malformed("entries without any restart point"))
            };
        }
        let mut offset = 0;
        let mut next_restart = 0;
        let mut prev_key_len = 0;
        let mut entries = 0;
        while offset < self.restarts_offset {
            let h = self
                .entry_header(offset)
                .ok_or_else(|| malformed(format!("entry at {offset} runs past the entries")))?;
            let is_restart = self.restart_point(next_restart) == Some(offset);
            if is_restart {
                next_restart += 1;
                if h.shared != 0 {
                    return Err(malformed(format!(
                        "restart entry at {offset} shares {} bytes with its predecessor",
                        h.shared
                    )));
                }
            } else if entries == 0 {
                return Err(malformed("first restart point is not the first entry"));
            }
            if h.shared > prev_key_len {
                return Err(malformed(format!(
                    "entry at {offset} shares {} bytes of a {prev_key_len}-byte key",
                    h.shared
                )));
            }
            let key_len = h.shared + h.non_shared;
            if key_len < TRAILER_LEN {
                return Err(malformed(format!(
                    "entry at {offset} has a {key_len}-byte key, shorter than an internal key"
                )));
            }
            if self
                .restart_point(next_restart)
                .is_some_and(|r| r < h.end())
            {
                return Err(malformed(format!(
                    "restart point {next_restart} is not on an entry boundary"
                )));
            }
            prev_key_len = key_len;
            offset = h.end();
            entries += 1;
        }
        if next_restart != self.num_restarts {
            return Err(malformed(format!(
                "restart point {next_restart} lies outside the entries"
            )));
        }
        Ok(entries)
    }

    /// Decodes the header of the entry at `offset`; `None` if any part of the entry would
    /// extend past the entries region.
    pub(crate) fn entry_header(&self, offset: usize) -> Option<EntryHeader> {
        let region = &self.data[..self.restarts_offset];
        let mut pos = offset;
        let shared = get_varint32(region, &mut pos)? as usize;
        let non_shared = get_varint32(region, &mut pos)? as usize;
        let value_len = get_varint32(region, &mut pos)? as usize;
        let h = EntryHeader {
            shared,
            non_shared,
            value_len,
            delta_offset: pos,
        };
        let end = pos.checked_add(non_shared)?.checked_add(value_len)?;
        (end <= self.restarts_offset).then_some(h)
    }

    /// The offset stored in restart slot `i`, if there is such a slot.
    pub(crate) fn restart_point(&self, i: usize) -> Option<usize> {
        if i >= self.num_restarts {
            return None;
        }
        get_fixed32(&self.data, self.restarts_offset + 4 * i).map(|v| v as usize)
    }

    pub(crate) fn data(&self) -> &[u8] {
        &self.data
    }

    pub(crate) fn restarts_offset(&self) -> usize {
        self.restarts_offset
    }

    pub(crate) fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    pub fn num_entries(&self) -> usize {
        self.num_entries
    }

    pub fn is_empty(&self) -> bool {
        self.num_entries == 0
    }

    /// Memory charged to the block cache for this block.
    pub fn size_in_bytes(&self) -> usize {
        self.data.capacity() + std::mem::size_of::<Block>()
    }
}
