//! The lifetime policies' state in an open database (paper 000, DumpKV), and their
//! [`Placement`].
//!
//! [`LifetimeRuntime`] holds what lives as long as the database: the thresholds (Eq. 3-6),
//! the model handle, the background trainer, the placement's hint tables (the write
//! history and the recent pointers), the garbage known by position, and the counters. As
//! the [`Placement`] of every value-file writer it places values by predicted death
//! ([`super::placement`]) under the space-amplification trigger; under the TTL trigger
//! flush stamps new value files with the default class and TTL `l_d` and stores a fresh
//! feature record after each pointer, compaction links that record to the key's previous
//! write and reports the true lifetime it found (sec. 4.3), and the index-map GC job
//! (sec. 4.5, shared with TerarkDB's policy) asks the classifier for each copy's class,
//! keeps its training samples and records the job.

use super::early_garbage::EarlyGarbage;
use super::placement::{self, GcRound, JobHooks, JobTally, Kept, Placement, Predictor, Previous};
use super::recent_pointers::RecentPointers;
use super::stats::{GcJobRecord, LifetimeStats};
use super::write_history::{Seen, WriteHistory};
use crate::batch::WriteBatch;
use crate::error::Result;
use crate::filename::LIFETIME_MODEL;
use crate::internal_key::{SeqNo, ValueKind};
use crate::lifetime::{
    compaction_sample_probability, gc_sample_probability, FeatureRecord, LifetimeClass,
    LifetimeThresholds, ModelHandle, SampleSource, Sampler, Trainer, TrainerConfig, TrainingSample,
};
use crate::options::{GcTrigger, LifetimeMode, LifetimeOracle, Options};
use crate::version::Version;
use crate::vlog::{BlobFile, FileLifetime, ValuePointer};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

fn load(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

#[derive(Default)]
struct Counters {
    model_calls: AtomicU64,
    model_nanos: AtomicU64,
    placed_short: AtomicU64,
    placed_long: AtomicU64,
    kept_for_snapshots: AtomicU64,
    links: AtomicU64,
    lazy_rewrites: AtomicU64,
    superseded_tables_searched: AtomicU64,
    superseded_tables_missed: AtomicU64,
    born_by_class: [AtomicU64; placement::CLASSES],
    copied_by_class: [AtomicU64; placement::CLASSES],
}

/// Lifetime state that lives as long as the open database.
pub(crate) struct LifetimeRuntime {
    /// The database directory (the model file, and file names in errors).
    dir: PathBuf,
    /// `None` for TerarkDB's policy (index maps, no classes).
    pub mode: Option<LifetimeMode>,
    pub thresholds: Arc<LifetimeThresholds>,
    pub model: Arc<ModelHandle>,
    trainer: Option<Trainer>,
    dataset_capacity: usize,
    sampler: Sampler,
    value_size_feature: bool,
    counters: Counters,
    history: Mutex<Vec<GcJobRecord>>,
    /// How values are placed at flush and GC under the space-amplification trigger;
    /// `None` under the TTL trigger (paper 000: classes only at GC) and for TerarkDB's.
    predictor: Option<Predictor>,
    oracle: Option<Arc<dyn LifetimeOracle>>,
    /// The keys' recent intervals, for the history predictor where the write path logs
    /// values (the value log as the WAL); `None` otherwise.
    writes: Option<WriteHistory>,
    /// The placement unit: the writes the last flushed memtable took.
    unit: AtomicU64,
    /// Garbage flush found before compaction counted it (space-amplification trigger).
    pub early: EarlyGarbage,
    /// The write path logs values (the value log as the WAL), so flush places nothing.
    logs_values: bool,
    /// The newest flushed write of recently flushed keys, kept by the superseded finder so
    /// that most of its lookups need no device read.
    pub recent: Mutex<RecentPointers>,
}

/// The placement's hint tables (the write history and the recent pointers) are charged to
/// the block cache (`Inner::charge_memory`, after every background job):
/// what they hold is taken from what blocks may hold. Sized from the cache (the options'
/// 0), the write history takes at most a fifth of it, so that blocks keep most of a small
/// cache: a charge beyond the cache stays resident and leaves no block cached
/// (docs/bench.md, "Memory with budgets cut to a tenth").
const HINT_TABLE_SHARE: usize = 5;
/// The recent pointers grow with the keys the finder sees, up to this fraction of the
/// cache (a fixed fifth, at most 48 MiB, forgot half the keys of a 1M-key database, and
/// the finder fell behind: docs/results/2026-11-28-gc-pace.md). At the benchmarks' 256 MiB
/// cache a million keys take 94 MiB.
const RECENT_POINTER_SHARE: usize = 2;
/// The history's size from the cache stops here (`LifetimeOptions`' documented default).
const MAX_HISTORY_SLOTS: usize = 1 << 21;

/// The write history's slots: as set, or a fifth of the cache (16 bytes a slot) rounded
/// down to the power of two the table rounds to.
fn history_slots(opts: &Options) -> usize {
    match opts.vlog.lifetime.write_history_slots {
        0 => {
            let slots = opts.cache.block_cache_capacity / HINT_TABLE_SHARE / 16;
            1 << slots.clamp(2, MAX_HISTORY_SLOTS).ilog2()
        }
        n => n,
    }
}

/// The recent pointers: a fixed table of the memory set, or (the options' 0) one that
/// holds every key the finder sees within half the cache.
fn recent_pointers(opts: &Options) -> RecentPointers {
    match opts.vlog.lifetime.recent_pointer_bytes {
        0 => RecentPointers::growing(opts.cache.block_cache_capacity / RECENT_POINTER_SHARE),
        n => RecentPointers::new(n),
    }
}

impl LifetimeRuntime {
    /// What places values, by mechanism ([`crate::stats::DbStats::placement`]).
    pub fn placement_name(&self) -> &'static str {
        match (self.predictor, self.mode) {
            (Some(Predictor::History), _) => "write-history",
            (Some(Predictor::None), _) | (None, Some(LifetimeMode::NoModel)) => "single-class",
            (Some(Predictor::Oracle), _) | (None, Some(LifetimeMode::Oracle)) => {
                "next-write-oracle"
            }
            (Some(Predictor::RateOracle), _) | (None, Some(LifetimeMode::RateOracle)) => {
                "mean-interval-oracle"
            }
            (None, Some(LifetimeMode::Learned)) => "gbm-classifier",
            // TerarkDB: index maps, no placement.
            (None, None) => "none",
        }
    }

    /// Builds the runtime for policies with index maps; `None` for the others. The model
    /// saved by an earlier run is loaded (sec. 4.6).
    pub fn open(dir: &Path, opts: &Options) -> Result<Option<LifetimeRuntime>> {
        if !opts.vlog.gc.uses_index_maps() {
            return Ok(None);
        }
        let mode = opts.vlog.gc.lifetime_mode();
        let predictor = match (mode, opts.vlog.lifetime.trigger) {
            (None, _) | (_, GcTrigger::Ttl) => None,
            (Some(LifetimeMode::Learned), _) => Some(Predictor::History),
            (Some(LifetimeMode::NoModel), _) => Some(Predictor::None),
            (Some(LifetimeMode::Oracle), _) => Some(Predictor::Oracle),
            (Some(LifetimeMode::RateOracle), _) => Some(Predictor::RateOracle),
        };
        // The classifier serves the TTL trigger only; the space-amplification trigger
        // places by the key's history, which needs no training.
        let learned = mode == Some(LifetimeMode::Learned) && predictor.is_none();
        let thresholds = Arc::new(LifetimeThresholds::new(
            opts.vlog.lifetime.thresholds.clone(),
        )?);
        let model_path = dir.join(LIFETIME_MODEL);
        let model = Arc::new(if learned {
            ModelHandle::open(&model_path)?
        } else {
            ModelHandle::new()
        });
        let trainer = if learned {
            let cfg = TrainerConfig {
                dataset_capacity: opts.vlog.lifetime.dataset_capacity,
                gbm: opts.vlog.lifetime.gbm.clone(),
                model_path: Some(model_path),
                ..TrainerConfig::default()
            };
            Some(Trainer::spawn(cfg, thresholds.clone(), model.clone())?)
        } else {
            None
        };
        Ok(Some(LifetimeRuntime {
            dir: dir.to_path_buf(),
            mode,
            thresholds,
            model,
            trainer,
            dataset_capacity: opts.vlog.lifetime.dataset_capacity,
            sampler: Sampler::new(0x5eed_011f),
            value_size_feature: opts.vlog.lifetime.value_size_feature,
            counters: Counters::default(),
            history: Mutex::new(Vec::new()),
            predictor,
            oracle: opts.vlog.lifetime_oracle.clone(),
            writes: (predictor == Some(Predictor::History) && opts.logs_values())
                .then(|| WriteHistory::new(history_slots(opts))),
            unit: AtomicU64::new(0),
            early: EarlyGarbage::default(),
            logs_values: opts.logs_values(),
            recent: Mutex::new(recent_pointers(opts)),
        }))
    }

    /// Whether the garbage a flush hides is found after the flush is installed, by its own
    /// job ([`super::superseded`]), instead of by lookups inside the flush: where the
    /// write path logs values the flush needs no previous write to place them.
    pub fn finds_superseded_after_flush(&self) -> bool {
        self.predictor.is_some() && self.logs_values
    }

    /// Whether every flushed key's previous write is found (after the flush by the finder
    /// where the write path logs values, else by the flush's own lookups, which place the
    /// values), so that a value file written from now on has every dead record known by
    /// position ([`super::early_garbage::Coverage`]) and GC keeps its other records
    /// without a lookup. Only placement by the write history looks previous writes up.
    pub fn finds_every_superseded(&self) -> bool {
        self.predictor.is_some()
    }

    /// Counts a flushed table whose keys' previous writes were looked up after the flush
    /// (`searched`), or given up because a compaction took it first.
    pub fn count_superseded_table(&self, searched: bool) {
        let c = &self.counters;
        let n = if searched {
            &c.superseded_tables_searched
        } else {
            &c.superseded_tables_missed
        };
        bump(n, 1);
    }

    /// A flush measures the placement unit: the writes its memtable took. (The sequence
    /// numbers between two flushes' starts measured it before; a flush that started late
    /// behind another made one unit long and the next short, and a key written at a
    /// steady period changed class with them.)
    pub fn measure_unit(&self, flushed_writes: usize) {
        if flushed_writes > 0 {
            self.unit.store(flushed_writes as u64, Ordering::Relaxed);
        }
    }

    /// Hooks for a flush (`below_level` 0: the key's previous write may be anywhere) or a
    /// compaction writing into `below_level - 1`.
    pub fn hooks<'a>(
        &'a self,
        version: &'a Version,
        below_level: usize,
        now: SeqNo,
    ) -> JobHooks<'a> {
        JobHooks::new(self, &self.dir, version, below_level, now)
    }

    /// Hands a sample to the trainer; without one (no-model and oracle modes), feeds the
    /// histograms directly so that the thresholds still adapt.
    fn submit(&self, sample: TrainingSample) {
        match &self.trainer {
            Some(t) => {
                t.submit(sample);
            }
            None => match sample.source {
                SampleSource::Compaction => self.thresholds.record_short(sample.lifetime),
                SampleSource::Gc => self.thresholds.record_long(sample.lifetime),
            },
        }
    }

    /// The placement class of a value GC finds valid: written at `written`, its key's
    /// history `rec`, under the space-amplification trigger. A value the write path logged
    /// has no history in its record (compaction links only the records flush writes); the
    /// write history's interval for its key stands in for it.
    fn place_copy(
        &self,
        p: Predictor,
        key: &[u8],
        written: SeqNo,
        rec: &FeatureRecord,
        now: SeqNo,
    ) -> usize {
        let history = (p == Predictor::History).then(|| {
            let age = now.saturating_sub(written);
            // The table is asked only when the record has no history of its own.
            let table = || self.writes.as_ref().and_then(|h| h.mean(key));
            match (rec.deltas().is_empty()).then(table).flatten() {
                Some(mean) => placement::at_gc_from_mean(mean, age),
                None => placement::at_gc(rec, age),
            }
        });
        let remaining = self.remaining(p, key, written, now, history);
        placement::class_of(remaining, self.unit.load(Ordering::Relaxed))
    }

    /// Whether a flushed record's features are linked to its key's previous write by
    /// compaction (paper 000 sec. 4.3). Their readers are the classifier (TTL trigger),
    /// TerarkDB's policy (none: it has no classes, but keeps the paper's records), and the
    /// history predictor. Where the write path logs values, the history predictor asks the
    /// write history instead, at the write and at GC, so linking would cost a tree lookup
    /// per flushed key (below a tiered tree's L0 merges, nearly every key) that nothing
    /// reads; the oracles and no placement read no history at all.
    pub(crate) fn links_features(&self) -> bool {
        match self.predictor {
            None => true,
            Some(Predictor::History) => !(self.logs_values && self.writes.is_some()),
            Some(_) => false,
        }
    }

    /// The predicted remaining lifetime, at `now`, of a value of `key` written at `seq`;
    /// `history` is what the history predictor knows of the key's interval.
    fn remaining(
        &self,
        p: Predictor,
        key: &[u8],
        seq: SeqNo,
        now: SeqNo,
        history: Option<SeqNo>,
    ) -> Option<SeqNo> {
        match p {
            Predictor::None => None,
            Predictor::History => history,
            Predictor::Oracle => self
                .oracle
                .as_ref()
                .and_then(|o| o.next_write(key, seq))
                .map(|n| n.saturating_sub(now)),
            Predictor::RateOracle => self.mean_interval(key),
        }
    }

    /// The class of a new value predicted to live `remaining` more, counted.
    fn place_born(&self, remaining: Option<SeqNo>) -> usize {
        let class = placement::class_of(remaining, self.unit.load(Ordering::Relaxed));
        bump(&self.counters.born_by_class[class], 1);
        class
    }

    /// The rate oracle's prediction: the key's mean write interval.
    fn mean_interval(&self, key: &[u8]) -> Option<SeqNo> {
        self.oracle.as_ref().and_then(|o| o.mean_interval(key))
    }

    /// The lifetime of a value file of placement class `class` created at `now`.
    fn placed_file(&self, class: usize, now: SeqNo) -> FileLifetime {
        FileLifetime {
            class: LifetimeClass::Default,
            created_seq: now,
            ttl: placement::horizon(class, self.unit.load(Ordering::Relaxed)),
        }
    }

    /// Counts a flush's or compaction's lifetime work as it installs (under the state
    /// lock): the garbage it counted (`counted`, its dropped pointers' records where they
    /// live now) is known by position and no longer early.
    /// `links` feature records linked and `lazy_rewrites` pointers rewritten through
    /// index maps.
    pub fn count_job(&self, links: u64, lazy_rewrites: u64, counted: &[ValuePointer]) {
        bump(&self.counters.links, links);
        bump(&self.counters.lazy_rewrites, lazy_rewrites);
        self.early.counted(counted);
    }

    /// Whether every record of `b` is known to be garbage: counted by compaction, or found
    /// early. Such a file is released without a GC job reading it.
    pub fn all_garbage(&self, b: &BlobFile) -> bool {
        b.garbage_entries() + self.early.records(b.number) >= b.entries
    }

    /// Bytes its in-memory tables hold: the write history, the recent pointers and the
    /// garbage known by position.
    pub fn memory_bytes(&self) -> usize {
        self.writes.as_ref().map_or(0, |w| w.memory())
            + self.recent.lock().memory()
            + self.early.memory()
    }

    pub fn stats(&self, v: &Version) -> LifetimeStats {
        let t = self.thresholds.current();
        let c = &self.counters;
        let (recent, recent_keys, recent_bytes) = {
            let r = self.recent.lock();
            (r.hits_and_misses(), r.len() as u64, r.memory() as u64)
        };
        let calls = load(&c.model_calls);
        let ts = self.trainer.as_ref().map(|t| t.stats());
        let get = |f: fn(&crate::lifetime::model::TrainerStats) -> &AtomicU64| {
            ts.map_or(0, |s| f(s).load(Ordering::Relaxed))
        };
        LifetimeStats {
            l_s: t.short,
            l_l: t.long,
            l_d: t.default,
            model_calls: calls,
            model_call_micros: if calls == 0 {
                0.0
            } else {
                load(&c.model_nanos) as f64 / 1e3 / calls as f64
            },
            trainings: get(|s| &s.trainings),
            training_failures: get(|s| &s.training_failures),
            last_training_micros: get(|s| &s.last_training_micros),
            samples_received: get(|s| &s.samples_received),
            samples_dropped: get(|s| &s.samples_dropped),
            dataset_capacity: self.dataset_capacity,
            model_bytes: std::fs::metadata(self.dir.join(LIFETIME_MODEL)).map_or(0, |m| m.len()),
            feature_importance: self
                .model
                .current()
                .map(|m| m.feature_importance())
                .unwrap_or_default(),
            placed_short: load(&c.placed_short),
            placed_long: load(&c.placed_long),
            kept_for_snapshots: load(&c.kept_for_snapshots),
            links: load(&c.links),
            lazy_rewrites: load(&c.lazy_rewrites),
            index_maps: v.maps.len(),
            index_map_entries: v.maps.values().map(|m| m.len() as u64).sum(),
            gc_history: self.history.lock().clone(),
            placement_unit: self.unit.load(Ordering::Relaxed),
            early_garbage_records: self.early.len() as u64,
            known_garbage_records: self.early.known() as u64,
            superseded_tables_searched: load(&c.superseded_tables_searched),
            superseded_tables_missed: load(&c.superseded_tables_missed),
            superseded_from_recent: recent.0,
            superseded_looked_up: recent.1,
            recent_pointer_keys: recent_keys,
            recent_pointer_bytes: recent_bytes,
            born_by_class: c.born_by_class.iter().map(load).collect(),
            copied_by_class: c.copied_by_class.iter().map(load).collect(),
        }
    }
}

impl Placement for LifetimeRuntime {
    fn deleted(&self, batch: &WriteBatch) {
        let Some(h) = &self.writes else {
            return;
        };
        for (seq, e) in (batch.first_seq()..).zip(batch.iter()) {
            if e.kind == ValueKind::Deletion {
                h.record(e.key, seq, true);
            }
        }
    }

    /// The history predictor asks the write history ([`WriteHistory`]): the key's smoothed
    /// interval between writes, for every key the table holds. (A tree lookup per write
    /// would find it too, but cost a quarter of the write throughput, `docs/lifetime.md`;
    /// the memtables alone know it only for keys written again within one memtable.)
    fn at_write(&self, key: &[u8], seq: SeqNo) -> usize {
        let Some(p) = self.predictor else {
            return 0;
        };
        let known = self
            .writes
            .as_ref()
            .and_then(|h| match h.record(key, seq, false) {
                Seen::Interval(m) | Seen::AfterDelete(Some(m)) => Some(m),
                Seen::New | Seen::AfterDelete(None) => None,
            });
        self.place_born(self.remaining(p, key, seq, seq, known))
    }

    fn looks_up_previous(&self) -> bool {
        self.predictor.is_some() && !self.logs_values
    }

    fn at_flush(&self, key: &[u8], seq: SeqNo, previous: Option<&Previous>, now: SeqNo) -> usize {
        let Some(p) = self.predictor else {
            return 0;
        };
        let history = previous.map(|prev| {
            let older = prev.features.as_ref().map_or(&[][..], |f| f.deltas());
            placement::at_birth(seq.saturating_sub(prev.seq), older)
        });
        self.place_born(self.remaining(p, key, seq, now, history))
    }

    fn fresh_features(&self, value_len: usize) -> FeatureRecord {
        if self.value_size_feature {
            FeatureRecord::with_value_size(value_len.min(u32::MAX as usize) as u32)
        } else {
            FeatureRecord::new()
        }
    }

    fn links_features(&self) -> bool {
        LifetimeRuntime::links_features(self)
    }

    fn observe(&self, prev: &FeatureRecord, lifetime: SeqNo) {
        // Samples feed the TTL trigger's thresholds and model only.
        if self.mode.is_none() || self.predictor.is_some() {
            return;
        }
        let t = self.thresholds.current();
        let p = compaction_sample_probability(prev, t.s_idx(), t.l_idx());
        if self.sampler.accept(p) {
            self.submit(TrainingSample {
                source: SampleSource::Compaction,
                features: prev.clone(),
                lifetime,
            });
        }
    }

    fn begin_gc(&self, now: SeqNo) -> GcRound {
        GcRound {
            thresholds: Some(self.thresholds.current()),
            ..GcRound::new(now)
        }
    }

    fn at_gc(&self, round: &mut GcRound, kept: Kept<'_>) -> usize {
        match kept {
            Kept::Unlooked { key, written } => self.unlooked_slot(key, written, round.now),
            Kept::Live { key, seq, features } => self.live_slot(round, key, seq, features),
            Kept::ForSnapshot => {
                bump(&self.counters.kept_for_snapshots, 1);
                match (self.predictor, self.mode) {
                    (Some(_), _) | (None, None) => 0,
                    (None, Some(_)) => LifetimeClass::Short as usize,
                }
            }
        }
    }

    fn gc_inputs_read(&self, round: &mut GcRound, gc_ratio: f64) {
        // Sec. 4.3: GC samples are kept with the job's valid ratio; then Eq. 3-6.
        let keep = gc_sample_probability(gc_ratio);
        for s in std::mem::take(&mut round.samples) {
            if self.sampler.accept(keep) {
                self.submit(s);
            }
        }
        if self.mode.is_some() {
            round.thresholds = Some(self.thresholds.recompute(gc_ratio));
        }
    }

    fn gc_installed(&self, round: &GcRound, tally: &JobTally) {
        let (Some(_), Some(t)) = (self.mode, &round.thresholds) else {
            return;
        };
        let ratio = |(b, g): (u64, u64)| (b > 0).then(|| g as f64 / b as f64);
        self.history.lock().push(GcJobRecord {
            seq: tally.now,
            l_s: t.short,
            l_l: t.long,
            l_d: t.default,
            gc_ratio: tally.gc_ratio,
            invalid_ratio_by_class: [
                ratio(tally.by_class[0]),
                ratio(tally.by_class[1]),
                ratio(tally.by_class[2]),
            ],
            micros: tally.started.elapsed().as_micros() as u64,
            input_bytes: tally.input_bytes,
            skipped_known: tally.skipped_known,
            lookups: tally.lookups,
            unlooked: tally.unlooked,
        });
    }

    /// Under the space-amplification trigger, the horizon of the class; under the TTL
    /// trigger, the default class and TTL `l_d` for the write path, flush and compaction,
    /// and for a GC job's output its lifetime class and that class's TTL under the
    /// thresholds the job recomputed.
    fn file_lifetime(
        &self,
        class: usize,
        created: SeqNo,
        round: Option<&GcRound>,
    ) -> Option<FileLifetime> {
        self.mode?;
        if self.predictor.is_some() {
            return Some(self.placed_file(class, created));
        }
        match round {
            None => Some(FileLifetime {
                class: LifetimeClass::Default,
                created_seq: created,
                ttl: self.thresholds.current().default,
            }),
            Some(r) => LifetimeClass::from_u8(class as u8).map(|c| FileLifetime {
                class: c,
                created_seq: created,
                ttl: c.ttl(r.thresholds.as_ref().expect("begun by this runtime")),
            }),
        }
    }
}

impl LifetimeRuntime {
    /// The class of a record GC keeps without a lookup, in a file whose dead records are
    /// all known ([`super::early_garbage::Coverage`]), written at `written` as far as the
    /// job knows. It carries no feature record: the history predictor asks the write
    /// history for the key's mean interval.
    fn unlooked_slot(&self, key: &[u8], written: SeqNo, now: SeqNo) -> usize {
        let Some(p) = self.predictor else {
            return 0;
        };
        let slot = self.place_copy(p, key, written, &FeatureRecord::new(), now);
        bump(&self.counters.copied_by_class[slot], 1);
        slot
    }

    /// The class of a record GC keeps because it is its key's newest value, written at
    /// `seq` with `rec` after its pointer: the placement class under the
    /// space-amplification trigger, else the lifetime class the TTL trigger's policy
    /// predicts (a training sample is kept for the model).
    fn live_slot(&self, round: &mut GcRound, key: &[u8], seq: SeqNo, rec: FeatureRecord) -> usize {
        let now = round.now;
        if let Some(p) = self.predictor {
            let slot = self.place_copy(p, key, seq, &rec, now);
            bump(&self.counters.copied_by_class[slot], 1);
            return slot;
        }
        let elapsed = now.saturating_sub(seq);
        let class = match self.mode {
            None => None,
            Some(LifetimeMode::NoModel) => Some(LifetimeClass::Long),
            Some(LifetimeMode::Learned) => {
                let start = Instant::now();
                let c = self.model.predict(&rec, elapsed);
                bump(
                    &self.counters.model_nanos,
                    start.elapsed().as_nanos() as u64,
                );
                bump(&self.counters.model_calls, 1);
                Some(c)
            }
            Some(m @ (LifetimeMode::Oracle | LifetimeMode::RateOracle)) => {
                let next = self.oracle.as_deref().and_then(|o| match m {
                    LifetimeMode::Oracle => o.next_write(key, seq),
                    _ => o.mean_interval(key).map(|i| now + i),
                });
                let short = round.thresholds.as_ref().map_or(0, |t| t.short);
                Some(match next {
                    Some(n) if n.saturating_sub(now) <= short => LifetimeClass::Short,
                    _ => LifetimeClass::Long,
                })
            }
        };
        if self.mode.is_some() {
            round.samples.push(TrainingSample {
                source: SampleSource::Gc,
                features: rec,
                lifetime: elapsed,
            });
        }
        let counter = match class {
            Some(LifetimeClass::Short) => &self.counters.placed_short,
            Some(_) => &self.counters.placed_long,
            None => &self.counters.kept_for_snapshots,
        };
        bump(counter, 1);
        class.map_or(0, |c| c as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::CacheOptions;
    use crate::options::LifetimeOptions;
    use crate::options::ValueLogOptions;

    fn with(cache: usize, write_history_slots: usize, recent_pointer_bytes: usize) -> Options {
        Options {
            vlog: ValueLogOptions {
                lifetime: LifetimeOptions {
                    write_history_slots,
                    recent_pointer_bytes,
                    ..LifetimeOptions::default()
                },
                ..Default::default()
            },
            cache: CacheOptions {
                block_cache_capacity: cache,
                ..Default::default()
            },
            ..Options::default()
        }
    }

    #[test]
    fn hint_tables_follow_the_cache_unless_set() {
        // The benchmarks' 256 MiB cache: the history at its largest.
        let o = with(256 << 20, 0, 0);
        assert_eq!(history_slots(&o), MAX_HISTORY_SLOTS);
        assert!(recent_pointers(&o).holds_every_key());
        // A tenth of it: the history within its fifth, no less than half of it.
        let cache = 26 << 20;
        let o = with(cache, 0, 0);
        let history = WriteHistory::new(history_slots(&o)).memory();
        assert!(
            history <= cache / 5 && history > cache / 10,
            "{history} bytes"
        );
        // Sizes set in the options are kept, even beyond the share; a recent-pointer size
        // set is a fixed table.
        let o = with(4 << 20, 1 << 18, 4 << 20);
        assert_eq!(history_slots(&o), 1 << 18);
        assert!(!recent_pointers(&o).holds_every_key());
        // Without a cache, the smallest tables.
        assert_eq!(history_slots(&with(0, 0, 0)), 2);
    }
}
