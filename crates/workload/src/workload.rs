//! A runnable workload: the load phase and the seeded run phase of a [`WorkloadSpec`].

use crate::generator::KeyChooser;
use crate::op::Op;
use crate::rng::WorkloadRng;
use crate::spec::{SpecError, WorkloadSpec};

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
}

const KINDS: [Kind; 5] = [
    Kind::Read,
    Kind::Update,
    Kind::Insert,
    Kind::Scan,
    Kind::ReadModifyWrite,
];

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
    /// distribution; scans then draw a length uniform in `1..=max_scan_length`. An insert
    /// takes the next unused key number and widens every chooser's key space by one (which
    /// is how `latest` follows it).
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
            cumulative,
            max_scan_length: u64::from(spec.max_scan_length),
        }
    }
}

/// Iterator over the run phase of a [`Workload`].
pub struct RunOps {
    rng: WorkloadRng,
    chooser: Box<dyn KeyChooser + Send>,
    key_count: u64,
    remaining: u64,
    /// (cumulative proportion, kind) for the kinds with a positive proportion.
    cumulative: Vec<(f64, Kind)>,
    max_scan_length: u64,
}

impl RunOps {
    /// Keys that exist so far: the load plus the inserts issued up to now.
    pub fn key_count(&self) -> u64 {
        self.key_count
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
        self.remaining -= 1;
        let op = match self.pick_kind() {
            Kind::Insert => {
                let key = self.key_count;
                self.key_count += 1;
                self.chooser.set_item_count(self.key_count);
                Op::Insert { key }
            }
            Kind::Read => Op::Read {
                key: self.chooser.next(&mut self.rng),
            },
            Kind::Update => Op::Update {
                key: self.chooser.next(&mut self.rng),
            },
            Kind::ReadModifyWrite => Op::ReadModifyWrite {
                key: self.chooser.next(&mut self.rng),
            },
            Kind::Scan => {
                let start = self.chooser.next(&mut self.rng);
                let len = 1 + self.rng.below(self.max_scan_length);
                Op::Scan {
                    start,
                    len: len as u32,
                }
            }
        };
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
    use std::collections::HashMap;

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
            // Op codes: 0 insert, 1 update, 2 read, 3 scan, 4 rmw.
            let expected = [p.insert, p.update, p.read, p.scan, p.read_modify_write];
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

    #[test]
    fn scan_lengths_cover_their_range() {
        let w = small(WorkloadSpec::ycsb('e').unwrap());
        let lens: Vec<u32> = w
            .run_ops()
            .filter_map(|op| match op {
                Op::Scan { len, .. } => Some(len),
                _ => None,
            })
            .collect();
        assert_eq!(*lens.iter().min().unwrap(), 1);
        assert_eq!(*lens.iter().max().unwrap(), 100);
        let mean = lens.iter().map(|&l| f64::from(l)).sum::<f64>() / lens.len() as f64;
        assert!((mean - 50.5).abs() < 2.0, "{mean}");
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

    #[test]
    fn invalid_spec_is_refused() {
        let mut s = WorkloadSpec::ycsb('a').unwrap();
        s.proportions.read = 0.7;
        assert!(matches!(
            Workload::new(s),
            Err(SpecError::ProportionSum { .. })
        ));
    }
}
