//! Lookups issued many at a time.
//!
//! The job that finds a flush's garbage (the previous write of each flushed key,
//! `vlog/superseded.rs`), a flush that places values (the same lookups) and GC (whether
//! each record is still the key's newest value) look keys up in a tree that, in a
//! database larger than memory, is mostly not cached: each lookup waits on a device read.
//! One after another they kept the device at queue depth 1 and held a flush or GC job
//! long enough to slow writers (docs/lifetime.md, "Lookups at queue depth 8"). Running
//! them from a few threads keeps several reads in flight, as RocksDB's MultiGet does with
//! its parallel reads.

use crate::error::Result;
use rayon::prelude::*;
use std::sync::OnceLock;

/// Reads in flight at once, per pool.
pub const LOOKUP_THREADS: usize = 8;

/// Which threads a batch runs on. GC has its own: its jobs hold writers back (under the
/// space-amplification target's back-pressure), and on one shared pool its batches queued
/// behind the superseded finder's: 6-10 s of a 15 s job at full scale (docs/lifetime.md,
/// "Garbage known by position").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pool {
    /// Flush's and the superseded finder's lookups.
    Lookup,
    /// GC's lookups.
    Gc,
}

/// The threads of `which`, started once per process and shared by every database. A
/// scoped thread per batch cost a thread start and an allocator heap per 256 lookups
/// (about 3 % of the CPU of a full-scale run in `perf`); a pool keeps them.
fn pool(which: Pool) -> &'static rayon::ThreadPool {
    static LOOKUP: OnceLock<rayon::ThreadPool> = OnceLock::new();
    static GC: OnceLock<rayon::ThreadPool> = OnceLock::new();
    let (cell, name) = match which {
        Pool::Lookup => (&LOOKUP, "lookup"),
        Pool::Gc => (&GC, "gc-read"),
    };
    cell.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(LOOKUP_THREADS)
            .thread_name(move |i| format!("halflife-{name}-{i}"))
            .build()
            .expect("start the lookup threads")
    })
}

/// `f` applied to every item, on up to [`LOOKUP_THREADS`] threads of `which`, results in
/// the items' order; the first error (in item order) is returned.
pub fn map_in_parallel<T: Sync, R: Send>(
    which: Pool,
    items: &[T],
    f: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    if items.len() <= 1 {
        return items.iter().map(&f).collect();
    }
    let out: Vec<Result<R>> = pool(which).install(|| items.par_iter().map(&f).collect());
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn results_keep_the_items_order_and_the_first_error_wins() {
        let items: Vec<u32> = (0..1000).collect();
        let out = map_in_parallel(Pool::Lookup, &items, |&i| Ok(i * 2)).unwrap();
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        let e = map_in_parallel(Pool::Lookup, &items, |&i| {
            if i % 300 == 299 {
                Err(Error::corruption(
                    std::path::Path::new("f"),
                    format!("at {i}"),
                ))
            } else {
                Ok(i)
            }
        })
        .unwrap_err();
        assert!(e.to_string().contains("at 299"), "{e}");
        assert!(map_in_parallel(Pool::Gc, &[] as &[u32], |&i| Ok(i))
            .unwrap()
            .is_empty());
    }
}
