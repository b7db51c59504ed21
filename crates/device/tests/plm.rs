//! The predictable-latency-mode state machine and the latency it buys.

use halflife_device::{
    Completion, Device, DeviceConfig, DeviceError, DtwinExit, PlmStatus, VirtualTime, Window,
};
use std::time::Duration;

fn cfg() -> DeviceConfig {
    let mut c = DeviceConfig::small();
    c.plm.max_dtwin = Duration::from_millis(500);
    c.plm.min_ndwin = Duration::from_millis(20);
    c.plm.internal_queue_capacity = 10_000;
    c
}

fn device(c: DeviceConfig) -> (tempfile::TempDir, Device) {
    let dir = tempfile::tempdir().unwrap();
    let dev = Device::new(c, dir.path()).unwrap();
    (dir, dev)
}

fn ms(x: u64) -> VirtualTime {
    VirtualTime::from_millis(x)
}

/// Tiny deterministic generator for workloads.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Overwrites a hot range many times so that GC has work, one page every `gap_us`.
fn churn(
    dev: &Device,
    set: u32,
    from: VirtualTime,
    pages: u64,
    hot: u64,
    gap_us: u64,
) -> VirtualTime {
    let mut t = from;
    let mut rng = Rng(7);
    for _ in 0..pages {
        let lpn = rng.next() % hot;
        dev.write(set, [lpn], t).unwrap();
        t = t + Duration::from_micros(gap_us);
    }
    t
}

/// Upper bound of a single-page read with nothing in its way: slowest page type, channel
/// transfer, host transfer.
fn clean_read_bound(c: &DeviceConfig) -> Duration {
    c.timings.read[2] + c.timings.channel_xfer + c.timings.host_xfer
}

#[test]
fn enabling_plm_starts_in_ndwin_and_disabled_refuses_windows() {
    let (_d, dev) = device(cfg());
    assert_eq!(dev.log_page(0, ms(0)).unwrap().status, PlmStatus::Disabled);
    assert!(matches!(
        dev.set_window(0, Window::Dtwin, ms(1)),
        Err(DeviceError::PlmDisabled { set: 0 })
    ));
    dev.set_plm(0, true, ms(1)).unwrap();
    let lp = dev.log_page(0, ms(2)).unwrap();
    assert_eq!(lp.status, PlmStatus::NonDeterministic);
    assert_eq!(lp.window_since, ms(1));
    assert_eq!(lp.dtwin_time_max, Duration::from_millis(500));
    assert_eq!(lp.ndwin_time_min_low, Duration::from_millis(20));
    assert_eq!(lp.dtwin_allowed_from, Some(ms(21)));
    assert_eq!(lp.dtwin_writes_typical, 0);
    // The other set is untouched.
    assert_eq!(dev.log_page(1, ms(2)).unwrap().status, PlmStatus::Disabled);
}

#[test]
fn min_ndwin_refuses_an_early_dtwin() {
    let (_d, dev) = device(cfg());
    dev.set_plm(0, true, ms(0)).unwrap();
    let err = dev.set_window(0, Window::Dtwin, ms(19)).unwrap_err();
    match err {
        DeviceError::MinNdwinNotElapsed { earliest, .. } => assert_eq!(earliest, ms(20)),
        e => panic!("unexpected {e}"),
    }
    assert_eq!(
        dev.log_page(0, ms(19)).unwrap().status,
        PlmStatus::NonDeterministic
    );
    let c = dev.set_window(0, Window::Dtwin, ms(20)).unwrap();
    assert_eq!(c.done_at, ms(20), "nothing buffered: no lockdown");
    assert_eq!(
        dev.log_page(0, ms(20)).unwrap().status,
        PlmStatus::Deterministic
    );

    // Back to NDWIN at 30 ms: the next DTWIN is allowed from 50 ms.
    dev.set_window(0, Window::Ndwin, ms(30)).unwrap();
    assert!(dev.set_window(0, Window::Dtwin, ms(49)).is_err());
    dev.set_window(0, Window::Dtwin, ms(50)).unwrap();
    let st = dev.stats(0).unwrap();
    assert_eq!(st.dtwin_refused, 2);
    assert_eq!(st.dtwin_entries, 2);
    assert_eq!(st.dtwin_exits_host, 1);
}

#[test]
fn max_dtwin_returns_the_set_to_ndwin() {
    let (_d, dev) = device(cfg());
    dev.set_plm(0, true, ms(0)).unwrap();
    dev.set_window(0, Window::Dtwin, ms(20)).unwrap();
    let lp = dev.log_page(0, ms(400)).unwrap();
    assert_eq!(lp.status, PlmStatus::Deterministic);
    assert_eq!(lp.dtwin_time_estimate, Duration::from_millis(120));
    let lp = dev.log_page(0, ms(520)).unwrap();
    assert_eq!(lp.status, PlmStatus::NonDeterministic);
    assert_eq!(lp.window_since, ms(520));
    assert_eq!(lp.last_exit, Some(DtwinExit::TimeLimit));
    // minNDWIN counts from the forced exit.
    assert!(dev.set_window(0, Window::Dtwin, ms(530)).is_err());
    assert!(dev.set_window(0, Window::Dtwin, ms(540)).is_ok());
    assert_eq!(dev.stats(0).unwrap().dtwin_exits_time_limit, 1);
    // A set first looked at long after the limit still left DTWIN exactly at the limit.
    let (_d2, dev2) = device(cfg());
    dev2.set_plm(0, true, ms(0)).unwrap();
    dev2.set_window(0, Window::Dtwin, ms(20)).unwrap();
    let lp = dev2.log_page(0, ms(900)).unwrap();
    assert_eq!(lp.status, PlmStatus::NonDeterministic);
    assert_eq!(lp.window_since, ms(520));
}

#[test]
fn a_write_ends_dtwin() {
    let (_d, dev) = device(cfg());
    dev.set_plm(0, true, ms(0)).unwrap();
    dev.set_window(0, Window::Dtwin, ms(20)).unwrap();
    let r = dev.read(0, [1, 2], ms(21)).unwrap();
    assert!(!r.ended_dtwin);
    assert_eq!(
        dev.log_page(0, ms(22)).unwrap().status,
        PlmStatus::Deterministic
    );
    // Trim is a mapping update: DTWIN holds.
    dev.trim(0, [5], ms(23)).unwrap();
    assert_eq!(
        dev.log_page(0, ms(23)).unwrap().status,
        PlmStatus::Deterministic
    );
    let w = dev.write(0, [3], ms(25)).unwrap();
    assert!(w.ended_dtwin);
    let lp = dev.log_page(0, ms(25)).unwrap();
    assert_eq!(lp.status, PlmStatus::NonDeterministic);
    assert_eq!(lp.window_since, ms(25));
    assert_eq!(lp.last_exit, Some(DtwinExit::Write));
    assert_eq!(dev.stats(0).unwrap().dtwin_exits_write, 1);
    // The NDWIN the write started must last minNDWIN.
    assert!(dev.set_window(0, Window::Dtwin, ms(44)).is_err());
}

#[test]
fn lockdown_drains_the_buffer_before_dtwin() {
    let c = cfg();
    let (_d, dev) = device(c.clone());
    dev.set_plm(0, true, ms(0)).unwrap();
    // Fill the buffer at 19.9 ms: nothing of it can have been programmed by 20 ms.
    let w = dev
        .write(0, 0..12, VirtualTime::from_micros(19_900))
        .unwrap();
    assert!(w.done_at <= ms(20));
    let before = dev.log_page(0, ms(20)).unwrap();
    assert!(before.buffered_pages > 0);
    assert!(before.lockdown_estimate > Duration::ZERO);

    let c1 = dev.set_window(0, Window::Dtwin, ms(20)).unwrap();
    // Twelve pages over four dies: at least three programs in a row on some die.
    assert!(c1.done_at >= ms(20) + c.timings.program[0] * 3, "{c1:?}");
    let during = dev.log_page(0, ms(20)).unwrap();
    assert!(during.in_lockdown);
    assert_eq!(during.status, PlmStatus::NonDeterministic);
    assert_eq!(during.buffered_pages, 0);
    assert_eq!(during.dtwin_begins_at, Some(c1.done_at));
    let flushed = dev.stats(0).unwrap().flush_programs;
    assert_eq!(flushed, 12);

    let after = dev.log_page(0, c1.done_at).unwrap();
    assert_eq!(after.status, PlmStatus::Deterministic);
    assert!(!after.in_lockdown);
    assert_eq!(after.window_since, c1.done_at);
    let st = dev.stats(0).unwrap();
    assert_eq!(
        st.lockdown_ns_total,
        (c1.done_at - ms(20)).as_nanos() as u64
    );
}

#[test]
fn a_write_during_lockdown_breaks_it() {
    let (_d, dev) = device(cfg());
    dev.set_plm(0, true, ms(0)).unwrap();
    dev.write(0, 0..12, VirtualTime::from_micros(19_900))
        .unwrap();
    let c = dev.set_window(0, Window::Dtwin, ms(20)).unwrap();
    assert!(c.done_at > ms(21));
    let w = dev.write(0, [40], ms(21)).unwrap();
    assert!(w.ended_dtwin);
    let lp = dev
        .log_page(0, c.done_at + Duration::from_millis(1))
        .unwrap();
    assert_eq!(lp.status, PlmStatus::NonDeterministic);
    assert_eq!(lp.last_exit, Some(DtwinExit::LockdownBroken));
    assert_eq!(dev.stats(0).unwrap().dtwin_entries, 0);
}

/// Brings set 0 to a state with plenty of internal work queued (GC and buffered pages), at
/// or after `min_ndwin`. Returns the time reached.
fn with_backlog(dev: &Device) -> VirtualTime {
    dev.set_plm(0, true, ms(0)).unwrap();
    // Fill the logical space once, then overwrite a hot part many times, quickly.
    let pages = dev.logical_pages();
    let mut t = VirtualTime::ZERO;
    for lpn in 0..pages {
        dev.write(0, [lpn], t).unwrap();
        t = t + Duration::from_micros(200);
    }
    churn(dev, 0, t, 600, pages / 2, 50)
}

#[test]
fn no_internal_task_runs_in_dtwin_and_reads_never_wait() {
    let mut c = cfg();
    c.read_reclaim_reads = 40;
    let (_d, dev) = device(c.clone());
    let t = with_backlog(&dev);
    let s0 = dev.stats(0).unwrap();
    assert!(
        s0.gc_jobs > 0,
        "the workload should have started GC: {s0:?}"
    );

    let lock = dev.set_window(0, Window::Dtwin, t).unwrap();
    let start = lock.done_at;
    assert_eq!(
        dev.log_page(0, start).unwrap().status,
        PlmStatus::Deterministic
    );
    let s1 = dev.stats(0).unwrap();

    // Single-page reads of a hot range, 1 ms apart, for 400 ms of DTWIN: enough reads per
    // block to make read-reclaim due, which must wait.
    let bound = clean_read_bound(&c);
    let mut rng = Rng(99);
    let mut worst = Duration::ZERO;
    for i in 0..400u64 {
        let at = start + Duration::from_millis(i);
        let r = dev.read(0, [rng.next() % 24], at).unwrap();
        assert!(!r.waited_on_internal, "read {i} waited on internal work");
        worst = worst.max(r.latency());
    }
    assert!(worst <= bound, "worst DTWIN read {worst:?} > {bound:?}");
    let s2 = dev.stats(0).unwrap();
    assert_eq!(s2.reads_behind_internal, s1.reads_behind_internal);
    assert_eq!(s2.flush_programs, s1.flush_programs);
    assert_eq!(s2.gc_migrations, s1.gc_migrations);
    assert_eq!(s2.erases, s1.erases);
    assert_eq!(s2.reads_in_dtwin, 400);
    assert_eq!(s2.reclaim_jobs, s1.reclaim_jobs);
    let end = dev.log_page(0, start + Duration::from_millis(400)).unwrap();
    assert_eq!(end.status, PlmStatus::Deterministic);
    assert!(
        end.internal_jobs_pending > 0,
        "read-reclaim should be due and deferred"
    );

    // Back in NDWIN the deferred work runs.
    let back = start + Duration::from_millis(401);
    dev.set_window(0, Window::Ndwin, back).unwrap();
    dev.settle(0, back + Duration::from_secs(5)).unwrap();
    let s3 = dev.stats(0).unwrap();
    assert!(s3.reclaim_jobs > s2.reclaim_jobs, "{s3:?}");
    assert!(s3.erases > s2.erases, "{s3:?}");
    assert_eq!(
        dev.log_page(0, back + Duration::from_secs(5))
            .unwrap()
            .internal_jobs_pending,
        0
    );
}

#[test]
fn an_ndwin_read_can_wait_behind_internal_work_a_dtwin_read_cannot() {
    let c = cfg();
    // Two devices in the same state; one stays in NDWIN, the other enters DTWIN.
    let (_d1, nd) = device(c.clone());
    let (_d2, dt) = device(c.clone());
    let t1 = with_backlog(&nd);
    let t2 = with_backlog(&dt);
    assert_eq!(t1, t2);
    let lock = dt.set_window(0, Window::Dtwin, t2).unwrap();
    let start = lock.done_at;

    let bound = clean_read_bound(&c);
    let (mut nd_worst, mut dt_worst, mut nd_waits) = (Duration::ZERO, Duration::ZERO, 0);
    let mut rng = Rng(3);
    // The NDWIN set is read from the moment the writes stop, while it flushes its buffer
    // and collects garbage; the DTWIN set from the moment its DTWIN begins.
    for i in 0..300u64 {
        let step = Duration::from_micros(500 * i);
        let lpn = rng.next() % nd.logical_pages();
        let a = nd.read(0, [lpn], t1 + step).unwrap();
        let b = dt.read(0, [lpn], start + step).unwrap();
        nd_worst = nd_worst.max(a.latency());
        dt_worst = dt_worst.max(b.latency());
        nd_waits += a.waited_on_internal as u32;
        assert!(!b.waited_on_internal);
    }
    eprintln!("NDWIN worst {nd_worst:?} ({nd_waits} of 300 waited), DTWIN worst {dt_worst:?}");
    assert!(nd_waits > 0, "NDWIN reads should meet GC, erase or flush");
    assert!(nd_worst > bound, "NDWIN worst {nd_worst:?}");
    assert!(dt_worst <= bound, "DTWIN worst {dt_worst:?}");
    assert!(nd_worst > dt_worst * 3, "nd {nd_worst:?} dt {dt_worst:?}");
}

#[test]
fn sets_do_not_interfere() {
    let c = cfg();
    let (_d, dev) = device(c.clone());
    // Set 1 holds one page; set 0 is hammered with writes.
    dev.write(1, [0], ms(0)).unwrap();
    dev.settle(1, ms(50)).unwrap();
    churn(&dev, 0, ms(50), 300, 100, 20);
    let r: Completion = dev.read(1, [0], ms(55)).unwrap();
    assert!(r.latency() <= clean_read_bound(&c));
    assert!(!r.waited_on_internal);
}

#[test]
fn internal_queue_overflow_in_dtwin_forces_ndwin() {
    let mut c = cfg();
    c.read_reclaim_reads = 5;
    c.plm.internal_queue_capacity = 2;
    let (_d, dev) = device(c);
    dev.set_plm(0, true, ms(0)).unwrap();
    // One page in each of several blocks: the first pages of 4 dies, then more.
    dev.write(0, 0..16, ms(0)).unwrap();
    dev.settle(0, ms(19)).unwrap();
    dev.set_window(0, Window::Dtwin, ms(20)).unwrap();
    let mut t = ms(30);
    for _ in 0..5 {
        for lpn in 0..16 {
            dev.read(0, [lpn], t).unwrap();
            t = t + Duration::from_micros(300);
        }
    }
    let lp = dev.log_page(0, t).unwrap();
    assert_eq!(lp.status, PlmStatus::NonDeterministic);
    assert_eq!(lp.last_exit, Some(DtwinExit::InternalQueueFull));
}
