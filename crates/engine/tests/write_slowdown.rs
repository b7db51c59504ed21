//! Delayed writes: once L0 reaches its slowdown trigger, writes are held to
//! `delayed_write_rate` (before the stop trigger), and the engine counts the delays.

use halflife_engine::{GcPolicyConfig, Options, TreeOptions, ValueLogOptions, DB};
use std::time::{Duration, Instant};

#[test]
fn writes_are_held_to_the_delayed_rate_at_the_l0_slowdown_trigger() {
    let dir = tempfile::tempdir().unwrap();
    let rate = 256 << 10;
    let db = DB::open(
        dir.path(),
        Options {
            tree: TreeOptions {
                memtable_size: 1 << 20,
                l0_compaction_trigger: 4,
                l0_slowdown_writes_trigger: 1,
                delayed_write_rate: rate,
                ..Default::default()
            },
            vlog: ValueLogOptions {
                gc: GcPolicyConfig::Inline,
                ..Default::default()
            },
            ..Options::default()
        },
    )
    .unwrap();
    // Before L0 has a file: no delay.
    let value = vec![7u8; 1000];
    for i in 0..100u32 {
        db.put(format!("a{i:05}").as_bytes(), &value).unwrap();
    }
    assert_eq!(db.stats().delay_count, 0);
    db.flush().unwrap();
    db.wait_idle().unwrap();
    // One L0 file: every byte now costs 1/rate seconds.
    let start = Instant::now();
    for i in 0..128u32 {
        db.put(format!("b{i:05}").as_bytes(), &value).unwrap();
    }
    let took = start.elapsed();
    let bytes = 128 * (6 + 1000) as u64;
    let expected = Duration::from_secs_f64(bytes as f64 / rate as f64);
    assert!(
        took >= expected.mul_f64(0.8),
        "{took:?} for {bytes} bytes at {rate} B/s"
    );
    let s = db.stats();
    assert!(s.delay_count > 0 && s.delay_micros > 0, "{s:?}");
    assert_eq!(s.stall_count, 0);
    for i in 0..128u32 {
        assert_eq!(
            db.get(format!("b{i:05}").as_bytes()).unwrap(),
            Some(value.clone())
        );
    }
    db.close().unwrap();
}

#[test]
fn slowdown_options_are_validated() {
    let bad = Options {
        tree: TreeOptions {
            delayed_write_rate: 0,
            ..Default::default()
        },
        ..Options::default()
    };
    assert!(bad
        .validate()
        .unwrap_err()
        .to_string()
        .contains("delayed_write_rate"));
}
