//! The per-key feature record stored after the value pointer (paper 000, sec. 4.2).
//!
//! A record carries what the model needs to guess how long a value will stay valid:
//! the intervals between the key's past writes (Deltas, newest first, at most 32) and ten
//! exponentially decayed write counters (EDWCs, Eq. 1) whose half-lives are `2^(19+i)`
//! sequence numbers. An optional static feature (the value size) may ride along.
//!
//! # Encoding
//!
//! ```text
//! header: u8        bits 0..=5: delta count (0..=32); bit 6: written by a flush and not
//!                   yet linked to the key's previous write (compaction links it);
//!                   bit 7: a value size follows
//! deltas: varint*   `count` LEB128 varints, newest first; each is capped at 2^56 - 1 so
//!                   it takes at most 8 bytes
//! edwc:   f32 LE*10 only when count > 0; a key written once has the implicit counters 1.0
//! size:   varint    only when bit 7 is set
//! ```
//!
//! Without the static feature a key written once costs 1 byte, and the largest record is
//! `1 + 32 * 8 + 10 * 4 = 297` bytes, the bounds of the paper's Table 2.

use crate::error::{Error, Result};
use crate::internal_key::SeqNo;
use integer_encoding::{VarInt, VarIntWriter};
use std::path::Path;

/// Most Deltas a record keeps; older intervals are dropped.
pub const MAX_DELTAS: usize = 32;
/// Number of exponentially decayed write counters.
pub const NUM_EDWC: usize = 10;
/// `EDWC_i` halves every `2^(EDWC_BASE_LOG2 + i)` sequence numbers (Eq. 1).
pub const EDWC_BASE_LOG2: u32 = 19;
/// Width of the first Delta bucket given to the model: `[0, 2^20)` is bucket 0,
/// `[2^20, 2^21)` bucket 1, `[2^21, 2^22)` bucket 2, and so on.
pub const DELTA_BUCKET_UNIT: u64 = 1 << 20;
/// Largest Delta stored; it keeps every varint within 8 bytes (sequence numbers fit in 56
/// bits anyway, see [`crate::internal_key::MAX_SEQ`]).
pub const MAX_DELTA: u64 = (1 << 56) - 1;
/// Length of the vector [`FeatureRecord::to_model_input`] returns.
pub const MODEL_INPUT_LEN: usize = 1 + MAX_DELTAS + NUM_EDWC + 1;
/// Column of the elapsed time (the current Delta_0) in the model input.
pub const INPUT_ELAPSED: usize = 0;
/// First column of the stored Deltas in the model input.
pub const INPUT_DELTAS: usize = 1;
/// First column of the EDWCs in the model input.
pub const INPUT_EDWC: usize = INPUT_DELTAS + MAX_DELTAS;
/// Column of the optional value size in the model input.
pub const INPUT_VALUE_SIZE: usize = INPUT_EDWC + NUM_EDWC;

const COUNT_MASK: u8 = 0x3f;
const FLAG_VALUE_SIZE: u8 = 0x80;
const FLAG_PENDING_LINK: u8 = 0x40;

/// A readable name for column `c` of the model input.
pub fn column_name(c: usize) -> String {
    match c {
        INPUT_ELAPSED => "elapsed".into(),
        c if (INPUT_DELTAS..INPUT_EDWC).contains(&c) => format!("delta{}", c - INPUT_DELTAS + 1),
        c if (INPUT_EDWC..INPUT_VALUE_SIZE).contains(&c) => format!("edwc{}", c - INPUT_EDWC),
        INPUT_VALUE_SIZE => "value_size".into(),
        c => format!("column{c}"),
    }
}

/// What the engine remembers about a key's write history.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureRecord {
    /// Intervals between consecutive writes, newest first.
    deltas: Vec<u64>,
    /// Counters as of the key's latest write.
    edwc: [f32; NUM_EDWC],
    value_size: Option<u32>,
    /// Not part of the features: set by flush, which cannot see the key's older writes;
    /// the first compaction that finds the previous write folds it in and clears it.
    pending_link: bool,
}

impl Default for FeatureRecord {
    fn default() -> Self {
        Self::new()
    }
}

impl FeatureRecord {
    /// The record of a key written for the first time: no Deltas, every counter 1.
    pub fn new() -> Self {
        FeatureRecord {
            deltas: Vec::new(),
            edwc: [1.0; NUM_EDWC],
            value_size: None,
            pending_link: false,
        }
    }

    /// A first-write record carrying the value size as a static feature.
    pub fn with_value_size(value_size: u32) -> Self {
        FeatureRecord {
            value_size: Some(value_size),
            ..Self::new()
        }
    }

    /// Number of stored Deltas (the paper's DeltaCount), `0..=32`.
    pub fn delta_count(&self) -> usize {
        self.deltas.len()
    }

    /// Stored Deltas, newest first.
    pub fn deltas(&self) -> &[u64] {
        &self.deltas
    }

    /// Counters as of the latest write.
    pub fn edwc(&self) -> &[f32; NUM_EDWC] {
        &self.edwc
    }

    pub fn value_size(&self) -> Option<u32> {
        self.value_size
    }

    pub fn set_value_size(&mut self, value_size: Option<u32>) {
        self.value_size = value_size;
    }

    pub fn pending_link(&self) -> bool {
        self.pending_link
    }

    pub fn set_pending_link(&mut self, pending: bool) {
        self.pending_link = pending;
    }

    /// True if the key has been written only once (no Delta yet).
    pub fn written_once(&self) -> bool {
        self.deltas.is_empty()
    }

    /// Records a new write of the key at `now` whose previous write was at `prev_write`:
    /// the interval becomes the newest Delta and every counter is updated by Eq. 1,
    /// `EDWC_i = 1 + EDWC_i * 2^(-Delta_0 / 2^(19+i))`.
    pub fn update(&mut self, now: SeqNo, prev_write: SeqNo) {
        let delta = now.saturating_sub(prev_write).min(MAX_DELTA);
        for (i, c) in self.edwc.iter_mut().enumerate() {
            *c = (1.0 + f64::from(*c) * decay(delta, i)) as f32;
        }
        if self.deltas.len() == MAX_DELTAS {
            self.deltas.pop();
        }
        self.deltas.insert(0, delta);
    }

    /// The counters as they stand `elapsed` sequence numbers after the latest write,
    /// without counting a new write: `EDWC_i * 2^(-elapsed / 2^(19+i))`.
    pub fn decayed_edwc(&self, elapsed: u64) -> [f64; NUM_EDWC] {
        let mut out = [0.0; NUM_EDWC];
        for (i, o) in out.iter_mut().enumerate() {
            *o = f64::from(self.edwc[i]) * decay(elapsed, i);
        }
        out
    }

    /// Bytes [`FeatureRecord::encode_into`] appends.
    pub fn encoded_len(&self) -> usize {
        let mut n = 1 + self
            .deltas
            .iter()
            .map(|d| d.required_space())
            .sum::<usize>();
        if !self.deltas.is_empty() {
            n += 4 * NUM_EDWC;
        }
        if let Some(s) = self.value_size {
            n += s.required_space();
        }
        n
    }

    /// Appends the compact encoding (see the module docs).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let mut header = self.deltas.len() as u8;
        if self.value_size.is_some() {
            header |= FLAG_VALUE_SIZE;
        }
        if self.pending_link {
            header |= FLAG_PENDING_LINK;
        }
        out.push(header);
        for &d in &self.deltas {
            out.write_varint(d).expect("writing to a Vec cannot fail");
        }
        if !self.deltas.is_empty() {
            for c in &self.edwc {
                out.extend_from_slice(&c.to_le_bytes());
            }
        }
        if let Some(s) = self.value_size {
            out.write_varint(s).expect("writing to a Vec cannot fail");
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut v);
        v
    }

    /// Decodes a record from the start of `data`; returns it and the bytes consumed.
    pub fn decode(data: &[u8]) -> Result<(FeatureRecord, usize)> {
        Self::decode_from(Path::new("<feature record>"), data)
    }

    /// The record stored after a value pointer. Pointers written under a policy without
    /// features carry none: the key is then treated as written once. Anything else that
    /// does not decode is corruption, reported naming `file`.
    pub fn after_pointer(file: &Path, meta: &[u8]) -> Result<FeatureRecord> {
        if meta.is_empty() {
            return Ok(FeatureRecord::new());
        }
        Self::decode_from(file, meta).map(|(r, _)| r)
    }

    /// Like [`FeatureRecord::decode`], naming `file` (the table it came from) in errors.
    pub fn decode_from(file: &Path, data: &[u8]) -> Result<(FeatureRecord, usize)> {
        let bad = |what: &str| Error::corruption(file, format!("feature record: {what}"));
        let &header = data.first().ok_or_else(|| bad("empty"))?;
        let count = (header & COUNT_MASK) as usize;
        if count > MAX_DELTAS {
            return Err(bad(&format!("{count} deltas, at most {MAX_DELTAS}")));
        }
        let mut pos = 1;
        let mut deltas = Vec::with_capacity(count);
        for _ in 0..count {
            let (d, n) = u64::decode_var(&data[pos..]).ok_or_else(|| bad("truncated delta"))?;
            if d > MAX_DELTA {
                return Err(bad("delta out of range"));
            }
            deltas.push(d);
            pos += n;
        }
        let mut edwc = [1.0f32; NUM_EDWC];
        if count > 0 {
            let raw = data
                .get(pos..pos + 4 * NUM_EDWC)
                .ok_or_else(|| bad("truncated counters"))?;
            for (i, c) in edwc.iter_mut().enumerate() {
                *c = f32::from_le_bytes(raw[4 * i..4 * i + 4].try_into().unwrap());
                // Eq. 1 keeps every counter at or above 1 once the key has a Delta.
                if !c.is_finite() || *c < 1.0 {
                    return Err(bad(&format!("counter {i} is {c}")));
                }
            }
            pos += 4 * NUM_EDWC;
        }
        let value_size = if header & FLAG_VALUE_SIZE != 0 {
            let (s, n) =
                u32::decode_var(&data[pos..]).ok_or_else(|| bad("truncated value size"))?;
            pos += n;
            Some(s)
        } else {
            None
        };
        Ok((
            FeatureRecord {
                deltas,
                edwc,
                value_size,
                pending_link: header & FLAG_PENDING_LINK != 0,
            },
            pos,
        ))
    }

    /// The model's input row for this key `elapsed` sequence numbers after its latest
    /// write (see [`FeatureRecord::write_model_input`]).
    pub fn to_model_input(&self, elapsed: Option<u64>) -> Vec<f64> {
        let mut v = vec![0.0; MODEL_INPUT_LEN];
        self.write_model_input(elapsed, &mut v);
        v
    }

    /// Fills `out` (length [`MODEL_INPUT_LEN`]) without allocating:
    /// column 0 the bucketed elapsed time (the current Delta_0; NaN when unknown),
    /// columns 1..=32 the bucketed stored Deltas, newest first, NaN where the key has
    /// fewer writes (missing, not zero), columns 33..=42 the counters decayed to now
    /// (as stored when `elapsed` is `None`), column 43 the value size or NaN.
    pub fn write_model_input(&self, elapsed: Option<u64>, out: &mut [f64]) {
        assert_eq!(out.len(), MODEL_INPUT_LEN, "model input has a fixed width");
        out[INPUT_ELAPSED] = elapsed.map_or(f64::NAN, delta_bucket);
        for i in 0..MAX_DELTAS {
            out[INPUT_DELTAS + i] = self.deltas.get(i).map_or(f64::NAN, |&d| delta_bucket(d));
        }
        let edwc = self.decayed_edwc(elapsed.unwrap_or(0));
        out[INPUT_EDWC..INPUT_EDWC + NUM_EDWC].copy_from_slice(&edwc);
        out[INPUT_VALUE_SIZE] = self.value_size.map_or(f64::NAN, f64::from);
    }
}

/// `2^(-t / 2^(19+i))`, the share of a write `t` sequence numbers ago that counter `i`
/// still holds.
#[inline]
pub fn decay(t: u64, i: usize) -> f64 {
    let half_life = (1u64 << (EDWC_BASE_LOG2 as usize + i)) as f64;
    (-(t as f64) / half_life).exp2()
}

/// Maps an interval to the index of its exponentially growing bucket:
/// 0 below 1M (2^20), then 1 for `[1M, 2M)`, 2 for `[2M, 4M)`, ... (3M maps to 2).
#[inline]
pub fn delta_bucket(delta: u64) -> f64 {
    let units = delta / DELTA_BUCKET_UNIT;
    f64::from(64 - units.leading_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq1_hand_computed() {
        let mut r = FeatureRecord::new();
        // One half-life of EDWC_0 (2^19) after the first write.
        r.update(1 + (1 << 19), 1);
        assert_eq!(r.deltas(), &[1 << 19]);
        assert!((r.edwc()[0] - 1.5).abs() < 1e-6);
        // EDWC_1's half-life is 2^20: 1 + 2^-0.5.
        assert!((f64::from(r.edwc()[1]) - (1.0 + 0.5f64.sqrt())).abs() < 1e-6);
        // A second write one EDWC_0 half-life later: 1 + 1.5 / 2 = 1.75.
        r.update(1 + (2 << 19), 1 + (1 << 19));
        assert!((r.edwc()[0] - 1.75).abs() < 1e-6);
        assert_eq!(r.delta_count(), 2);
        // A zero interval counts fully: 1 + 1.75.
        r.update(1 + (2 << 19), 1 + (2 << 19));
        assert!((r.edwc()[0] - 2.75).abs() < 1e-6);
        assert_eq!(r.deltas(), &[0, 1 << 19, 1 << 19]);
    }

    #[test]
    fn decayed_counters_do_not_count_a_write() {
        let mut r = FeatureRecord::new();
        r.update(100, 0);
        let before = r.edwc()[0] as f64;
        let d = r.decayed_edwc(1 << 19);
        assert!((d[0] - before / 2.0).abs() < 1e-6);
        assert_eq!(r.decayed_edwc(0)[3], r.edwc()[3] as f64);
    }

    #[test]
    fn keeps_at_most_32_deltas_newest_first() {
        let mut r = FeatureRecord::new();
        for i in 1..=40u64 {
            r.update(i * 1000, (i - 1) * 1000 + i);
        }
        assert_eq!(r.delta_count(), MAX_DELTAS);
        assert_eq!(r.deltas()[0], 1000 - 40);
        assert_eq!(r.deltas()[31], 1000 - 9);
    }

    #[test]
    fn bucketing() {
        let m = DELTA_BUCKET_UNIT;
        assert_eq!(delta_bucket(0), 0.0);
        assert_eq!(delta_bucket(m - 1), 0.0);
        assert_eq!(delta_bucket(m), 1.0);
        assert_eq!(delta_bucket(2 * m - 1), 1.0);
        assert_eq!(delta_bucket(2 * m), 2.0);
        assert_eq!(delta_bucket(3 * m), 2.0);
        assert_eq!(delta_bucket(4 * m), 3.0);
        assert_eq!(delta_bucket(u64::MAX), 44.0);
    }

    #[test]
    fn sizes_match_table_2() {
        let r = FeatureRecord::new();
        assert_eq!(r.encode().len(), 1);
        // Worst case: every Delta needs the full 8 bytes.
        let mut r = FeatureRecord::new();
        let big = 1u64 << 55;
        let mut now = 0u64;
        for past in 1..=40usize {
            let prev = now;
            now += big;
            r.update(now, prev);
            let n = r.encode().len();
            assert_eq!(n, r.encoded_len());
            let bound = 1 + 8 * past.min(MAX_DELTAS) + 40;
            assert_eq!(n, bound, "{past} past writes");
        }
        assert_eq!(r.encode().len(), 297);
        // Table 2's rows for 1, 2, 3 past writes are upper bounds under varint.
        let mut r = FeatureRecord::new();
        r.update(1000, 0);
        assert!(r.encode().len() <= 49);
        r.update(2000, 1000);
        assert!(r.encode().len() <= 57);
        r.update(3000, 2000);
        assert!(r.encode().len() <= 65);
    }

    #[test]
    fn round_trip_with_and_without_value_size() {
        let mut r = FeatureRecord::with_value_size(4096);
        assert_eq!(r.encode().len(), 3);
        for i in 1..10u64 {
            r.update(i * i * 977, (i - 1) * (i - 1) * 977);
        }
        for rec in [r.clone(), {
            let mut x = r.clone();
            x.set_value_size(None);
            x
        }] {
            let mut buf = b"ptr".to_vec();
            rec.encode_into(&mut buf);
            buf.extend_from_slice(b"tail");
            let (d, n) = FeatureRecord::decode(&buf[3..]).unwrap();
            assert_eq!(d, rec);
            assert_eq!(&buf[3 + n..], b"tail");
        }
        let (d, n) = FeatureRecord::decode(&[0]).unwrap();
        assert_eq!((d, n), (FeatureRecord::new(), 1));
    }

    #[test]
    fn corrupt_records_are_typed_errors() {
        let mut r = FeatureRecord::new();
        r.update(10, 1);
        let good = r.encode();
        for cut in 0..good.len() {
            let e = FeatureRecord::decode(&good[..cut]).unwrap_err();
            assert!(e.is_corruption(), "{cut}: {e}");
        }
        assert!(FeatureRecord::decode(&[33]).unwrap_err().is_corruption());
        let (r, n) = FeatureRecord::decode(&[0x40]).unwrap();
        assert!(r.pending_link() && r.written_once() && n == 1);
        assert!(FeatureRecord::decode(&[0x41]).unwrap_err().is_corruption());
        let mut nan = good.clone();
        let at = nan.len() - 4;
        nan[at..].copy_from_slice(&f32::NAN.to_le_bytes());
        assert!(FeatureRecord::decode(&nan).unwrap_err().is_corruption());
        assert!(FeatureRecord::decode(&[0x80]).unwrap_err().is_corruption());
    }

    #[test]
    fn model_input_marks_missing_deltas_as_nan() {
        let mut r = FeatureRecord::with_value_size(100);
        r.update(3 * DELTA_BUCKET_UNIT, 0);
        let v = r.to_model_input(Some(DELTA_BUCKET_UNIT));
        assert_eq!(v.len(), MODEL_INPUT_LEN);
        assert_eq!(v[INPUT_ELAPSED], 1.0);
        assert_eq!(v[INPUT_DELTAS], 2.0);
        assert!(v[INPUT_DELTAS + 1..INPUT_EDWC].iter().all(|x| x.is_nan()));
        assert!(v[INPUT_EDWC] < f64::from(r.edwc()[0]));
        assert_eq!(v[INPUT_VALUE_SIZE], 100.0);
        let w = FeatureRecord::new().to_model_input(None);
        assert!(w[INPUT_ELAPSED].is_nan() && w[INPUT_VALUE_SIZE].is_nan());
        assert_eq!(w[INPUT_EDWC], 1.0);
    }
}
