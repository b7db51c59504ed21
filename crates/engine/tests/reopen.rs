//! Writes survive repeated reopenings, with and without the WAL.

use halflife_engine::{Options, TreeOptions, WalOptions, DB};

fn reopen_keeps_everything(use_wal: bool) {
    let dir = tempfile::tempdir().unwrap();
    let o = || Options {
        tree: TreeOptions {
            memtable_size: 16 << 10,
            ..Default::default()
        },
        wal: WalOptions {
            use_wal,
            ..Default::default()
        },
        ..Options::default()
    };
    for round in 0..4u32 {
        let db = DB::open(dir.path(), o()).unwrap();
        for r in 0..round {
            assert_eq!(
                db.get(format!("k{r}").as_bytes()).unwrap(),
                Some(vec![r as u8; 10])
            );
        }
        db.put(format!("k{round}").as_bytes(), &[round as u8; 10])
            .unwrap();
        db.close().unwrap();
    }
}

#[test]
fn reopen_with_wal() {
    reopen_keeps_everything(true);
}

#[test]
fn reopen_without_wal_flushes_at_close() {
    reopen_keeps_everything(false);
}
