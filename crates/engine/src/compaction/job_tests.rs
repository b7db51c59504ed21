//! Unit tests of the merge loop ([`super::job::run`]) on hand-made inputs: what it keeps,
//! drops, separates, relocates and cuts, and what it reports, read back from the files
//! it wrote.

use super::job::{run, JobOutput, JobSpec};
use crate::expiry::ManualClock;
use crate::filename::table_file_name;
use crate::internal_key::{make_internal_key, parse_internal_key, SeqNo, ValueKind};
use crate::io::{FileStorage, IoCause, Storage};
use crate::options::Options;
use crate::sst::{InternalIterator, Table, VecIterator};
use crate::version::{Version, VersionEdit};
use crate::vlog::{BlobFile, ValueFileWriter, ValuePointer};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const NOW_MS: u64 = 1_000_000;

struct Harness {
    dir: tempfile::TempDir,
    storage: Arc<FileStorage>,
    /// `storage` as a job takes it.
    dyn_storage: Arc<dyn Storage>,
    opts: Options,
    version: Version,
    next_file: Arc<AtomicU64>,
    new_file_number: Box<dyn Fn() -> u64 + Sync>,
}

/// One entry as written: user key, sequence number, kind, value.
type Entry = (Vec<u8>, SeqNo, ValueKind, Vec<u8>);

impl Harness {
    fn new() -> Harness {
        let mut opts = Options {
            clock: Arc::new(ManualClock::new(NOW_MS)),
            ..Options::default()
        };
        opts.vlog.min_blob_size = 100;
        let storage = Arc::new(FileStorage::new());
        let next_file = Arc::new(AtomicU64::new(100));
        let n = next_file.clone();
        Harness {
            dir: tempfile::tempdir().unwrap(),
            dyn_storage: storage.clone(),
            storage,
            opts,
            version: Version::empty(7),
            next_file,
            new_file_number: Box::new(move || n.fetch_add(1, Ordering::Relaxed)),
        }
    }

    fn storage(&self) -> Arc<dyn Storage> {
        self.storage.clone()
    }

    /// A compaction into level 1 that drops nothing: with `smallest_snapshot` 0 every
    /// version is visible to some reader, and tombstones stay.
    fn spec(&self) -> JobSpec<'_> {
        JobSpec {
            dir: self.dir.path(),
            storage: &self.dyn_storage,
            opts: &self.opts,
            output_level: 1,
            cause: IoCause::Compaction,
            smallest_snapshot: 0,
            drop_tombstones: false,
            separate_values: false,
            split_outputs: false,
            relocate: None,
            version: &self.version,
            lifetime: None,
            new_file_number: &*self.new_file_number,
            warming: None,
            logged: None,
        }
    }

    fn new_file(&self) -> u64 {
        self.next_file.fetch_add(1, Ordering::Relaxed)
    }

    /// Runs a job over `entries` (sorted here), with `spec` adjusting the defaults.
    fn run<'a>(&'a self, entries: &[Entry], spec: impl FnOnce(&mut JobSpec<'a>)) -> JobOutput {
        self.try_run(input(entries), spec).unwrap()
    }

    fn try_run<'a>(
        &'a self,
        input: Vec<(Vec<u8>, Vec<u8>)>,
        spec: impl FnOnce(&mut JobSpec<'a>),
    ) -> crate::Result<JobOutput> {
        let mut s = self.spec();
        spec(&mut s);
        run(&s, &mut VecIterator::new(input))
    }

    /// Every entry of the output tables, in order.
    fn read(&self, out: &JobOutput) -> Vec<Entry> {
        let mut all = Vec::new();
        for m in &out.tables {
            let path = table_file_name(self.dir.path(), m.number);
            let t = Table::open(self.storage.open(&path).unwrap(), m.number, None).unwrap();
            let mut it = t.iter(IoCause::Other);
            it.seek_to_first().unwrap();
            while it.valid() {
                let p = parse_internal_key(it.key()).unwrap();
                all.push((p.user_key.to_vec(), p.seq, p.kind, it.value().to_vec()));
                it.next().unwrap();
            }
        }
        all
    }

    /// The value `ptr` names in one of `out`'s value files (or the version's).
    fn value(&self, out: &JobOutput, key: &[u8], ptr: &ValuePointer) -> Vec<u8> {
        let meta = out.blobs.iter().find(|b| b.number == ptr.file);
        let file = match meta {
            Some(m) => Arc::new(BlobFile::new(m, self.dir.path(), self.storage())),
            None => self.version.blobs[&ptr.file].clone(),
        };
        file.read(ptr, key, IoCause::Other).unwrap()
    }

    fn written(&self, cause: IoCause) -> u64 {
        self.storage.stats().snapshot().cause(cause).bytes_written
    }

    fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

fn e(key: &str, seq: SeqNo, kind: ValueKind, value: &[u8]) -> Entry {
    (key.as_bytes().to_vec(), seq, kind, value.to_vec())
}

/// Internal-key-ordered input of `entries`.
fn input(entries: &[Entry]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v: Vec<(Vec<u8>, Vec<u8>)> = entries
        .iter()
        .map(|(k, s, kind, val)| (make_internal_key(k, *s, *kind), val.clone()))
        .collect();
    v.sort_by(|a, b| crate::internal_key::cmp_internal(&a.0, &b.0));
    v
}

fn keys_and_seqs(entries: &[Entry]) -> Vec<(String, SeqNo, ValueKind)> {
    entries
        .iter()
        .map(|(k, s, kind, _)| (String::from_utf8(k.clone()).unwrap(), *s, *kind))
        .collect()
}

fn pointer(entry: &Entry) -> ValuePointer {
    ValuePointer::decode(std::path::Path::new("t"), &entry.3)
        .unwrap()
        .0
}

fn expiring(expire_at: u64, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    crate::expiry::encode_into(&mut v, ValueKind::Value, Some(expire_at), payload);
    v
}

#[test]
fn a_version_stays_while_a_snapshot_can_see_it_and_tombstones_only_at_the_bottom() {
    let h = Harness::new();
    let entries = [
        e("a", 5, ValueKind::Value, b"a5"),
        e("a", 3, ValueKind::Value, b"a3"),
        e("a", 1, ValueKind::Value, b"a1"),
        e("b", 4, ValueKind::Deletion, b""),
        e("b", 2, ValueKind::Value, b"b2"),
    ];
    // A reader at sequence number 3: a@3 is what it sees, a@1 is hidden from everyone.
    let out = h.run(&entries, |s| s.smallest_snapshot = 3);
    assert_eq!(
        keys_and_seqs(&h.read(&out)),
        [
            ("a".into(), 5, ValueKind::Value),
            ("a".into(), 3, ValueKind::Value),
            ("b".into(), 4, ValueKind::Deletion),
            ("b".into(), 2, ValueKind::Value),
        ]
    );
    assert_eq!((out.entries_in, out.entries_out), (5, 4));
    // No snapshot: only the newest versions; the tombstone stays above older data...
    let out = h.run(&entries, |s| s.smallest_snapshot = 10);
    assert_eq!(
        keys_and_seqs(&h.read(&out)),
        [
            ("a".into(), 5, ValueKind::Value),
            ("b".into(), 4, ValueKind::Deletion),
        ]
    );
    // ...and goes, with all it hides, where nothing lies below the output.
    let out = h.run(&entries, |s| {
        s.smallest_snapshot = 10;
        s.drop_tombstones = true;
    });
    assert_eq!(
        keys_and_seqs(&h.read(&out)),
        [("a".into(), 5, ValueKind::Value)]
    );
    assert_eq!(out.tables.len(), 1);
    let t = &out.tables[0];
    assert_eq!((t.smallest_seq, t.largest_seq, t.entries), (5, 5, 1));
}

#[test]
fn a_flush_separates_large_values_and_keeps_small_ones_inline() {
    let h = Harness::new();
    let big = vec![7u8; 500];
    let entries = [
        e("big", 2, ValueKind::Value, &big),
        e("small", 1, ValueKind::Value, b"tiny"),
    ];
    let out = h.run(&entries, |s| {
        s.cause = IoCause::Flush;
        s.output_level = 0;
        s.separate_values = true;
    });
    let got = h.read(&out);
    assert_eq!(got[0].2, ValueKind::Pointer);
    assert_eq!(
        (got[1].2, got[1].3.as_slice()),
        (ValueKind::Value, &b"tiny"[..])
    );
    assert_eq!(out.blobs.len(), 1);
    let ptr = pointer(&got[0]);
    assert_eq!(ptr.file, out.blobs[0].number);
    assert_eq!(h.value(&out, b"big", &ptr), big);
    // The table points into the file it names as its oldest.
    assert_eq!(out.tables[0].oldest_blob, Some(ptr.file));
    assert!(h.written(IoCause::ValueLog) >= 500);
    assert!(h.written(IoCause::Flush) > 0);
    assert_eq!(h.written(IoCause::Compaction), 0);
}

#[test]
fn outputs_are_cut_at_the_target_size_between_user_keys() {
    let mut h = Harness::new();
    h.opts.tree.target_file_size = 4096;
    // 200 keys of three versions each, all kept (a snapshot at 0 sees none of them, but
    // nothing is shadowed below sequence number 0).
    let mut entries = Vec::new();
    for k in 0..200 {
        for seq in 1..=3 {
            entries.push(e(
                &format!("key{k:04}"),
                seq,
                ValueKind::Value,
                &[k as u8; 40],
            ));
        }
    }
    let out = h.run(&entries, |s| s.split_outputs = true);
    assert!(out.tables.len() >= 5, "{} tables", out.tables.len());
    assert_eq!(h.read(&out).len(), 600);
    for w in out.tables.windows(2) {
        let (a, b) = (
            crate::internal_key::user_key(&w[0].largest),
            crate::internal_key::user_key(&w[1].smallest),
        );
        assert!(a < b, "a user key spans two tables");
    }
    // Without splitting (a flush), one table.
    let out = h.run(&entries, |_| {});
    assert_eq!(out.tables.len(), 1);
}

#[test]
fn dropped_pointers_are_garbage_and_kept_ones_point_as_before() {
    let h = Harness::new();
    let p = |file, offset| ValuePointer {
        file,
        offset,
        size: 100,
    };
    let entries = [
        e("k", 9, ValueKind::Pointer, &p(3, 0).encode()),
        e("k", 4, ValueKind::Pointer, &p(2, 0).encode()),
        e("z", 5, ValueKind::Deletion, b""),
        e("z", 1, ValueKind::Pointer, &p(1, 64).encode()),
    ];
    let out = h.run(&entries, |s| {
        s.smallest_snapshot = 100;
        s.drop_tombstones = true;
    });
    let got = h.read(&out);
    assert_eq!(got.len(), 1);
    assert_eq!(pointer(&got[0]), p(3, 0));
    assert_eq!(out.tables[0].oldest_blob, Some(3));
    let mut dropped = out.dropped.clone();
    dropped.sort_by_key(|d| d.file);
    assert_eq!(dropped, [p(1, 64), p(2, 0)]);
    assert!(out.blobs.is_empty(), "pointers are not followed");
}

#[test]
fn an_expired_entry_is_a_deletion_until_tombstones_may_go() {
    let h = Harness::new();
    let entries = [
        e(
            "gone",
            7,
            ValueKind::ExpiringValue,
            &expiring(NOW_MS - 1, b"old"),
        ),
        e("gone", 2, ValueKind::Value, b"before"),
        e(
            "live",
            6,
            ValueKind::ExpiringValue,
            &expiring(NOW_MS + 1, b"new"),
        ),
    ];
    let out = h.run(&entries, |s| s.smallest_snapshot = 100);
    let got = h.read(&out);
    assert_eq!(
        keys_and_seqs(&got),
        [
            ("gone".into(), 7, ValueKind::Deletion),
            ("live".into(), 6, ValueKind::ExpiringValue),
        ]
    );
    assert_eq!(got[1].3, expiring(NOW_MS + 1, b"new"));
    assert_eq!(out.expired, 1);
    // Where tombstones go, so does the expired entry.
    let out = h.run(&entries, |s| {
        s.smallest_snapshot = 100;
        s.drop_tombstones = true;
    });
    assert_eq!(
        keys_and_seqs(&h.read(&out)),
        [("live".into(), 6, ValueKind::ExpiringValue)]
    );
}

#[test]
fn a_relocated_value_is_read_and_written_again_as_gc() {
    let mut h = Harness::new();
    // A value file in the version, holding the value a pointer names.
    let number = h.new_file();
    let (_, mut w) = ValueFileWriter::create(
        &*h.storage,
        h.dir.path(),
        number,
        IoCause::ValueLog,
        crate::options::Compression::None,
    )
    .unwrap();
    let value = vec![3u8; 300];
    let old = w.add(b"k", &value).unwrap();
    let meta = w.finish().unwrap();
    let edit = VersionEdit {
        added_blobs: vec![meta],
        ..Default::default()
    };
    h.version = Version::empty(7).apply(&edit, h.dir.path(), &h.storage(), &None);
    let entries = [e("k", 5, ValueKind::Pointer, &old.encode())];
    let relocate = |p: &ValuePointer| p.file == number;
    let out = h.run(&entries, |s| s.relocate = Some(&relocate));
    let got = h.read(&out);
    let new = pointer(&got[0]);
    assert_ne!(new.file, number);
    assert_eq!(h.value(&out, b"k", &new), value);
    assert_eq!(out.dropped, [old]);
    assert_eq!(out.relocated_bytes, new.size as u64);
    assert!(h.written(IoCause::GcWrite) >= 300);
    assert!(
        h.storage
            .stats()
            .snapshot()
            .cause(IoCause::GcRead)
            .bytes_read
            >= 300
    );
}

#[test]
fn a_value_the_write_path_logged_is_pointed_at_not_written_again() {
    let h = Harness::new();
    let logged_at = ValuePointer {
        file: 42,
        offset: 16,
        size: 520,
    };
    let logged = |seq: SeqNo| (seq == 8).then_some(logged_at);
    let entries = [
        e("a", 8, ValueKind::Value, &[1u8; 500]),
        e("b", 9, ValueKind::Value, &[2u8; 500]),
    ];
    let out = h.run(&entries, |s| {
        s.cause = IoCause::Flush;
        s.output_level = 0;
        s.separate_values = true;
        s.logged = Some(&logged);
    });
    let got = h.read(&out);
    assert_eq!(pointer(&got[0]), logged_at);
    // "b" was not logged: the flush writes it out.
    assert_eq!(out.blobs.len(), 1);
    assert_eq!(pointer(&got[1]).file, out.blobs[0].number);
    assert_eq!(out.tables[0].oldest_blob, Some(42));
}

#[test]
fn a_failed_job_leaves_no_file_behind() {
    let h = Harness::new();
    let mut input = input(&[
        e("a", 3, ValueKind::Value, &[1u8; 500]),
        e("b", 2, ValueKind::Value, b"x"),
    ]);
    // A key too short to be an internal key, after entries that opened a table and a
    // value file.
    input.push((b"zz".to_vec(), Vec::new()));
    let err = h.try_run(input, |s| s.separate_values = true).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert_eq!(h.files(), Vec::<String>::new());
}
