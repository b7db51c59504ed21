//! What a GC job needs of the engine ([`GcHost`]), and what a job is ([`GcJob`]).

use crate::error::Result;
use crate::internal_key::SeqNo;
use crate::io::Storage;
use crate::version::{Found, Version, VersionEdit};
use crate::vlog::{BlobFile, IndexMap, ValueFileWriter, ValuePointer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A pointer to write back: the key, the pointer GC found valid, the pointer to its copy.
pub(crate) type Writeback = (Vec<u8>, ValuePointer, ValuePointer);

/// A record a GC job read: its pointer, key and value.
pub(crate) type Record = (ValuePointer, Vec<u8>, Vec<u8>);

/// What a lookup found of a record GC read.
pub(crate) enum Liveness {
    /// Its key's newest version points at it: that version.
    Live(Found),
    /// Only a snapshot still reads it.
    ForSnapshot,
    /// No reader reads it: hidden by the write of this sequence number (0 if no version
    /// of the key is left, its deletion compacted away).
    Dead(SeqNo),
}

/// Installs a version edit with the index maps it adds.
pub(crate) type ApplyWithMaps<'a> = dyn FnMut(VersionEdit, Vec<Arc<IndexMap>>) -> Result<()> + 'a;

/// An index-map job's install, run under the engine's lock ([`GcHost::install_with_maps`]).
pub(crate) type Install<'a> =
    dyn FnMut(&Version, Vec<ValuePointer>, &mut ApplyWithMaps) -> Result<()> + 'a;

/// What a GC job needs of the engine.
pub(crate) trait GcHost {
    /// Whether the newest version of `key` (as of now) points at `ptr`: the record is live.
    fn is_live(&self, key: &[u8], ptr: &ValuePointer) -> Result<bool>;
    /// A new, empty value file for the job's copies, and its path (removed if the job
    /// fails before an edit names it).
    fn create_value_file(&self) -> Result<(PathBuf, ValueFileWriter)>;
    /// Removes a file the job created and no edit names.
    fn remove_file(&self, path: &std::path::Path);
    /// Installs a version edit.
    fn apply(&self, edit: VersionEdit) -> Result<()>;
    /// Writes the new pointers through the write path, each only where the key still
    /// points at the record GC read; returns, per entry, whether it was written.
    fn write_back(&self, entries: Vec<Writeback>) -> Result<Vec<bool>>;
    /// Makes durable what the edit deleting the inputs relies on: the written-back pointers
    /// and the user writes that made the records GC skipped garbage (the lookups saw them
    /// before any sync), every write up to `hidden_by`. Both jobs call it: with a WAL it
    /// syncs the logs, unless a sync or a flush already made those writes durable;
    /// without one only a flushed table keeps them.
    fn make_durable(&self, hidden_by: SeqNo) -> Result<()>;
    /// Counts bytes copied (`from_expiring`: out of a file holding values with an expiry).
    fn relocated(&self, bytes: u64, from_expiring: bool);
    /// Output files are cut at this size.
    fn blob_file_size(&self) -> u64;

    // What the index-map job needs besides.

    /// The directory of the value files and index maps, and its storage.
    fn dir(&self) -> &Path;
    fn storage(&self) -> &Arc<dyn Storage>;
    /// The last sequence number readers see: the job's lookups read as of it.
    fn visible_seq(&self) -> SeqNo;
    /// The current version.
    fn version(&self) -> Arc<Version>;
    /// Whether each record of `records` is live as of `seq`, read by a snapshot only, or
    /// dead; looked up several at a time, all against one view of the tree.
    fn liveness(&self, records: &[Record], seq: SeqNo) -> Result<Vec<Liveness>>;
    /// Whether a memtable holds a write of `key`, visible as of `seq`, that hides the record
    /// `ptr` from every reader, snapshots included: that write's sequence number. In a
    /// file whose dead records are all known by position, these are the only dead records
    /// not known yet (no flush has found them): answered from memory, without a tree
    /// lookup.
    fn hidden_by_memtable(
        &self,
        key: &[u8],
        ptr: &ValuePointer,
        seq: SeqNo,
    ) -> Result<Option<SeqNo>>;
    /// Runs `install` under the lock that orders version edits, with the current version,
    /// the pointers compactions dropped into the job's inputs while it ran (handed over
    /// once), and the function that installs an edit with index maps; then drops the index
    /// maps no table resolves through any more.
    fn install_with_maps(&self, install: &mut Install) -> Result<()>;
}

/// One way of collecting value files.
pub(crate) trait GcJob {
    /// Collects `files` (ascending numbers): their valid values move, then an edit deletes
    /// them.
    fn run(&self, host: &dyn GcHost, files: &[Arc<BlobFile>]) -> Result<()>;
}
