//! Labelling training samples and building the dataset (paper 000, sec. 4.3.2).
//!
//! Label 1 means "long remaining lifetime", 0 "short".
//!
//! * A compaction sample knows the true lifetime `L` of the previous write. Lifetimes
//!   below `l_d` are dropped (GC of a default file never sees such a value). Otherwise
//!   the label is `L - l_d > l_s` (Eq. 7). The model input uses `l_d` as the elapsed
//!   time, the age at which the first GC would have judged the value, so the true
//!   lifetime never leaks into the features.
//! * A GC sample only knows its elapsed lifetime. A key written once is labelled 1. Any
//!   other key is labelled by its activity in the short window (Eq. 8): its counter
//!   `EDWC_{s_idx}`, decayed to now, holding less than one write means the key went
//!   quiet, so 1; otherwise 0.
//! * The two sources each fill at most half of the dataset, so neither dominates.

use super::features::{FeatureRecord, MODEL_INPUT_LEN};
use super::thresholds::Thresholds;
use crate::internal_key::SeqNo;

/// Where a sample was observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleSource {
    /// L0-L1 compaction: `lifetime` is the true lifetime of the previous write.
    Compaction,
    /// GC of a valid value: `lifetime` is its elapsed lifetime so far.
    Gc,
}

/// A raw, unlabelled training sample.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainingSample {
    pub source: SampleSource,
    /// The record as stored with the write whose lifetime is observed.
    pub features: FeatureRecord,
    pub lifetime: SeqNo,
}

/// Eq. 7 with the exclusion rule: `None` if `lifetime < l_d`, else
/// `Some(lifetime - l_d > l_s)`.
pub fn label_compaction(lifetime: SeqNo, short: SeqNo, default: SeqNo) -> Option<bool> {
    if lifetime < default {
        return None;
    }
    Some(lifetime - default > short)
}

/// The written-once rule, then Eq. 8 read as its rationale: long when the key's decayed
/// counter of the `l_s` window holds fewer than one write.
pub fn label_gc(features: &FeatureRecord, elapsed: SeqNo, s_idx: usize) -> bool {
    if features.written_once() {
        return true;
    }
    features.decayed_edwc(elapsed)[s_idx] < 1.0
}

/// Labels `s` under thresholds `t`: the model input row and the label, or `None` if the
/// sample is excluded.
pub fn label(s: &TrainingSample, t: &Thresholds) -> Option<(Vec<f64>, bool)> {
    match s.source {
        SampleSource::Compaction => {
            let y = label_compaction(s.lifetime, t.short, t.default)?;
            Some((s.features.to_model_input(Some(t.default)), y))
        }
        SampleSource::Gc => {
            let y = label_gc(&s.features, s.lifetime, t.s_idx());
            Some((s.features.to_model_input(Some(s.lifetime)), y))
        }
    }
}

/// Default dataset size (paper 000, sec. 4.7).
pub const DEFAULT_DATASET_CAPACITY: usize = 128 * 1024;

/// What [`Dataset::push`] did with a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushOutcome {
    Added,
    /// Eq. 7's exclusion of lifetimes below `l_d`.
    Excluded,
    /// The sample's source already has its half of the dataset.
    SourceFull,
}

/// Labelled rows, stored by column as the GBM trains on them.
#[derive(Clone, Debug)]
pub struct Dataset {
    capacity: usize,
    columns: Vec<Vec<f64>>,
    labels: Vec<f64>,
    from_compaction: usize,
    from_gc: usize,
}

impl Dataset {
    /// A dataset of `capacity` rows, half reserved for each source (at least 2).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(2);
        Dataset {
            capacity,
            columns: vec![Vec::new(); MODEL_INPUT_LEN],
            labels: Vec::new(),
            from_compaction: 0,
            from_gc: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Rows from (compaction, GC).
    pub fn source_counts(&self) -> (usize, usize) {
        (self.from_compaction, self.from_gc)
    }

    /// Rows labelled long.
    pub fn positives(&self) -> usize {
        self.labels.iter().filter(|&&y| y > 0.5).count()
    }

    fn per_source(&self) -> usize {
        self.capacity / 2
    }

    /// Both sources hold their share: time to train.
    pub fn is_full(&self) -> bool {
        self.from_compaction >= self.per_source()
            && self.from_gc >= self.capacity - self.per_source()
    }

    /// Labels `s` under `t` and adds it if its source has room.
    pub fn push(&mut self, s: &TrainingSample, t: &Thresholds) -> PushOutcome {
        let room = match s.source {
            SampleSource::Compaction => self.from_compaction < self.per_source(),
            SampleSource::Gc => self.from_gc < self.capacity - self.per_source(),
        };
        if !room {
            return PushOutcome::SourceFull;
        }
        let Some((row, y)) = label(s, t) else {
            return PushOutcome::Excluded;
        };
        self.push_row(&row, y);
        match s.source {
            SampleSource::Compaction => self.from_compaction += 1,
            SampleSource::Gc => self.from_gc += 1,
        }
        PushOutcome::Added
    }

    /// Adds an already labelled row (tests and offline experiments).
    pub fn push_row(&mut self, row: &[f64], long: bool) {
        assert_eq!(row.len(), MODEL_INPUT_LEN);
        for (c, &v) in self.columns.iter_mut().zip(row) {
            c.push(v);
        }
        self.labels.push(if long { 1.0 } else { 0.0 });
    }

    /// Column-major features (`MODEL_INPUT_LEN` columns of `len()` rows) and labels.
    pub fn to_column_major(&self) -> (Vec<f64>, Vec<f64>) {
        let mut x = Vec::with_capacity(self.len() * MODEL_INPUT_LEN);
        for c in &self.columns {
            x.extend_from_slice(c);
        }
        (x, self.labels.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(short: SeqNo, long: SeqNo, default: SeqNo) -> Thresholds {
        Thresholds {
            short,
            long,
            default,
            gc_ratio: 0.5,
        }
    }

    #[test]
    fn eq7_hand_computed() {
        // l_d = 100, l_s = 50.
        assert_eq!(label_compaction(99, 50, 100), None);
        assert_eq!(label_compaction(100, 50, 100), Some(false));
        assert_eq!(label_compaction(150, 50, 100), Some(false));
        assert_eq!(label_compaction(151, 50, 100), Some(true));
    }

    #[test]
    fn eq8_and_written_once() {
        assert!(label_gc(&FeatureRecord::new(), 10, 0));
        // Two writes 2^19 apart: EDWC_0 = 1.5. Decayed by another 2^19: 0.75 < 1 -> long.
        let mut r = FeatureRecord::new();
        r.update(1 << 19, 0);
        assert!(label_gc(&r, 1 << 19, 0));
        // Judged right after the write: 1.5 >= 1 -> short.
        assert!(!label_gc(&r, 0, 0));
        // Half a half-life: 1.5 * 2^-0.5 = 1.06 -> short.
        assert!(!label_gc(&r, 1 << 18, 0));
    }

    #[test]
    fn compaction_rows_use_l_d_as_elapsed() {
        let s = TrainingSample {
            source: SampleSource::Compaction,
            features: FeatureRecord::new(),
            lifetime: 5 << 20,
        };
        let (row, y) = label(&s, &t(1 << 20, 8 << 20, 2 << 20)).unwrap();
        assert!(y); // 5M - 2M > 1M
        assert_eq!(row[0], 2.0); // bucket of l_d = 2M, not of the true 5M lifetime
    }

    #[test]
    fn sources_are_balanced() {
        let th = t(10, 1000, 20);
        let mut d = Dataset::new(6);
        let c = |lifetime| TrainingSample {
            source: SampleSource::Compaction,
            features: FeatureRecord::new(),
            lifetime,
        };
        let g = TrainingSample {
            source: SampleSource::Gc,
            features: FeatureRecord::new(),
            lifetime: 500,
        };
        assert_eq!(d.push(&c(5), &th), PushOutcome::Excluded);
        for _ in 0..3 {
            assert_eq!(d.push(&c(25), &th), PushOutcome::Added);
        }
        assert_eq!(d.push(&c(25), &th), PushOutcome::SourceFull);
        assert!(!d.is_full());
        for _ in 0..3 {
            assert_eq!(d.push(&g, &th), PushOutcome::Added);
        }
        assert_eq!(d.push(&g, &th), PushOutcome::SourceFull);
        assert!(d.is_full());
        assert_eq!(d.source_counts(), (3, 3));
        assert_eq!(d.positives(), 3); // the written-once GC samples
        let (x, y) = d.to_column_major();
        assert_eq!((x.len(), y.len()), (6 * MODEL_INPUT_LEN, 6));
        assert_eq!(&y, &[0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    }
}
