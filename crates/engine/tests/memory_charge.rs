//! Memory the engine holds besides memtables and cached blocks is charged to the block
//! cache (issue 13, docs/bench.md "Memory at full scale"): table index and filter blocks
//! while a table is open, the value index maps and the lifetime policies' tables after
//! every background job. Blocks get only what is left of the capacity.

use halflife_engine::{
    CacheOptions, GcPolicyConfig, LifetimeOptions, Options, TreeOptions, ValueLogOptions,
    WalOptions, DB,
};

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u64, round: u64, len: usize) -> Vec<u8> {
    let mut v = format!("{i}:{round}:").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

fn small_tree(cache: usize) -> Options {
    Options {
        tree: TreeOptions {
            memtable_size: 64 << 10,
            target_file_size: 64 << 10,
            level1_max_bytes: 256 << 10,
            ..Default::default()
        },
        vlog: ValueLogOptions {
            min_blob_size: 512,
            blob_file_size: 64 << 10,
            ..Default::default()
        },
        cache: CacheOptions {
            block_cache_capacity: cache,
            ..Default::default()
        },
        ..Options::default()
    }
}

#[test]
fn open_tables_charge_their_index_and_filter_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let opts = {
        let base = small_tree(4 << 20);
        Options {
            wal: WalOptions {
                value_log_wal: false,
                ..base.wal
            },
            vlog: ValueLogOptions {
                gc: GcPolicyConfig::Inline,
                ..base.vlog
            },
            ..base
        }
    };
    let read_all = |db: &DB| {
        for i in 0..3000 {
            assert_eq!(db.get(&key(i)).unwrap(), Some(value(i, 0, 100)));
        }
    };
    let db = DB::open(dir.path(), opts.clone()).unwrap();
    assert_eq!(db.stats().cache.reserved, 0, "nothing is open yet");
    for i in 0..3000 {
        db.put(&key(i), &value(i, 0, 100)).unwrap();
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    // Tables open on first use: reading every key opens every table.
    read_all(&db);
    let reserved = db.stats().cache.reserved;
    // About 10 bits of filter per key plus an index entry per 4 KiB block.
    assert!(reserved >= 3000 * 10 / 8, "{reserved} bytes charged");
    let s = db.stats().cache;
    assert!(s.usage > 0, "reads cache their blocks");
    assert!(s.usage + s.reserved <= s.capacity, "{s:?}");
    drop(db);
    // A reopened database charges the tables it opens again, no more and no less.
    let db = DB::open(dir.path(), opts.clone()).unwrap();
    db.wait_idle().unwrap();
    assert_eq!(db.stats().cache.reserved, 0, "no table is open yet");
    read_all(&db);
    assert_eq!(db.stats().cache.reserved, reserved);
    // Compacting everything into the last level gives back the replaced tables' charges:
    // what is left charged is what the compacted tables alone charge when opened afresh.
    // (Not compared with the charge before: the rewritten tables' index and filter blocks
    // may be a few bytes larger or smaller than the replaced ones'.)
    db.compact_range(None, None).unwrap();
    db.wait_idle().unwrap();
    read_all(&db);
    let after = db.stats().cache.reserved;
    assert!(after > 0, "the compacted tables are charged");
    drop(db);
    let db = DB::open(dir.path(), opts).unwrap();
    db.wait_idle().unwrap();
    read_all(&db);
    assert_eq!(
        db.stats().cache.reserved,
        after,
        "{after} charged after the compaction, {reserved} before it"
    );
}

#[test]
fn lifetime_tables_leave_blocks_only_the_rest_of_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    // The default policy (learned lifetime, value log as the WAL) with a write history
    // of 64K slots (1 MiB) and 1 MiB of recent pointers, in a 4 MiB cache.
    let opts = {
        let base = small_tree(4 << 20);
        Options {
            vlog: ValueLogOptions {
                lifetime: LifetimeOptions {
                    write_history_slots: 1 << 16,
                    recent_pointer_bytes: 1 << 20,
                    ..LifetimeOptions::default()
                },
                ..base.vlog
            },
            ..base
        }
    };
    let db = DB::open(dir.path(), opts).unwrap();
    let at_open = db.stats().cache.reserved;
    assert!(
        at_open >= 1 << 20,
        "the write history is charged from the open: {at_open}"
    );
    for round in 0..3 {
        for i in 0..2000 {
            db.put(&key(i), &value(i, round, 1000)).unwrap();
        }
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let s = db.stats().cache;
    assert!(
        s.reserved > at_open,
        "tables, recent pointers and known garbage add to it: {s:?}"
    );
    for i in 0..2000 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i, 2, 1000)));
    }
    let s = db.stats().cache;
    assert!(s.usage > 0 && s.usage + s.reserved <= s.capacity, "{s:?}");
}

#[test]
fn charges_larger_than_the_cache_leave_no_block_cached_and_reads_still_work() {
    let dir = tempfile::tempdir().unwrap();
    let opts = {
        let base = small_tree(4 << 20);
        Options {
            vlog: ValueLogOptions {
                lifetime: LifetimeOptions {
                    write_history_slots: 1 << 18, // 4 MiB, the whole cache
                    ..LifetimeOptions::default()
                },
                ..base.vlog
            },
            ..base
        }
    };
    let db = DB::open(dir.path(), opts).unwrap();
    for i in 0..2000 {
        db.put(&key(i), &value(i, 0, 1000)).unwrap();
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    for i in 0..2000 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i, 0, 1000)));
    }
    let s = db.stats().cache;
    assert!(s.reserved >= s.capacity, "{s:?}");
    assert_eq!((s.usage, s.entries), (0, 0), "{s:?}");
    assert!(s.rejected > 0, "{s:?}");
}
