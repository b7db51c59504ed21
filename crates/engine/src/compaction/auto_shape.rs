//! `growth_factor = auto`: the engine shapes its tree with the VAT model (paper 003).
//!
//! VAT gives the insert-path cost of a leveled tree as a function of its growth factor `f`
//! and level count `l` (tied by `f^l = C`, the expected data size over the memtable size),
//! the merge amplification `a` and the device's achieved throughput `r`. The engine
//! compacts one table file at a time, so the per-file variant (SST-VAT, Eq. 12-13, with
//! `B / S_0` = table file size over memtable size) is the design it optimises.
//!
//! `a` is the running mean of the `a` every compaction records (sec. 3.2); before the
//! first compaction, [`DEFAULT_A`]. `r` is configured (measured with `halflife vat
//! measure-r`); [`DEFAULT_R`] otherwise. The best integer level count and its
//! `f = C^(1/l)` are re-derived after every compaction; `f` only changes when the best level
//! count does, so level targets do not drift with every new sample of `a`. Each change is
//! recorded with the model's explanation, readable in [`crate::DbStats::shape`].
//!
//! The chosen `f` replaces `growth_factor` in the level targets ([`super::leveled::targets`])
//! and sets the base level's largest target to `f` times what L0 holds at its trigger
//! ([`super::leveled::level1_max_bytes`]), so every level below the memtable is `f` times the
//! one above; with dynamic targets the number of levels then follows from the data size,
//! `ln(data / L0) / ln f` below L0, as the model intends. The value-log designs share the optimum of their in-place counterparts (the log
//! only adds a constant), so the same choice serves key-value separation.

use super::choice::ShapeChoice;
use crate::options::{AutoShapeConfig, TreeOptions};
use parking_lot::Mutex;
use std::fmt;

pub use crate::options::{DEFAULT_A, DEFAULT_R};

/// Bounds on the chosen growth factor: below 2 levels multiply for nothing; above 64 a
/// single merge rewrites an unreasonable share of the tree.
pub const MIN_GROWTH: f64 = 2.0;
pub const MAX_GROWTH: f64 = 64.0;

/// The choice `growth_factor = auto` made so far in an open database, and the merge
/// amplifications it was made from (each database has its own: two databases never share
/// measurements).
pub struct AutoShape {
    config: AutoShapeConfig,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    sum_a: f64,
    count: u64,
    current: Option<ShapeChoice>,
    changes: u64,
}

impl fmt::Debug for AutoShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AutoShape")
            .field("config", &self.config)
            .field("choice", &self.choice().map(|c| c.growth_factor))
            .finish()
    }
}

impl AutoShape {
    /// No history yet: the first choice is made for `tree` with the initial `a`.
    pub(crate) fn new(config: &AutoShapeConfig, tree: &TreeOptions) -> AutoShape {
        let s = AutoShape {
            config: config.clone(),
            state: Mutex::default(),
        };
        s.rechoose(tree);
        s
    }

    /// The growth factor chosen so far, if any.
    pub fn growth_factor(&self) -> Option<f64> {
        self.state.lock().current.as_ref().map(|c| c.growth_factor)
    }

    /// The current choice with its reasoning.
    pub fn choice(&self) -> Option<ShapeChoice> {
        self.state.lock().current.clone()
    }

    /// Records the merge amplification of one compaction and re-derives the shape.
    pub(crate) fn observe(&self, a: f64, tree: &TreeOptions) {
        {
            let mut st = self.state.lock();
            st.sum_a += a.clamp(0.0, 1.0);
            st.count += 1;
        }
        self.rechoose(tree);
    }

    fn rechoose(&self, tree: &TreeOptions) {
        let (a, n) = {
            let st = self.state.lock();
            match st.count {
                0 => (self.config.initial_a, 0),
                n => (st.sum_a / n as f64, n),
            }
        };
        let Some(mut next) = choose(self.config.expected_data_bytes, self.config.r, a, tree) else {
            return;
        };
        next.compactions = n;
        let mut st = self.state.lock();
        // Another compaction thread's evaluation, made with more samples, got here first.
        if st.current.as_ref().is_some_and(|c| c.compactions > n) {
            return;
        }
        let same_shape = st.current.as_ref().is_some_and(|c| c.levels == next.levels);
        if same_shape {
            // Keep f (and the level targets) steady; refresh the reasoning.
            let c = st.current.as_mut().unwrap();
            next.growth_factor = c.growth_factor;
            next.changes = c.changes;
            *c = next;
        } else {
            st.changes += u64::from(st.current.is_some());
            next.changes = st.changes;
            st.current = Some(next);
        }
    }
}

/// The model's best shape for the engine's sizes and the given `a` and `r`.
pub fn choose(expected_data_bytes: u64, r: f64, a: f64, tree: &TreeOptions) -> Option<ShapeChoice> {
    let workload = vat::Workload {
        data_bytes: expected_data_bytes as f64,
        memtable_bytes: tree.memtable_size as f64,
        // Key and value sizes only matter for the value-log designs, not for SST-VAT.
        key_bytes: 16.0,
        value_bytes: 1024.0,
        table_bytes: tree.target_file_size as f64,
    };
    let rec = vat::recommend(vat::Design::Sst, a.clamp(0.0, 1.0), r, &workload).ok()?;
    let f = rec.growth_factor().clamp(MIN_GROWTH, MAX_GROWTH);
    let mut explanation = rec.explanation.clone();
    if f != rec.growth_factor() {
        explanation.push_str(&format!(
            "clamped: growth factor {:.2} kept within [{MIN_GROWTH}, {MAX_GROWTH}]\n",
            rec.growth_factor()
        ));
    }
    Some(ShapeChoice {
        a,
        compactions: 0,
        r,
        size_ratio: workload.size_ratio(),
        growth_factor: f,
        levels: rec.levels(),
        cost: rec.best.cost,
        changes: 0,
        explanation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::leveled;

    fn opts() -> TreeOptions {
        TreeOptions {
            memtable_size: 64 << 20,
            target_file_size: 64 << 20,
            ..Default::default()
        }
    }

    #[test]
    fn choice_follows_the_model_and_the_measured_a() {
        let o = opts();
        let shape = AutoShape::new(&AutoShapeConfig::new(64 << 30), &o);
        // C = 1024 with the default a: the model's integer optimum for SST-VAT.
        let first = shape.choice().unwrap();
        let rec = vat::recommend(
            vat::Design::Sst,
            DEFAULT_A,
            DEFAULT_R,
            &vat::Workload {
                data_bytes: (64u64 << 30) as f64,
                memtable_bytes: (64u64 << 20) as f64,
                key_bytes: 16.0,
                value_bytes: 1024.0,
                table_bytes: (64u64 << 20) as f64,
            },
        )
        .unwrap();
        assert_eq!(first.levels, rec.levels());
        assert!((first.growth_factor - rec.growth_factor()).abs() < 1e-9);
        assert!((first.size_ratio - 1024.0).abs() < 1e-9);
        assert!(first.explanation.contains("level"));
        // Cheap merges (a -> 0.05) want fewer, larger levels.
        for _ in 0..50 {
            shape.observe(0.05, &o);
        }
        let cheap = shape.choice().unwrap();
        assert_eq!(cheap.compactions, 50);
        assert!(cheap.levels < first.levels, "{cheap:?} vs {first:?}");
        assert!(cheap.growth_factor > first.growth_factor);
        assert_eq!(cheap.changes, 1);
        assert_eq!(shape.growth_factor(), Some(cheap.growth_factor));
        // Level targets follow the choice.
        let f = shape.growth_factor();
        assert_eq!(leveled::growth_factor(&o, f), cheap.growth_factor);
        assert_eq!(
            leveled::level1_max_bytes(&o, f),
            cheap.growth_factor * (4 * (64 << 20)) as f64
        );
    }
}
