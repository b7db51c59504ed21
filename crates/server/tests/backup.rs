//! Backups of a running server: `BGSAVE` and `BACKUP CREATE` while other connections
//! write, restored into fresh directories that `check` finds clean and that hold every
//! write acknowledged before the backup was asked for; and a power cut right after
//! `BGSAVE` replied, which leaves a whole checkpoint, never a half one.
//!
//! Nothing waits for time to pass: each step waits for the state it needs (a writer's
//! count, `INFO persistence`), with a long deadline only as a guard against a hang.

mod common;
use common::client::{simple, Client};
use common::Running;
use halflife_server::{AppendFsync, Config};
use redis_protocol::resp2::types::BytesFrame as F;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

const GUARD: Duration = Duration::from_secs(120);

fn config(backup: &Path) -> Config {
    Config {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        appendfsync: AppendFsync::Always,
        backup_dir: Some(backup.to_path_buf()),
        ..Config::default()
    }
}

/// A field of `INFO persistence`.
fn persistence(c: &mut Client, field: &str) -> String {
    c.info_field("persistence", field)
        .unwrap_or_else(|| panic!("no {field} in INFO persistence"))
}

/// Waits until the `BGSAVE` running has finished and `rdb_saves` reached `saves`; the
/// save must have succeeded.
fn wait_bgsave(c: &mut Client, saves: u64) {
    let start = Instant::now();
    while persistence(c, "rdb_bgsave_in_progress") != "0"
        || persistence(c, "rdb_saves").parse::<u64>().unwrap() < saves
    {
        assert!(start.elapsed() < GUARD, "BGSAVE never finished");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(persistence(c, "rdb_last_bgsave_status"), "ok");
}

/// Writers on their own connections, each setting `w<t>:<i>` for i = 0, 1, ... and
/// counting the writes acknowledged so far.
struct Writers {
    acked: Vec<Arc<AtomicUsize>>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Writers {
    fn start(addr: std::net::SocketAddr, n: usize) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let acked: Vec<_> = (0..n).map(|_| Arc::new(AtomicUsize::new(0))).collect();
        let threads = acked
            .iter()
            .enumerate()
            .map(|(t, count)| {
                let (count, stop) = (count.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut c = Client::connect(addr);
                    let mut i = 0;
                    while !stop.load(SeqCst) {
                        let (k, v) = (format!("w{t}:{i}"), format!("value {t} {i}"));
                        assert_eq!(c.cmd(&["SET", &k, &v]), simple("OK"));
                        i += 1;
                        count.store(i, SeqCst);
                    }
                })
            })
            .collect();
        Writers {
            acked,
            stop,
            threads,
        }
    }

    /// Each writer's count of acknowledged writes now.
    fn counts(&self) -> Vec<usize> {
        self.acked.iter().map(|c| c.load(SeqCst)).collect()
    }

    /// Waits until every writer has `n` more acknowledged writes than in `from`.
    fn wait_past(&self, from: &[usize], n: usize) {
        let start = Instant::now();
        while self.counts().iter().zip(from).any(|(c, f)| *c < f + n) {
            assert!(start.elapsed() < GUARD, "the writers stalled");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn stop(self) {
        self.stop.store(true, SeqCst);
        for t in self.threads {
            t.join().unwrap();
        }
    }
}

/// The check `halflife check` runs: every file and value pointer of the database in
/// `dir`.
fn check_clean(dir: &Path) {
    let r = engine::check::check(dir, &engine::Options::default(), &mut |_, _| {}).unwrap();
    assert!(r.is_ok(), "check of {}: {r:?}", dir.display());
}

/// Copies a checkpoint directory file by file (a restore of a `BGSAVE`).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        assert!(e.file_type().unwrap().is_file(), "{:?}", e.path());
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Serves the restored database in `dir` and asserts every write in `acked` (per writer,
/// the count acknowledged) reads back with its value.
fn assert_holds(dir: &Path, backup: &Path, acked: &[usize]) {
    check_clean(dir);
    let srv = Running::start(dir, config(backup));
    let mut c = Client::connect(srv.addr);
    for (t, &n) in acked.iter().enumerate() {
        for i in 0..n {
            let got = c.cmd(&["GET", &format!("w{t}:{i}")]);
            assert_eq!(
                got,
                F::BulkString(format!("value {t} {i}").into_bytes().into()),
                "w{t}:{i} of {n} acknowledged, restored into {}",
                dir.display()
            );
        }
    }
    drop(c);
    srv.stop();
}

#[test]
fn bgsave_and_backup_under_writes_restore_every_acknowledged_write() {
    let t = tempfile::tempdir().unwrap();
    let (data, backup) = (t.path().join("db"), t.path().join("backup"));
    let srv = Running::start(&data, config(&backup));
    let mut admin = Client::connect(srv.addr);
    let w = Writers::start(srv.addr, 3);
    w.wait_past(&[0, 0, 0], 200);

    // BGSAVE: every write acknowledged before it is sent is in the checkpoint.
    let before_save = w.counts();
    assert_eq!(admin.cmd(&["BGSAVE"]), simple("Background saving started"));
    wait_bgsave(&mut admin, 1);
    let F::Integer(last) = admin.cmd(&["LASTSAVE"]) else {
        panic!("LASTSAVE")
    };
    assert_eq!(
        persistence(&mut admin, "rdb_last_save_time"),
        last.to_string()
    );
    // The writers went on while it ran and after.
    w.wait_past(&before_save, 100);

    // BACKUP CREATE, the same, through the backup engine.
    let before_backup = w.counts();
    let F::Array(meta) = admin.cmd(&["BACKUP", "CREATE"]) else {
        panic!("BACKUP CREATE answers the backup's description")
    };
    assert_eq!(meta[0], F::BulkString("id".into()));
    assert_eq!(meta[1], F::Integer(1));
    w.wait_past(&before_backup, 100);
    // A second backup shares the first one's unchanged files; both verify.
    let F::Array(meta2) = admin.cmd(&["BACKUP", "CREATE"]) else {
        panic!("a second backup")
    };
    assert_eq!(meta2[1], F::Integer(2));
    assert_eq!(admin.cmd(&["BACKUP", "VERIFY"]), F::Integer(2));
    let F::Array(list) = admin.cmd(&["BACKUP", "LIST"]) else {
        panic!("BACKUP LIST")
    };
    assert_eq!(list.len(), 2);
    w.stop();
    drop(admin);
    srv.stop();

    let cp = t.path().join("restored-bgsave");
    copy_dir(&backup.join("bgsave"), &cp);
    assert_holds(&cp, &t.path().join("b1"), &before_save);

    let be = engine::backup::BackupEngine::open(&backup).unwrap();
    let restored = t.path().join("restored-backup");
    assert_eq!(be.restore(Some(1), &restored).unwrap().id, 1);
    drop(be);
    assert_holds(&restored, &t.path().join("b2"), &before_backup);
}

#[test]
fn one_job_at_a_time_and_bgsave_schedule_waits_for_it() {
    let t = tempfile::tempdir().unwrap();
    let (data, backup) = (t.path().join("db"), t.path().join("backup"));
    let srv = Running::start(&data, config(&backup));
    let mut c = Client::connect(srv.addr);
    assert_eq!(c.cmd(&["SET", "k", "v"]), simple("OK"));
    assert!(matches!(c.cmd(&["BGSAVE", "NOW"]), F::Error(_)));
    assert!(matches!(c.cmd(&["BACKUP", "PURGE", "x"]), F::Error(_)));
    assert!(matches!(c.cmd(&["BACKUP"]), F::Error(_)));
    assert_eq!(c.cmd(&["SAVE"]), simple("OK"));
    assert_eq!(persistence(&mut c, "rdb_saves"), "1");
    assert_eq!(persistence(&mut c, "rdb_changes_since_last_save"), "0");
    assert_eq!(c.cmd(&["SET", "k2", "v"]), simple("OK"));
    assert_ne!(persistence(&mut c, "rdb_changes_since_last_save"), "0");
    let F::Array(_) = c.cmd(&["BACKUP", "CREATE"]) else {
        panic!("BACKUP CREATE")
    };
    assert_eq!(c.cmd(&["BACKUP", "PURGE", "1"]), F::Integer(0));
    let F::Array(_) = c.cmd(&["BACKUP", "CREATE"]) else {
        panic!("BACKUP CREATE")
    };
    assert_eq!(c.cmd(&["BACKUP", "PURGE", "1"]), F::Integer(1));
    assert_eq!(c.cmd(&["BACKUP", "VERIFY", "2"]), F::Integer(1));
    assert!(matches!(c.cmd(&["BACKUP", "VERIFY", "1"]), F::Error(_)));
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "backup-dir"]),
        F::Array(vec![
            F::BulkString("backup-dir".into()),
            F::BulkString(backup.display().to_string().into_bytes().into())
        ])
    );
    drop(c);
    srv.stop();
}

/// `save 1 <n>`: once the changes since the last save reach the point's count and a second
/// has passed since it, the server runs a `BGSAVE` by itself: `LASTSAVE` moves, the
/// changes count starts again, and the checkpoint holds the writes. Fewer changes than
/// the point asks for start none.
#[test]
fn save_points_schedule_a_bgsave_after_enough_changes() {
    let t = tempfile::tempdir().unwrap();
    let (data, backup) = (t.path().join("db"), t.path().join("backup"));
    let srv = Running::start(&data, config(&backup));
    let mut c = Client::connect(srv.addr);
    let start = match c.cmd(&["LASTSAVE"]) {
        F::Integer(n) => n,
        other => panic!("LASTSAVE: {other:?}"),
    };
    write_keys(&mut c, 0, 2);
    // The changes are the engine's sequence numbers: one more than now is the next write.
    let changes: u64 = persistence(&mut c, "rdb_changes_since_last_save")
        .parse()
        .unwrap();
    assert!(changes > 0);
    let point = format!("1 {}", changes + 1);
    assert_eq!(c.cmd(&["CONFIG", "SET", "save", &point]), simple("OK"));
    // Under the point, whenever the check runs: nothing saved.
    assert_eq!(persistence(&mut c, "rdb_saves"), "0");
    write_keys(&mut c, 2, 3);
    wait_bgsave(&mut c, 1);
    let F::Integer(last) = c.cmd(&["LASTSAVE"]) else {
        panic!("LASTSAVE")
    };
    assert!(last > start, "LASTSAVE {last}, {start} at the start");
    assert_eq!(persistence(&mut c, "rdb_changes_since_last_save"), "0");
    assert_eq!(checkpoint_holds(t.path(), &backup, 0), 3);
    drop(c);
    srv.stop();
}

/// The keys `k0..n` with values, written and acknowledged (appendfsync always).
fn write_keys(c: &mut Client, from: usize, to: usize) {
    for i in from..to {
        assert_eq!(
            c.cmd(&["SET", &format!("k{i}"), &format!("v{i}")]),
            simple("OK")
        );
    }
}

/// Which prefix `k0..` of keys the checkpoint in `backup/bgsave` holds, after `check`
/// found it clean.
fn checkpoint_holds(t: &Path, backup: &Path, round: usize) -> usize {
    let cp = t.join(format!("cp{round}"));
    copy_dir(&backup.join("bgsave"), &cp);
    check_clean(&cp);
    let srv = Running::start(&cp, config(&t.join(format!("cp{round}-backup"))));
    let mut c = Client::connect(srv.addr);
    let F::Integer(n) = c.cmd(&["DBSIZE"]) else {
        panic!("DBSIZE")
    };
    for i in 0..n as usize {
        assert_eq!(
            c.cmd(&["GET", &format!("k{i}")]),
            F::BulkString(format!("v{i}").into_bytes().into()),
            "the checkpoint holds {n} keys but not k{i}"
        );
    }
    drop(c);
    srv.stop();
    n as usize
}

/// The power goes right after `BGSAVE` replied, with a checkpoint already in
/// `backup-dir`, at one of several points of the new one's making (after 0 or more of the
/// storage's calls): after the next start, `bgsave/` is the previous checkpoint or the new
/// one, whole (`check` clean, exactly the keys written before the one or the other
/// `BGSAVE`), never a mix or a half.
#[test]
fn power_cut_right_after_bgsave_leaves_a_whole_checkpoint() {
    let mut outcomes = Vec::new();
    // The last case cuts only once the save has finished: the new checkpoint must be there.
    let done = u64::MAX / 2;
    for (seed, calls) in [
        (1u64, 0u64),
        (2, 1),
        (3, 2),
        (4, 3),
        (5, 6),
        (6, 12),
        (7, 40),
        (8, done),
    ] {
        let t = tempfile::tempdir().unwrap();
        let (data, backup, shadow) = (
            t.path().join("db"),
            t.path().join("backup"),
            t.path().join("shadow"),
        );
        let (srv, storage) = Running::start_power_cut(
            &data,
            &shadow,
            seed,
            testkit::powercut::Moment::Never,
            config(&backup),
        );
        let mut c = Client::connect(srv.addr);
        write_keys(&mut c, 0, 50);
        assert_eq!(c.cmd(&["BGSAVE"]), simple("Background saving started"));
        wait_bgsave(&mut c, 1);
        write_keys(&mut c, 50, 80);
        assert_eq!(c.cmd(&["BGSAVE"]), simple("Background saving started"));
        let at = storage.ops();
        let start = Instant::now();
        // The cut lands `calls` storage calls later, or when the save has finished.
        while storage.ops() < at + calls && persistence(&mut c, "rdb_bgsave_in_progress") == "1" {
            assert!(start.elapsed() < GUARD);
            std::thread::sleep(Duration::from_micros(200));
        }
        drop(c);
        srv.cut_power(&storage);
        // The next start puts a checkpoint a cut left as `bgsave.old/` back in place.
        Running::start(&data, config(&backup)).stop();
        let n = checkpoint_holds(t.path(), &backup, 0);
        assert!(n == 50 || n == 80, "a checkpoint of {n} keys");
        if calls == done {
            assert_eq!(n, 80, "a finished BGSAVE lost to a later cut");
        }
        outcomes.push(n);
    }
    eprintln!("keys in the checkpoint after each cut: {outcomes:?}");
}
