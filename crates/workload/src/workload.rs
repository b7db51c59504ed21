//! A runnable workload: the load phase and the seeded run phase of a [`WorkloadSpec`].

use std::collections::HashSet;

use crate::generator::KeyChooser;
use crate::op::Op;
use crate::rng::WorkloadRng;
use crate::spec::{ExpirySpec, SpecError, WorkloadSpec};

/// A validated spec that can produce its operations any number of times, identically.
#[derive(Debug, Clone)]
pub struct Workload {
    spec: WorkloadSpec,
}

/// Op kinds in the order the run phase draws them (the order of
/// [`crate::spec::Proportions::entries`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
    Delete,
}

const KINDS: [Kind; 6] = [
    Kind::Read,
    Kind::Update,
    Kind::Insert,
    Kind::Scan,
    Kind::ReadModifyWrite,
    Kind::Delete,
];

/// The rotation step of the hot-set phases, as a fraction of the key space: the golden
/// ratio's conjugate, whose multiples modulo 1 stay far apart (0, 0.62, 0.24, 0.85, ...),
/// so no phase's hot set lands back near an earlier one's.
const PHASE_STRIDE: f64 = 0.618_033_988_749_894_8;

impl Workload {
    /// Validates `spec`.
    pub fn new(spec: WorkloadSpec) -> Result<Self, SpecError> {
        spec.validate()?;
        Ok(Self { spec })
    }

    pub fn spec(&self) -> &WorkloadSpec {
        &self.spec
    }

    /// The load phase: `Insert` of key numbers `0..record_count` in order. The byte keys come
    /// out in hashed order ([`crate::keys`]), so this is not a sorted bulk load.
    pub fn load_ops(&self) -> impl Iterator<Item = Op> + Clone {
        (0..self.spec.record_count).map(|key| Op::Insert { key })
    }

    /// The run phase: exactly `operation_count` ops, a pure function of the spec.
    ///
    /// Each op draws a uniform u from the seeded [`WorkloadRng`] and takes the first kind
    /// whose cumulative proportion exceeds u; kinds with proportion 0 are never chosen.
    /// Reads, updates, scans and read-modify-writes draw their key from the request
    /// distribution; scans then draw a length uniform in `min_scan_length..=max_scan_length`
    /// (with YCSB's minimum of 1 the same draws as before the minimum existed). An insert
    /// takes the next unused key number and widens every chooser's key space by one (which
    /// is how `latest` follows it).
    ///
    /// Deletes draw their key like updates. A delete whose key is already deleted is
    /// issued as an update instead (the write that re-creates the key), so a delete always
    /// ends a live value and every deleted key comes back the next time it is drawn for a
    /// write or a delete.
    ///
    /// With `hot_set_phases = m > 1`, op i is in phase `p = i * m / operation_count`, and
    /// every drawn key k (of n live keys) becomes `(k + p * round(0.618 n)) mod n`: a
    /// rotation of the key space, so the distribution's shape is unchanged within a phase
    /// while its hot keys are other keys in the next one.
    pub fn run_ops(&self) -> RunOps {
        let spec = &self.spec;
        let chooser = spec
            .request_distribution
            .chooser_with_capacity(spec.record_count, spec.expected_key_space())
            .expect("validated spec builds its chooser");
        let mut cumulative = Vec::with_capacity(KINDS.len());
        let mut acc = 0.0;
        for (kind, (_, p)) in KINDS.iter().zip(spec.proportions.entries()) {
            if p > 0.0 {
                acc += p;
                cumulative.push((acc, *kind));
            }
        }
        RunOps {
            rng: WorkloadRng::new(spec.seed),
            chooser,
            key_count: spec.record_count,
            remaining: spec.operation_count,
            operation_count: spec.operation_count,
            phases: u64::from(spec.hot_set_phases),
            deleted: HashSet::new(),
            cumulative,
            min_scan_length: u64::from(spec.min_scan_length),
            max_scan_length: u64::from(spec.max_scan_length),
            expiry: spec.expiry,
        }
    }
}

/// Iterator over the run phase of a [`Workload`].
pub struct RunOps {
    rng: WorkloadRng,
    chooser: Box<dyn KeyChooser + Send>,
    key_count: u64,
    remaining: u64,
    operation_count: u64,
    /// Hot-set phases of the run (1: no shifting).
    phases: u64,
    /// Keys deleted and not written since.
    deleted: HashSet<u64>,
    /// (cumulative proportion, kind) for the kinds with a positive proportion.
    cumulative: Vec<(f64, Kind)>,
    min_scan_length: u64,
    max_scan_length: u64,
    expiry: Option<ExpirySpec>,
}

impl RunOps {
    /// Keys that exist so far: the load plus the inserts issued up to now.
    pub fn key_count(&self) -> u64 {
        self.key_count
    }

    /// The hot-set phase of the op about to be issued.
    fn phase(&self) -> u64 {
        let index = self.operation_count - self.remaining;
        (u128::from(index) * u128::from(self.phases) / u128::from(self.operation_count.max(1)))
            as u64
    }

    /// The next key from the request distribution, moved to the current phase's place.
    fn draw(&mut self) -> u64 {
        let key = self.chooser.next(&mut self.rng);
        let phase = self.phase();
        if phase == 0 {
            return key;
        }
        let n = self.key_count;
        let stride = (n as f64 * PHASE_STRIDE).round() as u128;
        let offset = u128::from(phase) * stride % u128::from(n);
        ((u128::from(key) + offset) % u128::from(n)) as u64
    }

    fn pick_kind(&mut self) -> Kind {
        let u = self.rng.next_f64();
        self.cumulative
            .iter()
            .find(|(bound, _)| u < *bound)
            // Proportions sum to 1 within 1e-9; a u in that sliver goes to the last kind.
            .or(self.cumulative.last())
            .map(|&(_, kind)| kind)
            .expect("validated proportions have a positive entry")
    }
}

impl Iterator for RunOps {
    type Item = Op;

    fn next(&mut self) -> Option<Op> {
        if self.remaining == 0 {
            return None;
        }
        let op = match self.pick_kind() {
            Kind::Insert => {
                let key = self.key_count;
                self.key_count += 1;
                self.chooser.set_item_count(self.key_count);
                Op::Insert { key }
            }
            Kind::Read => Op::Read { key: self.draw() },
            Kind::Update => {
                let key = self.draw();
                self.deleted.remove(&key);
                match self.expiry {
                    // Two more draws only when the spec has expiries, so every other
                    // workload's ops are what they were before expiries existed.
                    Some(e) if self.rng.next_f64() < e.proportion => {
                        let (lo, hi) = (f64::from(e.min_ttl).ln(), f64::from(e.max_ttl).ln());
                        let ttl = (lo + self.rng.next_f64() * (hi - lo)).exp().round() as u32;
                        Op::ExpiringUpdate {
                            key,
                            ttl: ttl.clamp(e.min_ttl, e.max_ttl),
                        }
                    }
                    _ => Op::Update { key },
                }
            }
            Kind::ReadModifyWrite => {
                let key = self.draw();
                self.deleted.remove(&key);
                Op::ReadModifyWrite { key }
            }
            Kind::Delete => {
                let key = self.draw();
                if self.deleted.remove(&key) {
                    Op::Update { key }
                } else {
                    self.deleted.insert(key);
                    Op::Delete { key }
                }
            }
            Kind::Scan => {
                let start = self.draw();
                let span = self.max_scan_length - self.min_scan_length + 1;
                let len = self.min_scan_length + self.rng.below(span);
                Op::Scan {
                    start,
                    len: len as u32,
                }
            }
        };
        self.remaining -= 1;
        Some(op)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match usize::try_from(self.remaining) {
            Ok(n) => (n, Some(n)),
            Err(_) => (usize::MAX, None),
        }
    }
}

/// Exact on 64-bit targets, where a run of more than `usize::MAX` ops cannot be specified.
impl ExactSizeIterator for RunOps {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::Distribution;
    use crate::spec::Proportions;
    use std::collections::{HashMap, HashSet};

    fn small(spec: WorkloadSpec) -> Workload {
        Workload::new(spec.with_record_count(1000).with_operation_count(20_000)).unwrap()
    }

    fn kind_counts(ops: &[Op]) -> HashMap<u8, usize> {
        let mut m = HashMap::new();
        for op in ops {
            *m.entry(op.code()).or_default() += 1;
        }
        m
    }

    #[test]
    fn load_phase_inserts_every_record_in_order() {
        let w = small(WorkloadSpec::ycsb('a').unwrap());
        let load: Vec<Op> = w.load_ops().collect();
        assert_eq!(load.len(), 1000);
        assert!(load
            .iter()
            .enumerate()
            .all(|(i, op)| *op == Op::Insert { key: i as u64 }));
    }

    #[test]
    fn run_phase_is_deterministic_exact_length_and_seeded() {
        let w = small(WorkloadSpec::ycsb('a').unwrap());
        let a: Vec<Op> = w.run_ops().collect();
        let b: Vec<Op> = w.run_ops().collect();
        assert_eq!(a.len(), 20_000);
        assert_eq!(w.run_ops().len(), 20_000);
        assert_eq!(a, b);
        let other = small(WorkloadSpec::ycsb('a').unwrap().with_seed(1));
        assert_ne!(a, other.run_ops().collect::<Vec<_>>());
    }

    #[test]
    fn mix_follows_proportions() {
        for letter in 'a'..='f' {
            let w = small(WorkloadSpec::ycsb(letter).unwrap());
            let ops: Vec<Op> = w.run_ops().collect();
            let counts = kind_counts(&ops);
            let p = w.spec().proportions;
            // Op codes: 0 insert, 1 update, 2 read, 3 scan, 4 rmw, 5 delete.
            let expected = [
                p.insert,
                p.update,
                p.read,
                p.scan,
                p.read_modify_write,
                p.delete,
            ];
            for (code, share) in expected.iter().enumerate() {
                let got = *counts.get(&(code as u8)).unwrap_or(&0) as f64 / ops.len() as f64;
                assert!(
                    (got - share).abs() < 0.015,
                    "ycsb-{letter} code {code}: {got} vs {share}"
                );
                if *share == 0.0 {
                    assert_eq!(got, 0.0, "ycsb-{letter} code {code}");
                }
            }
        }
    }

    #[test]
    fn keys_stay_in_the_live_key_space() {
        for letter in ['a', 'd', 'e'] {
            let w = small(WorkloadSpec::ycsb(letter).unwrap());
            let mut live = w.spec().record_count;
            for op in w.run_ops() {
                match op {
                    Op::Insert { key } => {
                        assert_eq!(key, live, "inserts take the next key number");
                        live += 1;
                    }
                    Op::Scan { start, len } => {
                        assert!(start < live);
                        assert!((1..=100).contains(&len));
                    }
                    other => assert!(other.key() < live, "{other:?} with {live} keys"),
                }
            }
        }
    }

    fn scan_lengths(spec: WorkloadSpec) -> Vec<u32> {
        small(spec)
            .run_ops()
            .filter_map(|op| match op {
                Op::Scan { len, .. } => Some(len),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn scan_lengths_cover_their_range() {
        let lens = scan_lengths(WorkloadSpec::ycsb('e').unwrap());
        assert_eq!(*lens.iter().min().unwrap(), 1);
        assert_eq!(*lens.iter().max().unwrap(), 100);
        let mean = lens.iter().map(|&l| f64::from(l)).sum::<f64>() / lens.len() as f64;
        assert!((mean - 50.5).abs() < 2.0, "{mean}");
        // The scan workload's minimum of 10.
        let lens = scan_lengths(WorkloadSpec::scan().unwrap());
        assert_eq!(*lens.iter().min().unwrap(), 10);
        assert_eq!(*lens.iter().max().unwrap(), 100);
        let mean = lens.iter().map(|&l| f64::from(l)).sum::<f64>() / lens.len() as f64;
        assert!((mean - 55.0).abs() < 2.0, "{mean}");
    }

    #[test]
    fn latest_reads_follow_inserts() {
        // Half inserts, half reads: reads must mostly hit keys inserted during the run.
        let spec = WorkloadSpec::custom(
            Proportions {
                read: 0.5,
                insert: 0.5,
                ..Proportions::default()
            },
            Distribution::Latest { theta: 0.99 },
        )
        .unwrap();
        let w = small(spec);
        let mut newest = w.spec().record_count - 1;
        let mut near = 0;
        let mut reads = 0;
        for op in w.run_ops() {
            match op {
                Op::Insert { key } => newest = key,
                Op::Read { key } => {
                    reads += 1;
                    near += usize::from(newest - key < 10);
                }
                _ => unreachable!(),
            }
        }
        // Theory: zeta(10)/zeta(~6000) ~ 0.3 of reads; a uniform chooser would give ~0.002.
        assert!(
            near * 4 > reads,
            "{near} of {reads} reads within 10 of the newest"
        );
    }

    #[test]
    fn write_intensive_is_updates_on_loaded_keys() {
        let w = small(WorkloadSpec::write_intensive(0.9).unwrap());
        let mut per_key = HashMap::new();
        for op in w.run_ops() {
            let Op::Update { key } = op else {
                panic!("{op:?}")
            };
            assert!(key < 1000);
            *per_key.entry(key).or_insert(0u32) += 1;
        }
        let hottest = per_key.values().max().unwrap();
        // Skewed: the hottest key gets far more than the uniform share of 20.
        assert!(*hottest > 200, "{hottest}");
    }

    /// The `k` keys written most often among `ops`.
    fn top_keys(ops: &[Op], k: usize) -> HashSet<u64> {
        let mut per_key: HashMap<u64, u32> = HashMap::new();
        for op in ops {
            *per_key.entry(op.key()).or_default() += 1;
        }
        let mut v: Vec<(u64, u32)> = per_key.into_iter().collect();
        v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.into_iter().take(k).map(|(key, _)| key).collect()
    }

    #[test]
    fn shifting_moves_the_hot_set_every_quarter() {
        let w = Workload::new(
            WorkloadSpec::shifting(0.9)
                .unwrap()
                .with_record_count(10_000)
                .with_operation_count(400_000),
        )
        .unwrap();
        let ops: Vec<Op> = w.run_ops().collect();
        assert_eq!(ops.len(), 400_000);
        assert!(ops
            .iter()
            .all(|op| matches!(op, Op::Update { key } if *key < 10_000)));
        let quarter = |q: usize| &ops[q * 100_000..(q + 1) * 100_000];
        let halves = |q: usize| {
            let (a, b) = quarter(q).split_at(50_000);
            (top_keys(a, 20), top_keys(b, 20))
        };
        for q in 0..4 {
            // Within a quarter the hot set stays put...
            let (a, b) = halves(q);
            let kept = a.intersection(&b).count();
            assert!(kept >= 15, "quarter {q}: {kept} of 20 hot keys kept");
            // ...and it is other keys than in every other quarter.
            let hot = top_keys(quarter(q), 20);
            for r in (0..4).filter(|&r| r != q) {
                let shared = hot.intersection(&top_keys(quarter(r), 20)).count();
                assert!(shared <= 2, "quarters {q} and {r} share {shared} hot keys");
            }
        }
        // Each phase is the unshifted stream rotated by its offset, op for op: phase p
        // moves key k to (k + p * 6180) mod 10000.
        let still: Vec<Op> = Workload::new(w.spec().clone().with_hot_set_phases(1))
            .unwrap()
            .run_ops()
            .collect();
        for (i, (moved, orig)) in ops.iter().zip(&still).enumerate() {
            let p = (i / 100_000) as u64;
            assert_eq!(
                moved.key(),
                (orig.key() + p * 6180) % 10_000,
                "op {i} in phase {p}"
            );
        }
    }

    /// Per key, the run-phase intervals between the ops that end its values (writes and
    /// deletes), in ops.
    fn intervals(ops: &[Op]) -> HashMap<u64, Vec<u64>> {
        let mut last: HashMap<u64, usize> = HashMap::new();
        let mut out: HashMap<u64, Vec<u64>> = HashMap::new();
        for (i, op) in ops.iter().enumerate() {
            if op.ends_value() {
                if let Some(prev) = last.insert(op.key(), i) {
                    out.entry(op.key()).or_default().push((i - prev) as u64);
                }
            }
        }
        out
    }

    /// Median over consecutive lifetime pairs of |ln(next / previous)|: how far a key's
    /// previous lifetime is from its next one (0: a perfect predictor).
    fn history_error(ops: &[Op]) -> f64 {
        let mut errs: Vec<f64> = intervals(ops)
            .values()
            .flat_map(|v| v.windows(2).map(|w| (w[1] as f64 / w[0] as f64).ln().abs()))
            .collect();
        errs.sort_by(f64::total_cmp);
        errs[errs.len() / 2]
    }

    #[test]
    fn mixed_has_rhythm_and_deletes_that_come_back() {
        let n = 10_000;
        let w = Workload::new(
            WorkloadSpec::mixed()
                .unwrap()
                .with_record_count(n)
                .with_operation_count(4 * n),
        )
        .unwrap();
        let ops: Vec<Op> = w.run_ops().collect();
        assert_eq!(ops, w.run_ops().collect::<Vec<_>>(), "deterministic");
        let mut deleted = HashSet::new();
        let mut deletes = 0;
        let mut recreated = 0;
        for op in &ops {
            assert!(op.key() < n, "{op:?}");
            match *op {
                Op::Delete { key } => {
                    assert!(deleted.insert(key), "key {key} deleted twice in a row");
                    deletes += 1;
                }
                Op::Update { key } => recreated += usize::from(deleted.remove(&key)),
                other => panic!("mixed issues only updates and deletes, got {other:?}"),
            }
        }
        let share = deletes as f64 / ops.len() as f64;
        // 10% of draws; the few that hit a deleted key become its re-creating update.
        assert!((0.08..=0.1).contains(&share), "delete share {share}");
        assert!(
            recreated > deletes / 2,
            "{recreated} of {deletes} come back"
        );
        // Some keys are never written (the cold class), many are written often.
        let written: HashSet<u64> = ops.iter().map(Op::key).collect();
        assert!(written.len() < (n as usize) / 2, "{} keys", written.len());
        // The point of the workload: a key's previous lifetime predicts its next one, which
        // under a scrambled Zipfian at a similar skew it does not.
        let mixed = history_error(&ops);
        let zipf: Vec<Op> = small(WorkloadSpec::write_intensive(0.99).unwrap())
            .run_ops()
            .collect();
        let memoryless = history_error(&zipf);
        assert!(mixed < 0.25, "mixed: median |ln ratio| {mixed}");
        assert!(memoryless > 0.6, "zipfian: median |ln ratio| {memoryless}");
    }

    #[test]
    fn deletes_work_with_any_distribution() {
        let spec = WorkloadSpec::custom(
            Proportions {
                read: 0.3,
                update: 0.4,
                delete: 0.3,
                ..Proportions::default()
            },
            Distribution::Scrambled { theta: 0.99 },
        )
        .unwrap();
        let mut deleted = HashSet::new();
        let mut reads_of_deleted = 0;
        for op in small(spec).run_ops() {
            match op {
                Op::Delete { key } => assert!(deleted.insert(key)),
                Op::Update { key } => {
                    deleted.remove(&key);
                }
                Op::Read { key } => reads_of_deleted += usize::from(deleted.contains(&key)),
                other => panic!("{other:?}"),
            }
        }
        // Reads may find a key deleted: the engines must answer "not found".
        assert!(reads_of_deleted > 0);
    }

    #[test]
    fn invalid_spec_is_refused() {
        let mut s = WorkloadSpec::ycsb('a').unwrap();
        s.proportions.read = 0.7;
        assert!(matches!(
            Workload::new(s),
            Err(SpecError::ProportionSum { .. })
        ));
    }

    #[test]
    fn expiring_updates_take_their_share_and_a_log_uniform_ttl() {
        let w = Workload::new(
            WorkloadSpec::expiring(0.9)
                .unwrap()
                .with_record_count(1000)
                .with_operation_count(100_000),
        )
        .unwrap();
        let e = w.spec().expiry.unwrap();
        assert_eq!(
            (e.min_ttl, e.max_ttl),
            (100, 50_000),
            "1/1000 to 1/2 of the run"
        );
        let ttls: Vec<u32> = w.run_ops().filter_map(|op| op.ttl()).collect();
        let share = ttls.len() as f64 / 100_000.0;
        assert!((share - 0.7).abs() < 0.01, "{share}");
        assert!(ttls.iter().all(|t| (100..=50_000).contains(t)));
        // Log-uniform: as many below the geometric mean of the bounds as above it.
        let mid = (100.0f64 * 50_000.0).sqrt();
        let below = ttls.iter().filter(|&&t| f64::from(t) < mid).count() as f64;
        assert!((below / ttls.len() as f64 - 0.5).abs() < 0.02);
        // The other ops are plain updates, and the same spec gives the same ops.
        assert!(w
            .run_ops()
            .all(|op| matches!(op, Op::Update { .. } | Op::ExpiringUpdate { .. })));
        assert!(w.run_ops().eq(w.run_ops()));
        // A spec without expiries draws exactly what it drew before expiries existed.
        let plain = WorkloadSpec::write_intensive(0.9).unwrap();
        assert!(plain.expiry.is_none());
        let mut bad = w.spec().clone();
        bad.expiry = Some(ExpirySpec {
            proportion: 0.5,
            min_ttl: 10,
            max_ttl: 5,
        });
        assert!(matches!(bad.validate(), Err(SpecError::Expiry { .. })));
    }
}
