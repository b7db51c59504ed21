//! How a GC job moves the valid values of the value files it collects: what
//! [`super::policy::GcPolicy`] picks, a [`GcJob`] collects.
//!
//! Two mechanisms exist. The write-back job ([`WriteBack`], Titan's and BlobDB's GC) copies
//! each valid value into a new file and writes the new pointer back through the write path,
//! so that the tree points at the copy and the old file can go. The index-map job
//! ([`IndexMapJob`], TerarkDB and the lifetime policies) writes no pointer: an index map
//! from old to new positions, installed with the copies, redirects the reads; where each
//! copy goes is the placement's choice ([`crate::gc::placement::Placement`]).
//!
//! A job knows the engine only through [`GcHost`]: whether a record is live, a new file, a
//! version edit, the write-back, and a barrier that makes durable what deleting the inputs
//! relies on. The engine's host is in `db/gc.rs`; the tests run each job against a
//! host whose tree is a map (`test_host.rs`), and print what it saw after each step.

mod host;
mod index_map_job;
#[cfg(test)]
pub(crate) mod test_host;
mod write_back;

pub(crate) use host::{GcHost, GcJob, Install, Liveness, Record, Writeback};
pub(crate) use index_map_job::IndexMapJob;
pub(crate) use write_back::WriteBack;
