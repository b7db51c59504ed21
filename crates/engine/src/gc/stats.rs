//! What `DB::stats` reports of GC: the lifetime policies' state ([`LifetimeStats`]) and
//! one record per index-map GC job ([`GcJobRecord`]). Kept here, beside what fills them,
//! so that GC imports nothing of the statistics that report on the whole engine.

use crate::internal_key::SeqNo;
use serde::{Deserialize, Serialize};

/// The thresholds and GC outcome after one GC job, for the plots of paper 000 Fig. 8-9.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct GcJobRecord {
    /// Sequence number when the job finished.
    pub seq: SeqNo,
    pub l_s: SeqNo,
    pub l_l: SeqNo,
    pub l_d: SeqNo,
    /// Garbage share of the job's input bytes.
    pub gc_ratio: f64,
    /// Garbage share of the input bytes per class (default, short, long); `None` if the job
    /// took no file of that class.
    pub invalid_ratio_by_class: [Option<f64>; 3],
    /// The job's wall time, its input record bytes, the bytes it neither read nor looked
    /// up because they were known garbage, and the records it looked up in the tree.
    #[serde(default)]
    pub micros: u64,
    #[serde(default)]
    pub input_bytes: u64,
    #[serde(default)]
    pub skipped_known: u64,
    #[serde(default)]
    pub lookups: u64,
    /// Records kept without a lookup: their file's dead records were all known.
    #[serde(default)]
    pub unlooked: u64,
}

/// What `DB::stats` reports for the lifetime policies.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LifetimeStats {
    pub l_s: SeqNo,
    pub l_l: SeqNo,
    pub l_d: SeqNo,
    pub model_calls: u64,
    /// Mean time of one model call (building the row, decaying counters, the trees).
    pub model_call_micros: f64,
    pub trainings: u64,
    pub training_failures: u64,
    pub last_training_micros: u64,
    pub samples_received: u64,
    pub samples_dropped: u64,
    pub dataset_capacity: usize,
    /// Bytes of the saved model file.
    pub model_bytes: u64,
    /// Total gain per model input column (Deltas, EDWCs, elapsed, value size), if a model
    /// exists.
    pub feature_importance: Vec<(String, f64)>,
    /// Valid values GC placed in short and long files.
    pub placed_short: u64,
    pub placed_long: u64,
    /// Old versions GC kept only because a snapshot can still read them.
    pub kept_for_snapshots: u64,
    /// Records linked to their previous write by compaction, and true lifetimes sampled.
    pub links: u64,
    pub lazy_rewrites: u64,
    pub index_maps: usize,
    pub index_map_entries: u64,
    pub gc_history: Vec<GcJobRecord>,
    /// Space-amplification trigger: the placement unit (writes per flush) and the values
    /// placed per class (`gc::placement`) by flush and by GC.
    pub placement_unit: SeqNo,
    /// Records flush found dead that compaction has not counted yet.
    pub early_garbage_records: u64,
    /// Garbage records known by position (early or counted by compaction): GC needs no
    /// lookup for them.
    pub known_garbage_records: u64,
    /// Flushed tables whose keys' previous writes were looked up after the flush, and
    /// those given up because a compaction took them first (`gc::superseded`).
    pub superseded_tables_searched: u64,
    pub superseded_tables_missed: u64,
    /// Flushed keys whose previous write the finder took from the table of recent
    /// pointers, and those it looked up in the tree (`gc::recent_pointers`).
    pub superseded_from_recent: u64,
    pub superseded_looked_up: u64,
    /// Keys the table of recent pointers holds, and its memory (charged to the block cache).
    #[serde(default)]
    pub recent_pointer_keys: u64,
    #[serde(default)]
    pub recent_pointer_bytes: u64,
    pub born_by_class: Vec<u64>,
    pub copied_by_class: Vec<u64>,
}
