use halflife_engine::{Options, DB};
#[test]
fn reopen_twice() {
    let dir = tempfile::tempdir().unwrap();
    let o = || Options {
        memtable_size: 16 << 10,
        ..Options::default()
    };
    let db = DB::open(dir.path(), o()).unwrap();
    db.put(b"a", b"1").unwrap();
    db.close().unwrap();
    eprintln!("after close 1: {:?}", ls());
    let db = DB::open(dir.path(), o()).unwrap();
    eprintln!("after open 2: {:?}", ls());
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    db.put(b"b", b"2").unwrap();
    db.close().unwrap();
    eprintln!("after close 2: {:?}", ls());
    let db = DB::open(dir.path(), o()).unwrap();
    eprintln!("after open 3: {:?}", ls());
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"b").unwrap(), Some(b"2".to_vec()));
}
