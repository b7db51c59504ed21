//! Snapshots: a sequence number registered with the database so that compaction keeps the
//! versions it can see, plus a pin on the value files live when it was taken (a GC that
//! writes back pointers would otherwise release files the snapshot's older pointers need);
//! value files that appear later and are collected while it lives are kept for it by
//! [`super::inner::State::kept_for_snapshots`].

use super::inner::Inner;
use crate::internal_key::SeqNo;
use crate::vlog::BlobFile;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

pub struct Snapshot {
    seq: SeqNo,
    blobs: Arc<BTreeMap<u64, Arc<BlobFile>>>,
    inner: Weak<Inner>,
}

impl Snapshot {
    pub(crate) fn new(inner: &Arc<Inner>) -> Snapshot {
        let mut st = inner.state.lock();
        let seq = inner.visible_seq.load(Ordering::Acquire);
        *st.snapshots.entry(seq).or_insert(0) += 1;
        Snapshot {
            seq,
            blobs: st.versions.current().blobs.clone(),
            inner: Arc::downgrade(inner),
        }
    }

    pub fn seq(&self) -> SeqNo {
        self.seq
    }

    pub(crate) fn blobs(&self) -> &BTreeMap<u64, Arc<BlobFile>> {
        &self.blobs
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            let released = {
                let mut st = inner.state.lock();
                if let Some(n) = st.snapshots.get_mut(&self.seq) {
                    *n -= 1;
                    if *n == 0 {
                        st.snapshots.remove(&self.seq);
                    }
                }
                inner.release_kept(&mut st)
            };
            // Deleted here, outside the state lock, if nothing else holds them.
            drop(released);
        }
    }
}
