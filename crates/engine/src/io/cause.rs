//! Why an I/O happens ([`IoCause`]): every read and write carries one, and bytes are
//! counted per cause ([`super::IoStats`]).

/// Why an I/O happened. Bytes are accounted per cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoCause {
    /// The write-ahead log of user writes.
    Wal,
    /// Table files written by a memtable flush.
    Flush,
    /// Table files written (or read) by compaction.
    Compaction,
    /// Value files written by flush (key-value separation).
    ValueLog,
    /// Value-file reads made by garbage collection.
    GcRead,
    /// Value files (and relocated values) written by garbage collection.
    GcWrite,
    /// Value index maps (paper 000, sec. 4.5).
    IndexMap,
    /// The manifest and CURRENT.
    Manifest,
    /// Reads made on behalf of a client Get or scan.
    ClientRead,
    /// Point lookups background jobs make in the tree (the write before each flushed
    /// key's). Unlike compaction's reads, they fill the block cache: a hot key is looked
    /// up at every flush that holds it.
    Lookup,
    /// Anything else (recovery reads, inspection).
    Other,
}

impl IoCause {
    pub const ALL: [IoCause; 11] = [
        IoCause::Wal,
        IoCause::Flush,
        IoCause::Compaction,
        IoCause::ValueLog,
        IoCause::GcRead,
        IoCause::GcWrite,
        IoCause::IndexMap,
        IoCause::Manifest,
        IoCause::ClientRead,
        IoCause::Lookup,
        IoCause::Other,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            IoCause::Wal => "wal",
            IoCause::Flush => "flush",
            IoCause::Compaction => "compaction",
            IoCause::ValueLog => "value_log",
            IoCause::GcRead => "gc_read",
            IoCause::GcWrite => "gc_write",
            IoCause::IndexMap => "index_map",
            IoCause::Manifest => "manifest",
            IoCause::ClientRead => "client_read",
            IoCause::Lookup => "lookup",
            IoCause::Other => "other",
        }
    }
}
