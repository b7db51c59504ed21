//! Features of a key range at the end of a slot, and the training rows built from the
//! history (the label: the range is read in the following slot).
//!
//! Per range, as in the paper: its read counts in the last [`SLOTS_NEEDED`] slots, its
//! write counts in the same slots, and the reads of its neighbours (the ranges next to it
//! in key order stand in for the paper's correlated "precursor" ranges: a scan or a run
//! of nearby keys reads them together). Added: the mean reads per slot of the range over
//! the older history, which lets a sparse sample still mark a range that is read steadily
//! but not every slot. The paper's time-of-day feature is left out: slots here are counted
//! in reads, and the experiments last minutes, not days.

use super::collector::SlotCounts;
use std::collections::VecDeque;

/// Recent slots each feature row looks at.
pub const SLOTS_NEEDED: usize = crate::options::warming::FEATURE_WINDOW_SLOTS;

/// Columns of a feature row.
pub const NUM_FEATURES: usize = 2 * SLOTS_NEEDED + 3;

/// Writes the features of range `r` at the end of slot `t` (an index into `slots`, with
/// `t + 1 >= SLOTS_NEEDED`) into `out`.
pub fn write_row(slots: &VecDeque<SlotCounts>, t: usize, r: usize, out: &mut [f64]) {
    debug_assert!(t + 1 >= SLOTS_NEEDED && t < slots.len());
    let n = slots[t].reads.len();
    let first = t + 1 - SLOTS_NEEDED;
    let mut neighbours = 0.0;
    for (j, s) in slots.range(first..=t).enumerate() {
        out[j] = s.reads[r] as f64;
        out[SLOTS_NEEDED + j] = s.writes[r] as f64;
        let left = if r > 0 { s.reads[r - 1] } else { 0 };
        let right = if r + 1 < n { s.reads[r + 1] } else { 0 };
        neighbours += (left as u32 + right as u32) as f64;
        if j == SLOTS_NEEDED - 1 {
            out[2 * SLOTS_NEEDED] = (left as u32 + right as u32) as f64;
        }
    }
    out[2 * SLOTS_NEEDED + 1] = neighbours;
    out[2 * SLOTS_NEEDED + 2] = if first == 0 {
        f64::NAN
    } else {
        slots.range(..first).map(|s| s.reads[r] as f64).sum::<f64>() / first as f64
    };
}

/// Training rows, column-major for the booster, with labels 0/1.
#[derive(Debug, Default)]
pub struct TrainingSet {
    pub columns: Vec<f64>,
    pub labels: Vec<f64>,
}

impl TrainingSet {
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    pub fn positives(&self) -> usize {
        self.labels.iter().filter(|&&y| y > 0.5).count()
    }

    /// Every (range, slot) pair whose next slot is known, at most `max_rows` of them spread
    /// evenly over ranges and slots (a golden-ratio stride through the pairs, started at
    /// `seed`: repeatable, and no range or slot is favoured).
    pub fn build(slots: &VecDeque<SlotCounts>, max_rows: usize, seed: u64) -> TrainingSet {
        if slots.len() < SLOTS_NEEDED + 1 {
            return TrainingSet::default();
        }
        let n = slots[0].reads.len();
        let ts = slots.len() - SLOTS_NEEDED; // t in SLOTS_NEEDED-1 .. len-2
        let total = ts * n;
        let picked: Vec<usize> = if total > max_rows {
            // A stride coprime with `total` visits every pair once before repeating.
            let mut step = ((total as f64 * 0.618_033_988_7) as usize) | 1;
            while gcd(step, total) != 1 {
                step += 2;
            }
            let start = (seed as usize) % total;
            let mut v: Vec<usize> = (0..max_rows).map(|i| (start + i * step) % total).collect();
            v.sort_unstable();
            v
        } else {
            (0..total).collect()
        };
        let rows = picked.len();
        let mut columns = vec![0.0; rows * NUM_FEATURES];
        let mut labels = Vec::with_capacity(rows);
        let mut row = [0.0; NUM_FEATURES];
        for (i, &p) in picked.iter().enumerate() {
            let t = SLOTS_NEEDED - 1 + p / n;
            let r = p % n;
            write_row(slots, t, r, &mut row);
            for (f, v) in row.iter().enumerate() {
                columns[f * rows + i] = *v;
            }
            labels.push(f64::from(u8::from(slots[t + 1].reads[r] > 0)));
        }
        TrainingSet { columns, labels }
    }
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(reads: &[u16], writes: &[u16]) -> SlotCounts {
        SlotCounts {
            reads: reads.to_vec(),
            writes: writes.to_vec(),
        }
    }

    #[test]
    fn rows_hold_recent_counts_neighbours_and_older_mean() {
        let mut slots = VecDeque::new();
        for i in 0..8u16 {
            slots.push_back(slot(&[i, 10 * i, 1], &[0, 1, i]));
        }
        let mut row = [0.0; NUM_FEATURES];
        write_row(&slots, 7, 1, &mut row);
        assert_eq!(&row[..6], &[20.0, 30.0, 40.0, 50.0, 60.0, 70.0]);
        assert_eq!(&row[6..12], &[1.0; 6]);
        assert_eq!(row[12], 7.0 + 1.0, "neighbours in the last slot");
        assert_eq!(row[13], (2 + 3 + 4 + 5 + 6 + 7) as f64 + 6.0);
        assert_eq!(
            row[14], 5.0,
            "mean of older slots 0 and 1 for range 1: (0 + 10) / 2"
        );
        write_row(&slots, 5, 0, &mut row);
        assert!(row[14].is_nan(), "no older slots");
        assert_eq!(row[12], 50.0, "only a right neighbour at the edge");
    }

    #[test]
    fn training_labels_are_next_slot_reads() {
        let mut slots = VecDeque::new();
        // Range 0 read every slot, range 1 only in odd slots, range 2 never.
        for i in 0..10u16 {
            slots.push_back(slot(&[3, i % 2, 0], &[0, 0, 0]));
        }
        let t = TrainingSet::build(&slots, 1000, 1);
        assert_eq!(t.len(), 3 * 4, "t = 5..=8, three ranges");
        // Per t: range 0 positive, range 1 positive iff t + 1 odd, range 2 never.
        assert_eq!(t.positives(), 4 + 2);
        let capped = TrainingSet::build(&slots, 5, 1);
        assert_eq!(capped.len(), 5);
        let mut seen = capped.columns[..5].to_vec();
        seen.dedup();
        assert!(seen.len() > 1, "rows come from different ranges and slots");
        assert_eq!(capped.columns.len(), 5 * NUM_FEATURES);
        assert!(TrainingSet::build(&slots.iter().take(6).cloned().collect(), 10, 1).is_empty());
    }
}
