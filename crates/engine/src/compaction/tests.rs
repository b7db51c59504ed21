//! Data-driven tests of the strategies, in the style of Pebble's `testdata/`: each file
//! under `src/compaction/testdata/` is a script of commands, each followed by `----` and
//! the output it must print (the `datadriven` crate's format; `#` lines are comments).
//! A script configures a strategy, builds a tree by flushes (and files placed by hand),
//! lets the strategy pick and applies each pick as the engine's compaction would, and
//! prints the levels after every step, so a change of policy shows as a change of text.
//!
//! After a deliberate change of behaviour, regenerate the expected outputs and read the
//! diff: `REWRITE=1 cargo test -p halflife-engine compaction::tests`.
//!
//! Commands (sizes take K and M suffixes, KiB and MiB):
//!
//! - `options [style=leveled|tiered|auto] [growth=F] [levels=N] [l0_trigger=N]
//!   [l0_stop=N] [level1=SIZE] [file_size=SIZE] [memtable=SIZE] [dynamic=BOOL]
//!   [auto_shape=SIZE] [space_target=T]`: an empty tree under a new strategy (the
//!   options not given are the engine's defaults; `auto_shape` turns `growth_factor =
//!   auto` on with that expected data size).
//! - `flush`: one L0 table per input line, `LO-HI SIZE` (integer keys), newest last.
//! - `add level=N [run=R]`: tables placed at a level, one per input line, older than
//!   everything flushed after them.
//! - `values live=SIZE`: a value file holding that many live bytes (what the auto style
//!   weighs the tree against).
//! - `pick [busy=(N,..)] [forced=(N,..)]`, `pick-l0`: print what the strategy picks, apply
//!   nothing.
//! - `compact [busy=..] [forced=..]`, `compact-l0`: pick, apply as the engine would (a
//!   single input without overlaps moves; otherwise the inputs are merged into tables of
//!   at most `file_size`, their bytes spread evenly over their keys, joining the run the
//!   pick names), print the pick and the levels.
//! - `settle [max=N]`: compact until nothing is picked (at most N times, default 100),
//!   one line per compaction, then the levels.
//! - `observe a=A [times=N]`: tell the strategy a compaction's merge amplification.
//! - `targets`: leveled targets and scores of the current tree.
//! - `choice`: what the auto style or `auto_shape` chose, and why.
//! - `levels`: print the levels.

use super::leveled;
use super::pick::Compaction;
use super::strategy::{CompactionStrategy, PickContext};
use crate::internal_key::{make_internal_key, user_key, ValueKind};
use crate::io::{FileStorage, Storage};
use crate::options::{AutoShapeConfig, CompactionStyle, TreeOptions};
use crate::version::{FileMeta, Version, VersionEdit};
use crate::vlog::file::{BlobMeta, FILE_HEADER};
use crate::vlog::FileExpiry;
use datadriven::TestCase;
use std::collections::HashSet;
use std::fmt::Write;
use std::path::Path;
use std::sync::Arc;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// A tree built by a script, and the strategy picking for it.
struct Tree {
    tree: TreeOptions,
    space_amp_target: Option<f64>,
    strategy: Box<dyn CompactionStrategy>,
    version: Version,
    storage: Arc<dyn Storage>,
    next_file: u64,
    next_seq: u64,
}

impl Tree {
    fn new(tree: TreeOptions, space_amp_target: Option<f64>) -> Tree {
        Tree {
            strategy: super::strategy_for(&tree),
            version: Version::empty(tree.num_levels),
            tree,
            space_amp_target,
            storage: Arc::new(FileStorage::new()),
            next_file: 1,
            next_seq: 1,
        }
    }

    fn apply(&mut self, edit: &VersionEdit) {
        self.version = self
            .version
            .apply(edit, Path::new("/nonexistent"), &self.storage, &None);
        self.version.check_invariants().expect("tree invariants");
    }

    fn new_file(&mut self) -> u64 {
        self.next_file += 1;
        self.next_file - 1
    }

    /// A table of keys `lo..=hi` written at the next sequence number.
    fn table(&mut self, range: (u64, u64), size: u64) -> FileMeta {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.meta(range, size, (seq, seq))
    }

    /// A new table of keys `lo..=hi` holding the writes of sequence numbers `seqs`.
    fn meta(&mut self, (lo, hi): (u64, u64), size: u64, seqs: (u64, u64)) -> FileMeta {
        FileMeta {
            number: self.new_file(),
            size,
            smallest: make_internal_key(&key(lo), seqs.1, ValueKind::Value),
            largest: make_internal_key(&key(hi), seqs.0, ValueKind::Value),
            smallest_seq: seqs.0,
            largest_seq: seqs.1,
            entries: hi - lo + 1,
            deletions: 0,
            oldest_blob: None,
        }
    }

    fn context<'a>(&self, busy: &'a HashSet<u64>, forced: &'a HashSet<u64>) -> PickContext<'a> {
        PickContext {
            busy,
            forced_gc: forced,
            space_amp_target: self.space_amp_target,
        }
    }

    /// Applies `c` as `db/background.rs` runs a compaction: a lone input with nothing to
    /// merge moves to the output level; otherwise its files are replaced by merged
    /// outputs, tagged with the run the pick names.
    fn run(&mut self, c: &Compaction) -> bool {
        let mut edit = VersionEdit::default();
        for f in &c.inputs {
            edit.deleted.push((c.level, f.number()));
        }
        for f in &c.overlaps {
            edit.deleted.push((c.output_level, f.number()));
        }
        let trivial = c.inputs.len() == 1
            && c.overlaps.is_empty()
            && c.output_level != c.level
            && c.inputs[0].meta.deletions == 0;
        if trivial {
            edit.added.push((c.output_level, c.inputs[0].meta.clone()));
        } else {
            for meta in self.merge(c) {
                edit.added.push((c.output_level, meta));
            }
            c.tag_outputs(&mut edit);
        }
        self.apply(&edit);
        trivial
    }

    /// The tables a merge of `c`'s files writes: their bytes spread evenly over each
    /// file's keys, cut into tables of at most `file_size` between keys (no key is
    /// overwritten: every byte survives).
    fn merge(&mut self, c: &Compaction) -> Vec<FileMeta> {
        let files: Vec<(u64, u64, u64)> = c
            .all_files()
            .map(|f| {
                (
                    num(f.smallest_user_key()),
                    num(f.largest_user_key()),
                    f.meta.size,
                )
            })
            .collect();
        let (lo, hi) = (
            files.iter().map(|f| f.0).min().unwrap(),
            files.iter().map(|f| f.1).max().unwrap(),
        );
        let seqs = (
            c.all_files().map(|f| f.meta.smallest_seq).min().unwrap(),
            c.all_files().map(|f| f.meta.largest_seq).max().unwrap(),
        );
        let bytes_at = |k: u64| -> f64 {
            files
                .iter()
                .filter(|f| f.0 <= k && k <= f.1)
                .map(|f| f.2 as f64 / (f.1 - f.0 + 1) as f64)
                .sum()
        };
        // Cut where the bytes since the last cut reach the file size; sizes are the
        // rounded running total's steps, so they add up to the inputs' bytes.
        let mut outs = Vec::new();
        let (mut start, mut total, mut written) = (lo, 0.0, 0u64);
        for k in lo..=hi {
            total += bytes_at(k);
            let size = (total.round() as u64).saturating_sub(written);
            if size >= self.tree.target_file_size || k == hi {
                outs.push(self.meta((start, k), size, seqs));
                (start, written) = (k + 1, written + size);
            }
        }
        outs
    }

    fn levels(&self) -> String {
        let mut out = String::new();
        for level in 0..self.version.num_levels() {
            let runs = self.version.runs(level);
            if runs.is_empty() {
                continue;
            }
            let bytes = size(self.version.level_bytes(level));
            let _ = write!(out, "L{level} {bytes}:");
            if level == 0 || runs.len() == 1 {
                for f in runs.iter().flatten() {
                    let _ = write!(out, " {}", file(f));
                }
            } else {
                for (i, run) in runs.iter().enumerate() {
                    let sep = if i == 0 { "" } else { " |" };
                    let _ = write!(out, "{sep} run {}:", run[0].run);
                    for f in run {
                        let _ = write!(out, " {}", file(f));
                    }
                }
            }
            out.push('\n');
        }
        let values: u64 = self.version.blobs.values().map(|b| b.live_bytes()).sum();
        if values > 0 {
            let _ = writeln!(out, "values {} live", size(values));
        }
        if out.is_empty() {
            out.push_str("empty\n");
        }
        out
    }
}

fn key(k: u64) -> Vec<u8> {
    format!("{k:06}").into_bytes()
}

fn num(user_key: &[u8]) -> u64 {
    std::str::from_utf8(user_key).unwrap().parse().unwrap()
}

fn file(f: &crate::version::TableFile) -> String {
    let (lo, hi) = (num(f.smallest_user_key()), num(f.largest_user_key()));
    format!("{}[{lo}-{hi} {}]", f.number(), size(f.meta.size))
}

fn size(b: u64) -> String {
    match b {
        b if b >= MIB && b % MIB == 0 => format!("{}M", b / MIB),
        b if b >= MIB => format!("{:.2}M", b as f64 / MIB as f64),
        b if b >= KIB && b % KIB == 0 => format!("{}K", b / KIB),
        b if b >= KIB => format!("{:.1}K", b as f64 / KIB as f64),
        b => format!("{b}"),
    }
}

fn parse_size(s: &str) -> u64 {
    let (n, unit) = match s.as_bytes().last() {
        Some(b'K') => (&s[..s.len() - 1], KIB),
        Some(b'M') => (&s[..s.len() - 1], MIB),
        _ => (s, 1),
    };
    let n: f64 = n.parse().unwrap_or_else(|_| panic!("bad size {s:?}"));
    (n * unit as f64).round() as u64
}

/// `LO-HI SIZE` lines.
fn tables(input: &str) -> Vec<((u64, u64), u64)> {
    input
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (range, sz) = l.trim().split_once(' ').expect("LO-HI SIZE");
            let (lo, hi) = range.split_once('-').expect("LO-HI");
            (
                (lo.parse().unwrap(), hi.parse().unwrap()),
                parse_size(sz.trim()),
            )
        })
        .collect()
}

fn arg(tc: &mut TestCase, name: &str) -> Option<String> {
    tc.try_take_arg::<String>(name).unwrap()
}

fn numbers(tc: &mut TestCase, name: &str) -> HashSet<u64> {
    tc.try_take_args::<u64>(name)
        .unwrap()
        .unwrap_or_default()
        .into_iter()
        .collect()
}

fn describe(c: &Compaction, v: &Version) -> String {
    let names = |fs: &[Arc<crate::version::TableFile>]| {
        fs.iter()
            .map(|f| f.number().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut s = format!("{}: L{} [{}]", c.reason, c.level, names(&c.inputs));
    if !c.overlaps.is_empty() {
        let _ = write!(s, " + L{} [{}]", c.output_level, names(&c.overlaps));
    }
    let _ = write!(s, " -> L{}", c.output_level);
    let run = match c.output_run {
        super::OutputRun::New => "new run".to_string(),
        super::OutputRun::Existing(r) => format!("run {r}"),
    };
    let _ = write!(
        s,
        " ({run}{}, a {:.2} files {:.2} bytes)",
        if c.bottommost { ", bottommost" } else { "" },
        c.merge_amplification(v),
        c.merge_amplification_bytes(v)
    );
    s
}

fn options(tc: &mut TestCase) -> (TreeOptions, Option<f64>) {
    let mut t = TreeOptions::default();
    if let Some(s) = arg(tc, "style") {
        t.compaction_style = s.parse().unwrap();
    }
    if let Some(f) = arg(tc, "growth") {
        t.growth_factor = f.parse().unwrap();
    }
    if let Some(n) = arg(tc, "levels") {
        t.num_levels = n.parse().unwrap();
    }
    if let Some(n) = arg(tc, "l0_trigger") {
        t.l0_compaction_trigger = n.parse().unwrap();
    }
    if let Some(n) = arg(tc, "l0_stop") {
        t.l0_stop_writes_trigger = n.parse().unwrap();
    }
    if let Some(s) = arg(tc, "level1") {
        t.level1_max_bytes = parse_size(&s);
    }
    if let Some(s) = arg(tc, "file_size") {
        t.target_file_size = parse_size(&s);
    }
    if let Some(s) = arg(tc, "memtable") {
        t.memtable_size = parse_size(&s) as usize;
    }
    if let Some(b) = arg(tc, "dynamic") {
        t.dynamic_level_bytes = b.parse().unwrap();
    }
    if let Some(s) = arg(tc, "auto_shape") {
        t.auto_shape = Some(AutoShapeConfig::new(parse_size(&s)));
    }
    let space = arg(tc, "space_target").map(|s| s.parse().unwrap());
    t.validate().unwrap();
    (t, space)
}

fn run_script(tree: &mut Option<Tree>, tc: &mut TestCase) -> String {
    if tc.directive == "options" {
        let (t, space) = options(tc);
        let style = match (t.compaction_style, &t.auto_shape) {
            (CompactionStyle::Auto, Some(_)) => "auto, shaped by the model: leveled",
            (s, _) => s.name(),
        };
        *tree = Some(Tree::new(t, space));
        tc.expect_empty().unwrap();
        return format!("{style}\n");
    }
    let t = tree.as_mut().expect("a script starts with `options`");
    let out = match tc.directive.as_str() {
        "flush" => {
            let mut edit = VersionEdit::default();
            for (range, sz) in tables(&tc.input) {
                edit.added.push((0, t.table(range, sz)));
            }
            t.apply(&edit);
            t.levels()
        }
        "add" => {
            let level: usize = tc.take_arg("level").unwrap();
            let run: Option<u64> = tc.try_take_arg("run").unwrap();
            let mut edit = VersionEdit::default();
            for (range, sz) in tables(&tc.input) {
                let m = t.table(range, sz);
                if let Some(r) = run {
                    edit.table_runs.push((m.number, r));
                }
                edit.added.push((level, m));
            }
            t.apply(&edit);
            t.levels()
        }
        "values" => {
            let live = parse_size(&tc.take_arg::<String>("live").unwrap());
            let meta = BlobMeta {
                number: t.new_file(),
                size: live + FILE_HEADER as u64,
                entries: 1,
                garbage_bytes: 0,
                garbage_entries: 0,
                lifetime: None,
                expiry: FileExpiry::None,
            };
            t.apply(&VersionEdit {
                added_blobs: vec![meta],
                ..Default::default()
            });
            t.levels()
        }
        "pick" | "pick-l0" | "compact" | "compact-l0" => {
            let (busy, forced) = (numbers(tc, "busy"), numbers(tc, "forced"));
            let cx = t.context(&busy, &forced);
            let c = if tc.directive.ends_with("l0") {
                t.strategy.pick_l0(&t.version, &cx)
            } else {
                t.strategy.pick(&t.version, &cx)
            };
            match c {
                None => "none\n".to_string(),
                Some(c) if tc.directive.starts_with("pick") => {
                    format!("{}\n", describe(&c, &t.version))
                }
                Some(c) => {
                    let d = describe(&c, &t.version);
                    let moved = if t.run(&c) { " moved" } else { "" };
                    format!("{d}{moved}\n{}", t.levels())
                }
            }
        }
        "settle" => {
            let max: usize = tc.try_take_arg("max").unwrap().unwrap_or(100);
            let none = HashSet::new();
            let mut out = String::new();
            let mut n = 0;
            while n < max {
                let cx = t.context(&none, &none);
                let Some(c) = t.strategy.pick(&t.version, &cx) else {
                    break;
                };
                let d = describe(&c, &t.version);
                let moved = if t.run(&c) { " moved" } else { "" };
                let _ = writeln!(out, "{d}{moved}");
                n += 1;
            }
            if n == max {
                let _ = writeln!(out, "still picking after {max} compactions");
            }
            out + &t.levels()
        }
        "observe" => {
            let a: f64 = tc.take_arg("a").unwrap();
            let times: usize = tc.try_take_arg("times").unwrap().unwrap_or(1);
            for _ in 0..times {
                t.strategy.observe(a);
            }
            choice(t)
        }
        "targets" => {
            let shape = t.strategy.shape_choice().map(|c| c.growth_factor);
            let tg = leveled::targets(&t.version, &t.tree, shape);
            let scores = leveled::scores(&t.version, &t.tree, &tg);
            let mut out = format!("base L{}\n", tg.base);
            for (l, score) in scores.iter().enumerate() {
                let target = match l {
                    0 => format!("{} files", t.tree.l0_compaction_trigger),
                    _ => size(tg.bytes[l].round() as u64),
                };
                let _ = writeln!(
                    out,
                    "L{l} {} of {target}: score {score:.2}",
                    size(t.version.level_bytes(l))
                );
            }
            out
        }
        "choice" => choice(t),
        "levels" => t.levels(),
        other => panic!("unknown command {other:?}"),
    };
    tc.expect_empty().unwrap();
    out
}

fn choice(t: &Tree) -> String {
    let mut out = String::new();
    if let Some(c) = t.strategy.style_choice() {
        let style = if c.tiered {
            format!("tiered at {} runs", c.trigger)
        } else {
            "leveled".to_string()
        };
        let _ = writeln!(out, "style: {style}, changes {}", c.changes);
        let _ = writeln!(out, "{}", c.explanation);
    }
    if let Some(c) = t.strategy.shape_choice() {
        let _ = writeln!(
            out,
            "shape: growth factor {:.2}, {} levels, a {:.2} over {} compactions, changes {}",
            c.growth_factor, c.levels, c.a, c.compactions, c.changes
        );
    }
    if out.is_empty() {
        out.push_str("no choice\n");
    }
    out
}

#[test]
fn strategies_pick_as_the_scripts_expect() {
    datadriven::walk(
        concat!(env!("CARGO_MANIFEST_DIR"), "/src/compaction/testdata"),
        |f| {
            let mut tree = None;
            f.run(|tc| run_script(&mut tree, tc));
        },
    );
}

/// The harness's own arithmetic, so that a script's surprise is the strategy's.
#[test]
fn merged_outputs_keep_every_byte_and_cut_at_the_file_size() {
    let mut t = Tree::new(
        TreeOptions {
            target_file_size: MIB,
            compaction_style: CompactionStyle::Leveled,
            ..Default::default()
        },
        None,
    );
    let mut edit = VersionEdit::default();
    edit.added.push((0, t.table((0, 99), 2 * MIB)));
    edit.added.push((0, t.table((50, 149), MIB)));
    t.apply(&edit);
    let c = super::build(
        &t.version,
        0,
        1,
        t.version.levels[0].clone(),
        &HashSet::new(),
        "t",
    )
    .unwrap();
    assert!(!t.run(&c));
    let l1 = &t.version.levels[1];
    assert_eq!(t.version.level_bytes(1), 3 * MIB);
    assert_eq!(l1.len(), 3);
    assert!(
        l1.iter().all(|f| f.meta.size < MIB + 32 * KIB),
        "{:?}",
        t.levels()
    );
    // Disjoint and covering 0..=149.
    assert_eq!(num(l1[0].smallest_user_key()), 0);
    assert_eq!(num(l1[2].largest_user_key()), 149);
    for w in l1.windows(2) {
        assert_eq!(
            num(w[0].largest_user_key()) + 1,
            num(w[1].smallest_user_key())
        );
    }
    assert_eq!(user_key(&l1[0].meta.smallest), b"000000");
}
