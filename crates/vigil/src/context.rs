//! Virtual time of the calling thread, and the per-request device time a client call
//! accumulates.
//!
//! The device runs on a virtual clock; the engine runs on real threads. Each thread keeps a
//! cursor on the virtual clock: a client call starts it at its arrival time
//! ([`begin_client_op`]) and every device request it makes is issued at the cursor and moves
//! the cursor to its completion, so [`end_client_op`] knows the device time of the call.
//! Background threads (flush, compaction, GC) issue at the later of the volume's clock and
//! their own cursor, so their requests are sequential in virtual time and paced by the
//! device instead of all landing on one instant.
//!
//! The emulator's own bookkeeping runs on the caller's CPU; its thread CPU time is summed
//! separately so that a latency report can count the engine's CPU time without counting the
//! emulator's (the XOR of a reconstruction is the volume's work and is not subtracted).

use std::cell::Cell;
use std::time::Duration;

#[derive(Clone, Copy, Default)]
struct Ctx {
    /// Which volume the cursor belongs to (volumes have independent clocks).
    volume: u64,
    client: bool,
    start: u64,
    cursor: u64,
    emulator_ns: u64,
}

thread_local! {
    static CTX: Cell<Ctx> = Cell::new(Ctx::default());
}

/// Device time and emulator CPU time of one client call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpTimes {
    /// Virtual time from the call's arrival to the completion of its last device request.
    pub device: Duration,
    /// CPU time this thread spent inside the device emulator during the call.
    pub emulator_cpu: Duration,
}

/// Starts a client call arriving at virtual time `at_ns` (nanoseconds on `volume`'s clock).
pub fn begin_client_op(volume: u64, at_ns: u64) {
    CTX.with(|c| {
        c.set(Ctx {
            volume,
            client: true,
            start: at_ns,
            cursor: at_ns,
            emulator_ns: 0,
        })
    });
}

/// Ends the client call begun last on this thread.
pub fn end_client_op() -> OpTimes {
    CTX.with(|c| {
        let mut x = c.get();
        let t = OpTimes {
            device: Duration::from_nanos(x.cursor.saturating_sub(x.start)),
            emulator_cpu: Duration::from_nanos(x.emulator_ns),
        };
        x.client = false;
        c.set(x);
        t
    })
}

/// When this thread's next request on `volume` is issued, given the volume's clock `now`.
pub(crate) fn issue_time(volume: u64, now: u64) -> u64 {
    CTX.with(|c| {
        let x = c.get();
        if x.volume != volume {
            return now;
        }
        if x.client {
            x.cursor
        } else {
            x.cursor.max(now)
        }
    })
}

/// Records that this thread's request on `volume` completed at `done`.
pub(crate) fn completed(volume: u64, done: u64) {
    CTX.with(|c| {
        let mut x = c.get();
        if x.volume != volume {
            x = Ctx {
                volume,
                ..Ctx::default()
            };
        }
        x.cursor = x.cursor.max(done);
        c.set(x);
    })
}

pub(crate) fn in_client_op() -> bool {
    CTX.with(|c| c.get().client)
}

/// Runs `f` (a call into the emulator) and, inside a client call, adds its thread CPU time
/// to the call's emulator time.
pub(crate) fn emulator<T>(f: impl FnOnce() -> T) -> T {
    if !in_client_op() {
        return f();
    }
    let t0 = thread_cpu_ns();
    let r = f();
    let dt = thread_cpu_ns().saturating_sub(t0);
    CTX.with(|c| {
        let mut x = c.get();
        x.emulator_ns += dt;
        c.set(x);
    });
    r
}

/// CPU time of the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_THREAD_CPUTIME_ID is
    // always available on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
