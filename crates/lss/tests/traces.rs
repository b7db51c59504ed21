//! The sample traces (made by `halflife lss gen-trace`) parse in every format, agree with
//! each other, and replay under every policy; malformed lines are reported with their
//! line number.

use halflife_lss::placement::NAMES;
use halflife_lss::sim::run_all;
use halflife_lss::trace::{self, Format};
use halflife_lss::{Config, LssError};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;

fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

#[test]
fn samples_parse_identically_in_all_formats() {
    let ali = trace::read(&sample("alibaba_sample.csv"), Format::Alibaba).unwrap();
    let ten = trace::read(&sample("tencent_sample.csv"), Format::Tencent).unwrap();
    let msr = trace::read(&sample("msrc_sample.csv"), Format::Msrc).unwrap();
    assert_eq!(ali.len(), 2);
    for vols in [&ten, &msr] {
        assert_eq!(vols.len(), ali.len());
        for (a, b) in ali.iter().zip(vols.iter()) {
            assert_eq!(a.lbas, b.lbas);
            assert_eq!(a.times, b.times);
            assert_eq!(
                (a.read_requests, a.write_requests),
                (b.read_requests, b.write_requests)
            );
        }
    }
    assert!(ali[0].read_requests > 0, "YCSB-A samples hold reads");
}

#[test]
fn samples_replay_under_every_policy() {
    let vols = trace::read(&sample("msrc_sample.csv"), Format::Msrc).unwrap();
    let cfg = Config {
        stripes_per_segment: 2,
        ..Config::default()
    };
    let pols: Vec<String> = NAMES.iter().map(|s| s.to_string()).collect();
    let r = run_all(&vols, &pols, &cfg, 2, &AtomicU64::new(0)).unwrap();
    assert_eq!(r.len(), vols.len() * pols.len());
    assert!(r.iter().all(|r| r.wa >= 1.0 && r.user_bytes > 0));
}

#[test]
fn malformed_line_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.csv");
    std::fs::write(&p, "1,W,0,4096,10\n1,W,0,4096,20\n1,W,zero,4096,30\n").unwrap();
    match trace::read(&p, Format::Alibaba) {
        Err(LssError::Parse { path, line, msg }) => {
            assert_eq!(path, p);
            assert_eq!(line, 3);
            assert!(msg.contains("offset"), "{msg}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
    // Bytes where sectors are expected: caught as a unit error on line 1.
    std::fs::write(&p, "1,W,100,4096,10\n").unwrap();
    let e = trace::read(&p, Format::Alibaba).unwrap_err().to_string();
    assert!(e.contains("bad.csv:1:") && e.contains("unit"), "{e}");
}
