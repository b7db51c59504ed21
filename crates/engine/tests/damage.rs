//! The corruption matrix: a closed database of every file kind (manifest small and large,
//! WAL, tables, value files, index maps, the lifetime model, CURRENT) is damaged one way at a
//! time (a flipped byte at chosen offsets, a truncation, a deletion), and for each case:
//!
//! - `DB::open` either fails with an error naming the damage and leaves every file as it
//!   was, or opens and then every read returns exactly the acknowledged value or a
//!   corruption error: never an older value, never a resurrected key;
//! - an open deletes only WALs and manifests (never a table, value file or index map);
//! - `check` reports the damage;
//! - after `repair` the database opens and every key whose records are intact reads its
//!   acknowledged value (the rest read an error, or, where repair salvaged around a damaged
//!   table or WAL record, a value the key once had).
//!
//! The matrix is printed (`cargo test --test damage -- --nocapture`): docs/engine.md shows it.

use halflife_engine::check::check;
use halflife_engine::lifetime::{GbmParams, ThresholdParams};
use halflife_engine::repair::repair;
use halflife_engine::sst::format::{Footer, FOOTER_LEN};
use halflife_engine::{
    Error, GcPolicyConfig, GcTrigger, LifetimeMode, LifetimeOptions, Options, TreeOptions,
    ValueLogOptions, WalOptions, WriteBatch, WriteOptions, DB,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn opts() -> Options {
    Options {
        tree: TreeOptions {
            memtable_size: 192 << 10,
            level1_max_bytes: 128 << 10,
            target_file_size: 16 << 10,
            l0_compaction_trigger: 2,
            num_levels: 4,
            ..Default::default()
        },
        wal: WalOptions {
            // The WAL holds whole values, so that its damage cases span several blocks (the
            // value log as the WAL has its own damage tests in `value_log_wal.rs`).
            value_log_wal: false,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            min_blob_size: 100,
            blob_file_size: 32 << 10,
            gc: GcPolicyConfig::Lifetime {
                mode: LifetimeMode::Learned,
            },
            lifetime: LifetimeOptions {
                thresholds: ThresholdParams {
                    initial_ttl: 1500,
                    ..ThresholdParams::default()
                },
                dataset_capacity: 200,
                gbm: GbmParams {
                    iterations: 5,
                    ..GbmParams::default()
                },
                value_size_feature: false,
                max_gc_batch_bytes: 1 << 20,
                // The fixture needs a trained model: paper 000's trigger trains one.
                trigger: GcTrigger::Ttl,
                ..LifetimeOptions::default()
            },
            ..Default::default()
        },
        ..Options::default()
    }
}

/// Every value a key ever had (None = deleted), and the acknowledged final state.
struct Fixture {
    dir: tempfile::TempDir,
    model: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The state without the very last batch (what a cut WAL tail leaves).
    before_last: BTreeMap<Vec<u8>, Vec<u8>>,
    history: HashMap<Vec<u8>, Vec<Vec<u8>>>,
}

fn key(k: u32) -> Vec<u8> {
    format!("key{k:05}").into_bytes()
}

fn value(rng: &mut StdRng, k: u32, n: u32) -> Vec<u8> {
    let len = if rng.random_bool(0.3) {
        30
    } else {
        150 + rng.random_range(0..300)
    };
    let mut v = format!("{k}.{n}.").into_bytes();
    v.resize(len, b'a' + (n % 26) as u8);
    v
}

/// A lifetime-policy database with tables on several levels, value files, index maps, a
/// trained model, a large manifest, and a WAL of several blocks holding the last writes.
/// `reopen` closes and reopens it once more, which leaves a small manifest.
fn build(reopen: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut model = BTreeMap::new();
    let mut history: HashMap<Vec<u8>, Vec<Vec<u8>>> = HashMap::new();
    let db = DB::open(dir.path(), opts()).unwrap();
    let mut put = |db: &DB, k: u32, n: u32, rng: &mut StdRng, model: &mut BTreeMap<_, _>| {
        let v = value(rng, k, n);
        db.put(&key(k), &v).unwrap();
        model.insert(key(k), v.clone());
        history.entry(key(k)).or_default().push(v);
    };
    // At least 60,000 writes, then more until the manifest spans more than one 32 KiB
    // block: how many edits the writes make depends on how the background grouped its
    // work, so the state is waited for, not assumed.
    let mut n = 0u32;
    loop {
        if n >= 60_000 && n.is_multiple_of(2000) {
            db.wait_idle().unwrap();
            db.flush().unwrap();
            db.wait_idle().unwrap();
            let manifest = files(dir.path(), "MANIFEST-").pop().unwrap();
            if std::fs::metadata(manifest).unwrap().len() > 40 << 10 {
                break;
            }
        }
        n += 1;
        let k = if rng.random_bool(0.7) {
            rng.random_range(0..200)
        } else {
            rng.random_range(200..3000)
        };
        if n.is_multiple_of(50) {
            db.delete(&key(k)).unwrap();
            model.remove(&key(k));
        } else {
            put(&db, k, n, &mut rng, &mut model);
        }
    }
    // The last writes stay in the WAL only: about 80 KiB, so three blocks.
    for n in 0..320u32 {
        put(&db, 3000 + n, n, &mut rng, &mut model);
    }
    let before_last = model.clone();
    let mut b = WriteBatch::new();
    let v = value(&mut rng, 1, 999_999);
    b.put(&key(1), &v);
    b.delete(&key(2));
    db.write(b, &WriteOptions { sync: true }).unwrap();
    model.insert(key(1), v.clone());
    model.remove(&key(2));
    history.entry(key(1)).or_default().push(v);
    let l = db.stats().lifetime.unwrap();
    assert!(l.trainings > 0, "the fixture needs a trained model");
    db.close().unwrap();
    if reopen {
        DB::open(dir.path(), opts()).unwrap().close().unwrap();
    }
    Fixture {
        dir,
        model,
        before_last,
        history,
    }
}

fn fixture(reopen: bool) -> &'static Fixture {
    static LARGE: OnceLock<Fixture> = OnceLock::new();
    static SMALL: OnceLock<Fixture> = OnceLock::new();
    if reopen {
        SMALL.get_or_init(|| build(true))
    } else {
        LARGE.get_or_init(|| build(false))
    }
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() && p.file_name().unwrap() != "LOCK" {
            std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_file()
                && (p.extension().is_some_and(|e| e == ext)
                    || p.file_name().unwrap().to_string_lossy().starts_with(ext))
        })
        .collect();
    v.sort();
    v
}

/// Name -> contents of every file (LOCK and lost/ aside).
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.file_name().unwrap() != "LOCK")
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().to_string(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Damage {
    Flip(usize),
    FlipMiddle,
    /// Flip at this many bytes before the end.
    FlipFromEnd(usize),
    Truncate,
    /// Cut the last `n` bytes.
    CutTail(usize),
    Delete,
}

/// Which file of a kind a case damages.
#[derive(Clone, Copy, Debug)]
enum Target {
    Manifest,
    Current,
    Wal,
    /// The largest table; with the block to hit.
    Table(Block),
    ValueFile,
    IndexMap,
    Model,
}

#[derive(Clone, Copy, Debug)]
enum Block {
    Data,
    Index,
    Filter,
    Properties,
    Footer,
    Whole,
}

fn target_file(dir: &Path, t: Target) -> PathBuf {
    let largest = |ext: &str| {
        files(dir, ext)
            .into_iter()
            .max_by_key(|p| std::fs::metadata(p).unwrap().len())
            .unwrap_or_else(|| panic!("fixture has no {ext} file"))
    };
    match t {
        Target::Manifest => files(dir, "MANIFEST-").pop().unwrap(),
        Target::Current => dir.join("CURRENT"),
        Target::Wal => largest("wal"),
        Target::Table(_) => largest("sst"),
        Target::ValueFile => largest("vlog"),
        Target::IndexMap => largest("vmap"),
        Target::Model => dir.join(halflife_engine::db::MODEL_FILE),
    }
}

/// Applies the damage; returns the file and a description.
fn damage(dir: &Path, t: Target, d: Damage) -> (PathBuf, String) {
    let path = target_file(dir, t);
    let mut bytes = std::fs::read(&path).unwrap();
    let len = bytes.len();
    let block_offset = |b: Block| -> usize {
        let raw: [u8; FOOTER_LEN] = bytes[len - FOOTER_LEN..].try_into().unwrap();
        let f = Footer::decode(&raw).unwrap();
        match b {
            Block::Data => 50,
            Block::Index => f.index.offset as usize + f.index.size as usize / 2,
            Block::Filter => f.filter.offset as usize + f.filter.size as usize / 2,
            Block::Properties => f.properties.offset as usize + 3,
            Block::Footer => len - FOOTER_LEN + 20,
            Block::Whole => len / 2,
        }
    };
    let at = match (t, d) {
        (Target::Table(b), Damage::Flip(_)) => Some(block_offset(b)),
        (_, Damage::Flip(o)) => Some(o.min(len - 1)),
        (_, Damage::FlipFromEnd(o)) => Some(len - o),
        (_, Damage::FlipMiddle) => Some(len / 2),
        _ => None,
    };
    let what = match d {
        Damage::Flip(_) | Damage::FlipMiddle | Damage::FlipFromEnd(_) => {
            let at = at.unwrap();
            bytes[at] ^= 0x20;
            std::fs::write(&path, &bytes).unwrap();
            format!("flip at {at} of {len}")
        }
        Damage::Truncate => {
            std::fs::write(&path, &bytes[..len / 2]).unwrap();
            format!("truncate {len} -> {}", len / 2)
        }
        Damage::CutTail(n) => {
            std::fs::write(&path, &bytes[..len - n]).unwrap();
            format!("cut last {n} of {len}")
        }
        Damage::Delete => {
            std::fs::remove_file(&path).unwrap();
            "delete".to_string()
        }
    };
    (path, what)
}

/// Reads every key of the model and every key ever written: (exact, errors); panics on a
/// wrong value. `salvage`: after a repair that worked around lost records, a value the key
/// once had (or none) is allowed too.
fn verify(
    db: &DB,
    fx: &Fixture,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    salvage: bool,
) -> (usize, usize) {
    let (mut exact, mut errors) = (0, 0);
    for k in fx.history.keys().chain(model.keys()) {
        match db.get(k) {
            Ok(v) if v.as_ref() == model.get(k) => exact += 1,
            Ok(v) => {
                let once = v.as_ref().is_none_or(|v| fx.history[k].contains(v));
                assert!(
                    salvage && once,
                    "key {:?}: read {:?}, acknowledged {:?}",
                    String::from_utf8_lossy(k),
                    v.map(|v| String::from_utf8_lossy(&v)
                        .chars()
                        .take(20)
                        .collect::<String>()),
                    model.get(k).map(|v| String::from_utf8_lossy(v)
                        .chars()
                        .take(20)
                        .collect::<String>())
                );
            }
            Err(Error::Corruption { file, detail }) => {
                if errors == 0 {
                    eprintln!("first read error: {}: {detail}", file.display());
                }
                errors += 1
            }
            Err(e) => panic!("key {:?}: unexpected error {e}", String::from_utf8_lossy(k)),
        }
    }
    (exact, errors)
}

struct Row {
    case: String,
    open: String,
    check: String,
    repair: String,
}

/// Runs one case on a fresh copy of the fixture.
fn run_case(reopen: bool, t: Target, d: Damage) -> Row {
    let fx = fixture(reopen);
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    copy_dir(fx.dir.path(), dir);
    let (path, what) = damage(dir, t, d);
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let case = format!(
        "{:?}{} {name}: {what}",
        t,
        if matches!(t, Target::Manifest) {
            if reopen {
                " (small)"
            } else {
                " (large)"
            }
        } else {
            ""
        }
    );
    // What a cut WAL tail legitimately loses: the last (synced, but torn here) batch.
    let torn_wal = matches!((t, d), (Target::Wal, Damage::CutTail(_)));
    let model = if torn_wal { &fx.before_last } else { &fx.model };

    // check first: it must see the damage (a torn WAL tail is a note, not damage; a
    // deleted model is retrained, not damage).
    let report = check(dir, &opts(), &mut |_, _| {}).unwrap();
    let innocent = torn_wal || matches!((t, d), (Target::Model, Damage::Delete));
    assert!(
        innocent || !report.is_ok(),
        "{case}: check found nothing ({} notes)",
        report.notes.len()
    );
    let check_s = if report.is_ok() {
        "clean".to_string()
    } else {
        format!(
            "{} problem(s): {}",
            report.problems.len(),
            report.problems[0].what
        )
    };

    let before = snapshot(dir);
    let open = match DB::open(dir, opts()) {
        Err(e) => {
            assert!(
                matches!(e, Error::Corruption { .. } | Error::NotADatabase(_)),
                "{case}: open failed with {e}"
            );
            assert!(
                snapshot(dir) == before,
                "{case}: a failed open changed the directory"
            );
            format!("fails: {e}")
        }
        Ok(db) => {
            let r = db.recovery_report().clone();
            for p in &r.deleted {
                let n = p.file_name().unwrap().to_string_lossy();
                assert!(
                    n.ends_with(".wal") || n.starts_with("MANIFEST-"),
                    "{case}: open deleted {n}"
                );
            }
            let (exact, errors) = verify(&db, fx, model, false);
            db.close().unwrap();
            format!("opens: {exact} exact, {errors} read errors")
        }
    };

    let rep = repair(dir, &opts(), &mut |_, _| {}).unwrap();
    let db = DB::open(dir, opts()).unwrap_or_else(|e| panic!("{case}: open after repair: {e}"));
    // Damage that takes records with it (a table block, a WAL record, a value record or
    // file, an index map) may leave keys at an older value; the rest must come back exactly.
    let lossy = match (t, d) {
        (Target::Manifest | Target::Current | Target::Model, _) => false,
        (Target::ValueFile, Damage::Flip(o)) if o < 16 => false,
        (Target::Wal, Damage::CutTail(_)) => false,
        _ => true,
    };
    let (exact, errors) = verify(&db, fx, model, lossy);
    let total = fx.history.len() + model.len();
    if !lossy {
        assert_eq!(
            (exact, errors),
            (total, 0),
            "{case}: repair lost intact records"
        );
    } else {
        assert!(
            exact * 10 >= total * 6,
            "{case}: repair kept only {exact} of {total}"
        );
    }
    db.close().unwrap();
    let repair_s = format!(
        "{exact}/{total} exact, {errors} errors ({} tables intact, {} damaged, {} moved to lost/)",
        rep.tables_intact,
        rep.tables_damaged.len(),
        rep.moved_to_lost.len()
    );
    Row {
        case,
        open,
        check: check_s,
        repair: repair_s,
    }
}

fn print(rows: &[Row]) {
    for r in rows {
        println!("| {} | {} | {} | {} |", r.case, r.open, r.check, r.repair);
    }
}

#[test]
fn fixture_has_every_file_kind() {
    for reopen in [false, true] {
        let d = fixture(reopen).dir.path();
        for ext in ["sst", "vlog", "vmap", "wal", "MANIFEST-"] {
            assert!(!files(d, ext).is_empty(), "no {ext}");
        }
        assert!(d.join(halflife_engine::db::MODEL_FILE).exists());
        let manifest = std::fs::metadata(files(d, "MANIFEST-").pop().unwrap())
            .unwrap()
            .len();
        if reopen {
            assert!(manifest < 32 << 10, "small manifest is {manifest} bytes");
        } else {
            assert!(manifest > 32 << 10, "large manifest is {manifest} bytes");
        }
        let wal = std::fs::metadata(target_file(d, Target::Wal))
            .unwrap()
            .len();
        assert!(
            reopen || wal > 64 << 10,
            "WAL of {wal} bytes spans fewer than 3 blocks"
        );
        // The undamaged fixture checks clean.
        let r = check(d, &opts(), &mut |_, _| {}).unwrap();
        assert!(r.is_ok(), "{:?}", r.problems);
        assert!(r.pointers_verified > 0 && r.value_records > 0 && r.index_maps > 0);
    }
}

#[test]
fn metadata_damage() {
    let mut rows = Vec::new();
    for reopen in [true, false] {
        for d in [Damage::Flip(20), Damage::FlipMiddle, Damage::FlipFromEnd(3)] {
            rows.push(run_case(reopen, Target::Manifest, d));
        }
        rows.push(run_case(reopen, Target::Manifest, Damage::CutTail(1)));
        rows.push(run_case(reopen, Target::Manifest, Damage::Delete));
    }
    rows.push(run_case(false, Target::Current, Damage::Flip(10)));
    rows.push(run_case(false, Target::Current, Damage::Delete));
    rows.push(run_case(false, Target::Model, Damage::Flip(40)));
    rows.push(run_case(false, Target::Model, Damage::Delete));
    print(&rows);
}

#[test]
fn wal_damage() {
    let rows = vec![
        // In the last block, with intact synced records after it in the same block.
        run_case(false, Target::Wal, Damage::FlipFromEnd(900)),
        // In an earlier block.
        run_case(false, Target::Wal, Damage::Flip(100)),
        run_case(false, Target::Wal, Damage::FlipMiddle),
        run_case(false, Target::Wal, Damage::CutTail(10)),
        run_case(false, Target::Wal, Damage::Delete),
    ];
    print(&rows);
}

#[test]
fn data_file_damage() {
    let mut rows = Vec::new();
    for b in [
        Block::Data,
        Block::Index,
        Block::Filter,
        Block::Properties,
        Block::Footer,
    ] {
        rows.push(run_case(false, Target::Table(b), Damage::Flip(0)));
    }
    rows.push(run_case(
        false,
        Target::Table(Block::Whole),
        Damage::Truncate,
    ));
    rows.push(run_case(false, Target::Table(Block::Whole), Damage::Delete));
    rows.push(run_case(false, Target::ValueFile, Damage::Flip(9)));
    rows.push(run_case(false, Target::ValueFile, Damage::Flip(16 + 40)));
    rows.push(run_case(false, Target::ValueFile, Damage::FlipFromEnd(5)));
    rows.push(run_case(false, Target::ValueFile, Damage::Truncate));
    rows.push(run_case(false, Target::ValueFile, Damage::Delete));
    rows.push(run_case(false, Target::IndexMap, Damage::Flip(40)));
    rows.push(run_case(false, Target::IndexMap, Damage::Delete));
    print(&rows);
}
