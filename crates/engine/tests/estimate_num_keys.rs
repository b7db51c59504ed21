//! `DB::estimate_num_keys` and `DB::sync_wal`, the small APIs the server and the Python
//! package use.

use halflife_engine::{Options, DB};

#[test]
fn estimate_follows_puts_and_deletes_through_flushes() {
    let t = tempfile::tempdir().unwrap();
    let db = DB::open(t.path(), Options::default()).unwrap();
    assert_eq!(db.estimate_num_keys(), 0);
    for i in 0..1000u32 {
        db.put(format!("k{i:04}").as_bytes(), b"v").unwrap();
    }
    assert_eq!(db.estimate_num_keys(), 1000);
    db.flush().unwrap();
    assert_eq!(db.estimate_num_keys(), 1000);
    for i in 0..100u32 {
        db.delete(format!("k{i:04}").as_bytes()).unwrap();
    }
    db.flush().unwrap();
    // 1000 entries and 100 tombstones in two tables: 1000 + 100 - 2 * 100.
    assert_eq!(db.estimate_num_keys(), 900);
    db.sync_wal().unwrap();
    db.close().unwrap();
}
