//! Kvrocks' source-driven slot move, `CLUSTERX MIGRATE <slot> <dst id> [ASYNC | SYNC
//! [timeout]]`: the controller asks the source, which moves the slot's keys by itself in
//! a background job and reports its progress in `CLUSTER INFO` (`migrating_slot`,
//! `destination_node`, `migrating_state: start|success|fail`, Kvrocks' lines); on success
//! the controller gives the slot to the destination (`CLUSTERX SETSLOT ... NODE`).
//!
//! The job is Redis's move driven from inside the source, with the pieces that exist:
//! it tells the destination to import the slot (`CLUSTER IMPORT <slot> 0`, Kvrocks'
//! command between nodes, which makes the slot IMPORTING there; sent over the connection
//! it then moves keys on), marks the slot MIGRATING here (clients get
//! `-ASK` for the keys already gone, [`super::route`]), and walks this node's keys, moving
//! those of the slot in batches with `MIGRATE`'s transfer ([`crate::cmd::migrate`], under
//! the same locks). A walk that finds none of the slot's keys ends it: no key of a
//! MIGRATING slot is created on the source (a request whose keys are all missing is sent
//! to the destination, one whose keys are split gets `-TRYAGAIN`), so none is left. The
//! destination is told (`CLUSTER IMPORT <slot> 1`: it serves the slot to every client
//! from then on), and the slot is marked migrated here (kept on disk as the MIGRATING
//! mark is): every command on it gets `-MOVED` to the destination, even before the
//! controller's `SETSLOT`, and is served there.
//!
//! A failure (the destination unreachable, an error reply, a topology change that ends
//! the move, a shutdown) stops the job with `migrating_state: fail` and the error in the
//! server's log (and in `SYNC`'s reply). Keys the destination did not acknowledge stay
//! here. If no batch was sent, the MIGRATING mark is removed (and the destination's
//! IMPORTING one with `CLUSTER IMPORT <slot> 2`, if it can be reached): the slot is as
//! before. If some were, the mark
//! stays, so that the keys already moved remain reachable (`-ASK`): `CLUSTERX MIGRATE`
//! of the slot to the same destination goes on from there, `CLUSTER SETSLOT STABLE`
//! abandons it (see docs/cluster.md).

use crate::cluster::slot::{key_slot, SLOTS};
use crate::cluster::state::Cluster;
use crate::cmd::migrate::{move_keys, Target};
use crate::protocol::Reply;
use crate::shared::Shared;
use bytes::Bytes;
use std::time::Duration;

/// Most keys one batch moves: commands on them (and on keys sharing their lock stripes)
/// wait while the batch is in flight (one round trip to the destination).
const BATCH_KEYS: usize = 100;
/// Most key bytes of one batch (a batch holds its keys' names in memory).
const BATCH_KEY_BYTES: usize = 1 << 20;
/// Metadata records one step of the walk examines (as one `SCAN` call at most).
const WALK_STEP: usize = crate::cmd::keyspace::MAX_SCAN_COUNT;
/// Bound of the connection to the destination and of each read and write on it.
const TIMEOUT: Duration = Duration::from_secs(10);

/// How `CLUSTERX MIGRATE` waits: not at all (`ASYNC`, the default), or for the job's end
/// (`SYNC`), at most `Some(timeout)`.
pub enum Wait {
    No,
    Sync(Option<Duration>),
}

/// `CLUSTERX MIGRATE`: checks the request as Kvrocks does (its errors), starts the job
/// on a thread of its own, and replies at once or at its end.
pub fn migrate(sh: &Shared, c: &Cluster, slot: u16, dst: &str, wait: Wait) -> Result<(), Reply> {
    debug_assert!(slot < SLOTS);
    let (host, port, myid) = {
        let st = c.read();
        let t = st
            .topology
            .as_ref()
            .ok_or_else(|| Reply::err("no topology set: CLUSTERX SETNODES first"))?;
        let d = t
            .node(dst)
            .ok_or_else(|| Reply::err("Can't find the destination node id"))?;
        if t.owner(slot).is_none_or(|n| n.id != st.myid) {
            return Err(Reply::err("Can't migrate slot which doesn't belong to me"));
        }
        if sh.store.is_replica() {
            return Err(Reply::err("Slave can't migrate slot"));
        }
        if d.master.is_some() {
            return Err(Reply::err("Can't migrate slot to a slave"));
        }
        if d.id == st.myid {
            return Err(Reply::err("Can't migrate slot to myself"));
        }
        if st.migrated.contains_key(&slot) {
            return Err(Reply::err("Can't migrate slot which has been migrated"));
        }
        if let Some(other) = st.migrating.get(&slot).filter(|o| *o != dst) {
            return Err(Reply::err(format!(
                "Slot {slot} is being migrated to {other}: CLUSTER SETSLOT {slot} STABLE first"
            )));
        }
        (d.ip.to_string(), d.port, st.myid.clone())
    };
    let arc = sh
        .arc()
        .ok_or_else(|| Reply::err("CLUSTERX MIGRATE needs a running server"))?;
    let id = c.jobs.begin(slot, dst)?;
    let dst_id = dst.to_string();
    let started = std::thread::Builder::new()
        .name("slot-migration".into())
        .spawn(move || {
            let r = run(&arc, slot, &dst_id, &host, port, &myid);
            if let Err(e) = &r {
                tracing::warn!("CLUSTERX MIGRATE of slot {slot} to {dst_id} failed: {e}");
            }
            if let Some(c) = &arc.cluster {
                c.jobs.end(r);
            }
        });
    if let Err(e) = started {
        c.jobs.end(Err(format!("starting its thread: {e}")));
        return Err(Reply::err(format!("can't start the migration: {e}")));
    }
    match wait {
        Wait::No => Ok(()),
        Wait::Sync(timeout) => match c.jobs.wait(id, timeout) {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(Reply::err(format!("Failed to migrate slot {slot}: {e}"))),
            None => Err(Reply::err(format!(
                "Timed out waiting for the migration of slot {slot}; it goes on (CLUSTER INFO shows its state)"
            ))),
        },
    }
}

fn text(r: Reply) -> String {
    match r {
        Reply::Error(e) => e,
        other => format!("{other:?}"),
    }
}

/// The job: `Ok` once the slot counts as migrated here.
fn run(sh: &Shared, slot: u16, dst: &str, host: &str, port: u16, myid: &str) -> Result<(), String> {
    let c = sh.cluster.as_ref().ok_or("cluster mode is off")?;
    // The destination shares this node's password, as Kvrocks assumes.
    let pass = sh.settings.requirepass();
    let prelude: Vec<Vec<&[u8]>> = pass
        .iter()
        .map(|p| vec![&b"AUTH"[..], p.as_bytes()])
        .collect();
    let mut target = Target::new(host, port, TIMEOUT, &prelude);
    let slot_text = slot.to_string();
    let import = |t: &mut Target, state: &[u8]| {
        t.call(&[b"CLUSTER", b"IMPORT", slot_text.as_bytes(), state])
            .map(|_| ())
            .map_err(text)
    };
    import(&mut target, b"0")?;
    let mut sent = false;
    let r = (|| {
        c.update(|s| {
            let owner = s.topology.as_ref().and_then(|t| t.owner(slot));
            if owner.is_none_or(|n| n.id != myid) {
                return Err(format!("slot {slot} is no longer this node's").into());
            }
            s.migrating.insert(slot, dst.to_string());
            Ok(())
        })
        .map_err(|e: UpdateError| e.0)?;
        // Commands admitted before the mark (they saw no move) end before keys leave.
        drop(sh.store.exec_lock());
        while walk(sh, c, slot, dst, &mut target, &mut sent)? {}
        // None left. Under the lock of the slot's commands: the destination serves the
        // slot, then this node sends its clients there.
        let _moving = c.migration();
        still_migrating(&c.read(), slot, dst)?;
        import(&mut target, b"1")?;
        c.update(|s| {
            still_migrating(s, slot, dst)?;
            s.migrating.remove(&slot);
            s.migrated.insert(slot, dst.to_string());
            Ok(())
        })
        .map_err(|e: UpdateError| e.0)?;
        super::route::redirect_blocked(sh);
        Ok(())
    })();
    if r.is_err() && !sent {
        // Nothing left this node: the slot is as it was, on both.
        let _ = c.update(|s| -> Result<(), UpdateError> {
            if s.migrating.get(&slot).is_some_and(|d| d == dst) {
                s.migrating.remove(&slot);
            }
            Ok(())
        });
        let _ = import(&mut target, b"2");
    }
    r
}

/// A state change's failure, as the job's error text.
struct UpdateError(String);

impl From<anyhow::Error> for UpdateError {
    fn from(e: anyhow::Error) -> Self {
        UpdateError(format!("{e:#}"))
    }
}

impl From<String> for UpdateError {
    fn from(e: String) -> Self {
        UpdateError(e)
    }
}

/// The job goes on only while the slot is still marked MIGRATING towards `dst` (a new
/// topology, `CLUSTER SETSLOT ... STABLE` or `NODE` end it).
fn still_migrating(s: &crate::cluster::state::State, slot: u16, dst: &str) -> Result<(), String> {
    if s.migrating.get(&slot).is_some_and(|d| d == dst) {
        Ok(())
    } else {
        Err(format!(
            "slot {slot} is no longer migrating to {dst} (the topology or SETSLOT changed it)"
        ))
    }
}

/// One walk over this node's keys, moving the slot's: whether it found any.
fn walk(
    sh: &Shared,
    c: &Cluster,
    slot: u16,
    dst: &str,
    target: &mut Target,
    sent: &mut bool,
) -> Result<bool, String> {
    let mut found = false;
    let mut after: Option<Vec<u8>> = None;
    loop {
        if sh.is_shutting_down() {
            return Err("the server is shutting down".into());
        }
        let (page, next) = sh
            .store
            .scan(0, after.as_deref(), WALK_STEP)
            .map_err(|e| format!("reading the keys: {e:#}"))?;
        let mut batch: Vec<Bytes> = Vec::new();
        let mut bytes = 0;
        let mut keys = page
            .into_iter()
            .map(|(k, _)| k)
            .filter(|k| key_slot(k) == slot)
            .peekable();
        while let Some(k) = keys.next() {
            found = true;
            bytes += k.len();
            batch.push(Bytes::from(k));
            if batch.len() == BATCH_KEYS || bytes >= BATCH_KEY_BYTES || keys.peek().is_none() {
                // MIGRATE's locks, in its order.
                let moving = c.migration();
                let _cmd = sh.store.command_lock();
                still_migrating(&c.read(), slot, dst)?;
                *sent = true;
                move_keys(sh, 0, target, &batch, false, true, Some(moving)).map_err(text)?;
                batch.clear();
                bytes = 0;
            }
        }
        match next {
            Some(k) => after = Some(k),
            None => return Ok(found),
        }
    }
}
