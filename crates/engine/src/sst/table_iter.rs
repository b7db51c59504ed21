//! Range reads over one table: a two-level iterator (index block, then data blocks).

use super::block::BlockIter;
use super::format::BlockHandle;
use super::iter::InternalIterator;
use super::table::Table;
use crate::error::Result;
use crate::io::IoCause;
use std::sync::Arc;

/// Iterates a table's entries, loading data blocks lazily (through the cache) as it moves.
/// It owns an `Arc<Table>`, so the table stays open while the iterator lives.
pub struct TableIter {
    table: Arc<Table>,
    cause: IoCause,
    index: BlockIter,
    /// The data block under the index cursor, and its handle.
    data: Option<(BlockHandle, BlockIter)>,
}

impl Table {
    /// An iterator over the whole table. Reads with `cause == Compaction` do not fill the
    /// block cache: a compaction reads every block once, and caching them would evict the
    /// blocks clients are actually reading.
    pub fn iter(self: &Arc<Self>, cause: IoCause) -> TableIter {
        TableIter::new(Arc::clone(self), cause)
    }
}

impl TableIter {
    fn new(table: Arc<Table>, cause: IoCause) -> Self {
        let index = table.index_block().iter();
        TableIter {
            table,
            cause,
            index,
            data: None,
        }
    }

    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// Loads the data block the index cursor points at (reusing the loaded one if it is
    /// the same block), leaving `data` unpositioned.
    fn load_data_block(&mut self) -> Result<()> {
        if !self.index.valid() {
            self.data = None;
            return Ok(());
        }
        let handle = match self
            .table
            .index_handle(self.index.key(), self.index.value())
        {
            Ok(h) => h,
            Err(e) => {
                self.data = None;
                return Err(e);
            }
        };
        if self.data.as_ref().is_some_and(|(h, _)| *h == handle) {
            return Ok(());
        }
        match self.table.data_block(handle, self.cause) {
            Ok(block) => {
                self.data = Some((handle, block.iter()));
                Ok(())
            }
            Err(e) => {
                self.data = None;
                Err(e)
            }
        }
    }

    /// After an error loading a data block, moves on to the block after it, so that the
    /// entries of the intact blocks of a damaged table can be salvaged (repair). A later
    /// block's error is returned like any other; the caller may skip again.
    pub fn skip_damaged_block(&mut self) -> Result<()> {
        if !self.index.valid() {
            return Ok(());
        }
        self.index.next();
        self.load_data_block()?;
        if let Some((_, d)) = self.data.as_mut() {
            d.seek_to_first();
        }
        self.skip_exhausted_blocks()
    }

    /// While the data cursor is exhausted, moves to the start of the next block.
    fn skip_exhausted_blocks(&mut self) -> Result<()> {
        while self.data.as_ref().is_some_and(|(_, d)| !d.valid()) {
            self.index.next();
            self.load_data_block()?;
            if let Some((_, d)) = self.data.as_mut() {
                d.seek_to_first();
            }
        }
        Ok(())
    }
}

impl TableIter {
    /// While the data cursor is exhausted walking backward, moves to the end of the block
    /// before.
    fn skip_exhausted_blocks_backward(&mut self) -> Result<()> {
        while self.data.as_ref().is_some_and(|(_, d)| !d.valid()) {
            self.index.prev();
            self.load_data_block()?;
            if let Some((_, d)) = self.data.as_mut() {
                d.seek_to_last();
            }
        }
        Ok(())
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.data.as_ref().is_some_and(|(_, d)| d.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.index.seek_to_first();
        self.load_data_block()?;
        if let Some((_, d)) = self.data.as_mut() {
            d.seek_to_first();
        }
        self.skip_exhausted_blocks()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.index.seek(target);
        self.load_data_block()?;
        if let Some((_, d)) = self.data.as_mut() {
            d.seek(target);
        }
        self.skip_exhausted_blocks()
    }

    fn next(&mut self) -> Result<()> {
        if let Some((_, d)) = self.data.as_mut() {
            d.next();
        }
        self.skip_exhausted_blocks()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.index.seek_to_last();
        self.load_data_block()?;
        if let Some((_, d)) = self.data.as_mut() {
            d.seek_to_last();
        }
        self.skip_exhausted_blocks_backward()
    }

    fn prev(&mut self) -> Result<()> {
        if let Some((_, d)) = self.data.as_mut() {
            d.prev();
        }
        self.skip_exhausted_blocks_backward()
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |(_, d)| d.key())
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |(_, d)| d.value())
    }
}
