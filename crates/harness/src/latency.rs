//! Per-operation-type latency histograms (HdrHistogram, nanoseconds, 3 significant digits).

use super::report::LatencySummary;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;

/// The op types in report order.
pub const OP_NAMES: [&str; 6] = ["insert", "update", "read", "scan", "rmw", "delete"];

pub struct Latencies {
    hists: Vec<Histogram<u64>>,
}

impl Default for Latencies {
    fn default() -> Self {
        Self::new()
    }
}

impl Latencies {
    pub fn new() -> Latencies {
        let hists = OP_NAMES
            .iter()
            .map(|_| Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"))
            .collect();
        Latencies { hists }
    }

    /// Records one op of type `op` (an index into [`OP_NAMES`]) that took `nanos`.
    #[inline]
    pub fn record(&mut self, op: usize, nanos: u64) {
        self.hists[op].saturating_record(nanos.max(1));
    }

    pub fn merge(&mut self, other: &Latencies) {
        for (a, b) in self.hists.iter_mut().zip(&other.hists) {
            a.add(b).expect("same bounds");
        }
    }

    pub fn summary(&self, op: usize) -> Option<LatencySummary> {
        summarize(&self.hists[op])
    }

    /// Summaries of the op types that occurred, by name.
    pub fn summaries(&self) -> BTreeMap<String, LatencySummary> {
        OP_NAMES
            .iter()
            .enumerate()
            .filter_map(|(i, name)| Some((name.to_string(), self.summary(i)?)))
            .collect()
    }
}

fn summarize(h: &Histogram<u64>) -> Option<LatencySummary> {
    if h.is_empty() {
        return None;
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    Some(LatencySummary {
        count: h.len(),
        mean: h.mean() / 1000.0,
        p50: us(h.value_at_quantile(0.50)),
        p99: us(h.value_at_quantile(0.99)),
        p999: us(h.value_at_quantile(0.999)),
        p9999: us(h.value_at_quantile(0.9999)),
        max: us(h.max()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarizes_per_op_type() {
        let mut l = Latencies::new();
        for i in 1..=1000u64 {
            l.record(2, i * 1000);
        }
        l.record(1, 5_000);
        let s = l.summaries();
        assert_eq!(s.len(), 2);
        let read = s["read"];
        assert_eq!(read.count, 1000);
        assert!((read.p50 - 500.0).abs() < 1.0, "{read:?}");
        assert!((read.p99 - 990.0).abs() < 1.0, "{read:?}");
        assert!((read.max - 1000.0).abs() < 1.0, "{read:?}");
        let mut other = Latencies::new();
        other.record(1, 7_000);
        l.merge(&other);
        assert_eq!(l.summaries()["update"].count, 2);
    }
}
