//! A primary's replication histories: which replication ids name a past of its current
//! data, and up to which engine sequence number, so that a replica of it can continue
//! from the primary's WAL after the primary restarted (or after it fell out of the
//! backlog) instead of copying the database again.
//!
//! Every start of a primary begins a new history (a new replication id), because a
//! restart may have lost writes: a power cut keeps only a prefix of the WAL, so the
//! writes a replica received may be more than the primary recovered. What the primary
//! recovered at open, `R` (its last sequence number before any new write), is the last
//! write the old history shares with the new one. The old id is kept with `R`, and every
//! older one with the smaller of its bound and `R`, since each restart may cut again: a
//! replica that holds the writes of history `h` up to sequence number `p` holds a prefix
//! of the current data exactly when `p` is at most `h`'s bound.
//!
//! Keeping the old id (rather than the suggested single id persisted across restarts) is
//! what makes this safe over two restarts: a replica ahead of a first restart's `R`
//! (it holds writes the primary lost) would otherwise meet, after a second restart that
//! recovered more writes than it holds, a sequence number that the primary reached again
//! with other writes, and continue with data that is not the primary's.
//!
//! The histories live in the database ([`crate::record::HISTORY_KEY`]), written at open
//! (synced, before the server serves) and at a promotion; a replica has none (a copy
//! received in a full sync has its primary's record removed), since its sequence numbers
//! are not its primary's.

use engine::{WriteOptions, DB};

/// Earlier histories kept: a replica that missed more restarts than this copies anew.
pub const MAX_PREVIOUS: usize = 16;
/// First byte of the record: not a legacy string record (those start with 0 or 1).
const TAG: u8 = 0xfe;
const ID_LEN: usize = 40;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    /// The replication id of the history being written now.
    pub current: String,
    /// Earlier ids, newest first, each with the last sequence number the current data
    /// shares with it.
    pub previous: Vec<(String, u64)>,
}

impl History {
    /// A history with no past (a new database, or a replica promoted: its sequence
    /// numbers are its own, not those of the primary it followed).
    pub fn fresh() -> History {
        History {
            current: new_replid(),
            previous: Vec::new(),
        }
    }

    /// The history of a primary that opened its database and recovered up to sequence
    /// number `recovered`, after `stored` (what the last run left).
    pub fn reopened(stored: Option<History>, recovered: u64) -> History {
        let Some(old) = stored else {
            return History::fresh();
        };
        let mut previous = vec![(old.current, recovered)];
        previous.extend(
            old.previous
                .into_iter()
                .map(|(id, until)| (id, until.min(recovered))),
        );
        previous.truncate(MAX_PREVIOUS);
        History {
            current: new_replid(),
            previous,
        }
    }

    /// The last sequence number the current data shares with history `replid` (`u64::MAX`
    /// for the current one), or `None` for an id this primary does not know.
    pub fn shared_until(&self, replid: &str) -> Option<u64> {
        if replid == self.current {
            return Some(u64::MAX);
        }
        self.previous
            .iter()
            .find(|(id, _)| id == replid)
            .map(|&(_, until)| until)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![TAG, self.previous.len() as u8];
        v.extend_from_slice(self.current.as_bytes());
        for (id, until) in &self.previous {
            v.extend_from_slice(id.as_bytes());
            v.extend_from_slice(&until.to_be_bytes());
        }
        v
    }

    /// `None` for a record that is not one (then the primary starts with no past, which
    /// costs its replicas a full sync, never a wrong continuation).
    pub fn decode(v: &[u8]) -> Option<History> {
        let [TAG, n, rest @ ..] = v else {
            return None;
        };
        let n = *n as usize;
        if n > MAX_PREVIOUS || rest.len() != ID_LEN + n * (ID_LEN + 8) {
            return None;
        }
        let id = |b: &[u8]| {
            let s = std::str::from_utf8(b).ok()?;
            super::wire::check_replid(s).ok().map(|()| s.to_string())
        };
        let (cur, mut rest) = rest.split_at(ID_LEN);
        let mut previous = Vec::with_capacity(n);
        for _ in 0..n {
            let (e, r) = rest.split_at(ID_LEN + 8);
            let until = u64::from_be_bytes(e[ID_LEN..].try_into().ok()?);
            previous.push((id(&e[..ID_LEN])?, until));
            rest = r;
        }
        Some(History {
            current: id(cur)?,
            previous,
        })
    }

    pub fn load(db: &DB) -> engine::Result<Option<History>> {
        Ok(db
            .get(crate::record::HISTORY_KEY)?
            .and_then(|v| History::decode(&v)))
    }

    /// Writes the record, synced: a replica may be told the new id only once a restart
    /// would find it.
    pub fn save(&self, db: &DB) -> engine::Result<()> {
        db.put_opt(
            crate::record::HISTORY_KEY,
            &self.encode(),
            &WriteOptions { sync: true },
        )
    }

    /// Deletes the record (a primary becoming a replica).
    pub fn remove(db: &DB) -> engine::Result<()> {
        if db.get(crate::record::HISTORY_KEY)?.is_some() {
            db.delete_opt(crate::record::HISTORY_KEY, &WriteOptions { sync: true })?;
        }
        Ok(())
    }
}

/// A new random replication id: 40 hex digits, as Redis's.
pub fn new_replid() -> String {
    format!(
        "{:032x}{:08x}",
        rand::random::<u128>(),
        rand::random::<u32>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_restart_bounds_every_earlier_history() {
        let h0 = History::fresh();
        assert_eq!(h0.shared_until(&h0.current), Some(u64::MAX));
        // A power cut: recovered up to 100 (a replica of h0 may hold up to 120).
        let h1 = History::reopened(Some(h0.clone()), 100);
        assert_ne!(h1.current, h0.current);
        assert_eq!(h1.shared_until(&h0.current), Some(100));
        // The next run wrote past 120 and stopped cleanly at 200: h0 still shares only
        // up to 100, whatever sequence numbers were reached again.
        let h2 = History::reopened(Some(h1.clone()), 200);
        assert_eq!(h2.shared_until(&h0.current), Some(100));
        assert_eq!(h2.shared_until(&h1.current), Some(200));
        // A cut below an earlier bound lowers it.
        let h3 = History::reopened(Some(h2.clone()), 50);
        assert_eq!(h3.shared_until(&h0.current), Some(50));
        assert_eq!(h3.shared_until(&h2.current), Some(50));
        assert_eq!(h3.shared_until(&"0".repeat(40)), None);
        assert_eq!(History::decode(&h3.encode()), Some(h3.clone()));
        let mut h = h3;
        for r in 0..40 {
            h = History::reopened(Some(h), 1000 + r);
        }
        assert_eq!(h.previous.len(), MAX_PREVIOUS);
        assert_eq!(History::decode(&h.encode()), Some(h));
    }

    #[test]
    fn a_damaged_record_is_no_history() {
        let h = History::reopened(Some(History::fresh()), 7);
        let v = h.encode();
        for cut in 0..v.len() {
            assert_eq!(History::decode(&v[..cut]), None);
        }
        let mut bad = v.clone();
        bad[1] = 200;
        assert_eq!(History::decode(&bad), None);
        let mut bad = v;
        bad[2] = b'z';
        assert_eq!(History::decode(&bad), None);
    }
}
