//! `CompactionStyle::Auto` (the default): leveled or tiered, chosen from the measured share
//! of the key tree in the database.
//!
//! With values in value files the tree holds keys and pointers, a few per cent of the live
//! bytes (256 B keys with 4 KiB values: about 7 %), yet leveled compaction rewrites it so
//! often that it becomes the largest term after the value log itself: the flushes of a
//! memtable full of values are small tables, so the tree is many flushes deep (VAT's
//! `C = S_l / S_0` with `S_0` a flushed table, not the memtable) and every L0 compaction
//! rewrites the whole of L1 (docs/lifetime.md, "At full scale": compaction 0.64x of the
//! user bytes leveled, 0.09x tiered). Tiering (paper 003, Eq. 9) writes each key once per
//! level without reading the next level, at the price of space: the deepest level collects
//! up to `t` runs before merging them, and under updates each run holds a version of most
//! keys, so the tree can grow to about `t` times its live size, `(t - 1) s` more space for a
//! tree share `s`.
//!
//! So the engine tiers the tree when that extra space is small against the room the user
//! granted: with a space-amplification target `T` for the value files (the GC policy's
//! knob), the tree may take half of the headroom, `(t - 1) s <= (T - 1) / 2`, and `t` is the
//! widest tiering (at most the growth factor, below the L0 stop trigger) within that
//! budget. It tiers only if VAT's model says tiering at that `t` moves fewer bytes than the
//! best leveled shape for the measured `C` ([`vat::Design::Sst`] at the `a` leveled
//! compaction measured here, [`super::auto_shape::DEFAULT_A`]). With values in the tree
//! (`s` near 1) or without a space target the tree stays leveled, as RocksDB's default.
//!
//! The choice is re-derived at every pick from the current version (table bytes, the value
//! files' live bytes, the size of the newest flushed tables) and is sticky: a tiered tree
//! goes back to leveled only when even `t = 2` exceeds the budget by a quarter, so a share
//! near the boundary does not flip the shape (a switch to leveled merges every multi-run
//! level down once, [`super::leveled::pick`]).
//!
//! `Auto` with `tree.auto_shape` is not this strategy but [`super::leveled::Leveled`]: the
//! user asked for a model-shaped leveled tree.

use super::choice::StyleChoice;
use super::leveled::Leveled;
use super::pick::Compaction;
use super::strategy::{CompactionStrategy, PickContext};
use super::tiered::{run_trigger, Tiered};
use crate::options::TreeOptions;
use crate::version::Version;
use parking_lot::Mutex;

/// The share of the GC headroom `T - 1` the tree's extra space may take.
const BUDGET_SHARE: f64 = 0.5;
/// A tiered tree stays tiered until its extra space exceeds the budget by this factor.
const HYSTERESIS: f64 = 1.25;
/// Below this many flushed tables of tree (`C`) there is nothing to shape yet.
const MIN_SIZE_RATIO: f64 = 2.0;

/// The style a pick uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resolved {
    Leveled,
    /// Tiered with `trigger` runs per level.
    Tiered(Tiered),
}

/// `CompactionStyle::Auto`: the engine's current choice (one per open database) and the
/// two strategies it chooses between.
pub struct AutoStyle {
    tree: TreeOptions,
    leveled: Leveled,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Mean size of the L0 tables last seen (flush outputs), kept while L0 is empty.
    flushed_table_bytes: Option<f64>,
    current: Option<StyleChoice>,
    /// The version the current choice was derived from (its address).
    evaluated: Option<usize>,
}

impl State {
    fn resolved(&self) -> Resolved {
        match &self.current {
            Some(c) if c.tiered => Resolved::Tiered(Tiered { trigger: c.trigger }),
            _ => Resolved::Leveled,
        }
    }
}

impl AutoStyle {
    pub fn new(tree: &TreeOptions) -> AutoStyle {
        AutoStyle {
            tree: tree.clone(),
            leveled: Leveled::new(tree),
            state: Mutex::default(),
        }
    }

    /// The style to pick with now, re-derived from `v`. `space_target` is the GC policy's
    /// space-amplification target, if it has one.
    fn resolve(&self, v: &Version, space_target: Option<f64>) -> Resolved {
        let mut st = self.state.lock();
        // Picks run under the engine's state lock, and `wait_idle` asks at every wake-up:
        // the model is evaluated once per version, not per question. (An address reused by
        // a later version only delays the next evaluation to the version after it.)
        let id = v as *const Version as usize;
        if st.evaluated == Some(id) {
            return st.resolved();
        }
        st.evaluated = Some(id);
        let l0 = &v.levels[0];
        if !l0.is_empty() {
            let mean = l0.iter().map(|f| f.meta.size).sum::<u64>() as f64 / l0.len() as f64;
            st.flushed_table_bytes = Some(mean);
        }
        let live_values: u64 = v.blobs.values().map(|b| b.live_bytes()).sum();
        let m = Measured {
            tree_bytes: v.tree_bytes() as f64,
            live_value_bytes: live_values as f64,
            flushed_table_bytes: st.flushed_table_bytes,
        };
        let was_tiered = st.current.as_ref().is_some_and(|c| c.tiered);
        if let Some(mut next) = choose(&m, &self.tree, space_target, was_tiered) {
            let prev = st.current.as_ref();
            next.changes = prev.map_or(0, |c| c.changes + u64::from(c.tiered != next.tiered));
            st.current = Some(next);
        }
        st.resolved()
    }
}

impl CompactionStrategy for AutoStyle {
    fn pick(&self, v: &Version, cx: &PickContext<'_>) -> Option<Compaction> {
        match self.resolve(v, cx.space_amp_target) {
            Resolved::Leveled => self.leveled.pick(v, cx),
            Resolved::Tiered(t) => t.pick(v, cx),
        }
    }

    fn pick_l0(&self, v: &Version, cx: &PickContext<'_>) -> Option<Compaction> {
        match self.resolve(v, cx.space_amp_target) {
            Resolved::Leveled => self.leveled.pick_l0(v, cx),
            Resolved::Tiered(t) => t.pick_l0(v, cx),
        }
    }

    /// The current choice with its reasoning (`None` until the tree has a shape to
    /// choose).
    fn style_choice(&self) -> Option<StyleChoice> {
        self.state.lock().current.clone()
    }
}

/// What the choice is made from.
#[derive(Clone, Copy, Debug)]
pub struct Measured {
    pub tree_bytes: f64,
    pub live_value_bytes: f64,
    pub flushed_table_bytes: Option<f64>,
}

/// The choice for `m`, or `None` while the tree is too small to tell (`C` below
/// [`MIN_SIZE_RATIO`] or nothing flushed yet).
pub fn choose(
    m: &Measured,
    tree: &TreeOptions,
    space_target: Option<f64>,
    was_tiered: bool,
) -> Option<StyleChoice> {
    let s0 = m.flushed_table_bytes.filter(|&b| b > 0.0)?;
    let c = m.tree_bytes / s0;
    // (A NaN ratio, from sizes that cannot be, also waits.)
    if c.is_nan() || c < MIN_SIZE_RATIO {
        return None;
    }
    let share = m.tree_bytes / (m.tree_bytes + m.live_value_bytes).max(1.0);
    let max_trigger = run_trigger(tree.growth_factor)
        .min(tree.l0_stop_writes_trigger.saturating_sub(1))
        .max(2);
    let leveled_traffic = vat::recommend(
        vat::Design::Sst,
        super::auto_shape::DEFAULT_A,
        1.0,
        &vat::Workload {
            data_bytes: m.tree_bytes,
            memtable_bytes: s0,
            // Only the value-log designs read these.
            key_bytes: 16.0,
            value_bytes: 1024.0,
            // A compaction's unit: a table, at most a flushed one while the tree's
            // tables are smaller than the target size (values are elsewhere).
            table_bytes: (tree.target_file_size as f64).min(s0),
        },
    )
    .map(|r| r.best.data_ratio)
    .unwrap_or(f64::INFINITY);
    let mut choice = StyleChoice {
        tree_share: share,
        size_ratio: c,
        leveled_traffic,
        ..StyleChoice::default()
    };
    let Some(target) = space_target else {
        choice.explanation = "no space-amplification target: leveled".into();
        return Some(choice);
    };
    let budget = BUDGET_SHARE * (target - 1.0);
    // The widest tiering whose extra space (t - 1) s fits the budget; a tiered tree keeps
    // two runs per level until even those exceed the budget by a quarter.
    let fits = |t: usize, budget: f64| (t - 1) as f64 * share <= budget;
    let trigger = (2..=max_trigger)
        .rev()
        .find(|&t| fits(t, budget))
        .or_else(|| (was_tiered && fits(2, HYSTERESIS * budget)).then_some(2));
    let Some(trigger) = trigger else {
        choice.explanation = format!(
            "tree share {share:.3}: even two runs per level would take {share:.3} more \
             space, over the budget {budget:.3} (half of the target's headroom): leveled"
        );
        return Some(choice);
    };
    let t = trigger as f64;
    let tiered_traffic = vat::stepped_traffic(0.0, (c.ln() / t.ln()).max(1.0), t);
    choice.trigger = trigger;
    choice.tiered_traffic = tiered_traffic;
    choice.tiered = tiered_traffic < leveled_traffic;
    choice.explanation = format!(
        "tree share {share:.3}, C = {c:.1} flushed tables: tiering at {trigger} runs takes \
         up to {:.3} more space (budget {budget:.3}) and moves {tiered_traffic:.1}x the tree \
         against {leveled_traffic:.1}x leveled (VAT, a = {}): {}",
        (t - 1.0) * share,
        super::auto_shape::DEFAULT_A,
        if choice.tiered { "tiered" } else { "leveled" }
    );
    Some(choice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::CompactionStyle;

    fn opts() -> TreeOptions {
        TreeOptions {
            compaction_style: CompactionStyle::Auto,
            ..Default::default()
        }
    }

    fn measured(tree_mb: f64, values_mb: f64, flushed_mb: f64) -> Measured {
        Measured {
            tree_bytes: tree_mb * 1e6,
            live_value_bytes: values_mb * 1e6,
            flushed_table_bytes: Some(flushed_mb * 1e6),
        }
    }

    #[test]
    fn a_small_deep_tree_of_pointers_is_tiered_within_the_budget() {
        // The full-scale run: 300 MB of keys and pointers, 4.1 GB of live values, 4 MB
        // flushed tables, target 1.5.
        let c = choose(&measured(300.0, 4100.0, 4.0), &opts(), Some(1.5), false).unwrap();
        assert!(c.tiered, "{c:?}");
        // Budget 0.25 over a share of 0.068: three extra copies fit, four do not.
        assert_eq!(c.trigger, 4, "{c:?}");
        assert!(c.tiered_traffic < c.leveled_traffic);
        assert!((c.size_ratio - 75.0).abs() < 1e-9);
        // A looser target buys a wider tiering.
        let loose = choose(&measured(300.0, 4100.0, 4.0), &opts(), Some(2.0), false).unwrap();
        assert_eq!(loose.trigger, 8, "{loose:?}");
    }

    #[test]
    fn values_in_the_tree_or_no_target_keep_it_leveled() {
        // Inline values: the tree is the data.
        let inline = choose(&measured(4400.0, 0.0, 64.0), &opts(), Some(1.5), false).unwrap();
        assert!(!inline.tiered, "{inline:?}");
        // 1 KiB values: share about 0.22, even two runs exceed a 0.125 budget.
        let kib = choose(&measured(300.0, 1050.0, 16.0), &opts(), Some(1.25), false).unwrap();
        assert!(!kib.tiered, "{kib:?}");
        let none = choose(&measured(300.0, 4100.0, 4.0), &opts(), None, false).unwrap();
        assert!(!none.tiered);
    }

    #[test]
    fn a_shallow_tree_is_left_to_the_model() {
        // Two flushed tables deep: nothing to tell yet.
        assert!(choose(&measured(7.0, 4100.0, 4.0), &opts(), Some(1.5), false).is_none());
        assert!(choose(
            &Measured {
                flushed_table_bytes: None,
                ..measured(300.0, 4100.0, 4.0)
            },
            &opts(),
            Some(1.5),
            false
        )
        .is_none());
        // Narrow tiering of a shallow tree moves more than leveling it: 2 runs per
        // level over C = 3 is 2 levels (3 passes) against SST-VAT's one level.
        let narrow = choose(&measured(12.0, 200.0, 4.0), &opts(), Some(1.2), false).unwrap();
        assert_eq!(narrow.trigger, 2, "{narrow:?}");
        assert_eq!(
            narrow.tiered,
            narrow.tiered_traffic < narrow.leveled_traffic
        );
    }

    #[test]
    fn the_boundary_does_not_flip_the_shape() {
        // Share 0.26 with target 1.5: one extra copy costs 0.26 > 0.25, so a leveled
        // tree stays leveled, and a tiered one stays tiered (0.26 is within a quarter over).
        let m = measured(300.0, 850.0, 4.0);
        assert!(!choose(&m, &opts(), Some(1.5), false).unwrap().tiered);
        let kept = choose(&m, &opts(), Some(1.5), true).unwrap();
        assert!(kept.tiered && kept.trigger == 2, "{kept:?}");
    }

    #[test]
    fn an_empty_tree_is_leveled_until_it_has_a_shape() {
        let s = AutoStyle::new(&opts());
        let v = Version::empty(4);
        assert_eq!(s.resolve(&v, Some(1.5)), Resolved::Leveled);
        assert!(s.style_choice().is_none());
    }
}
