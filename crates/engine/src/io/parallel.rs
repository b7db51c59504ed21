//! Lookups issued many at a time.
//!
//! Flush (the previous write of each key) and GC (whether each record is still the key's
//! newest value) look keys up in a tree that, in a database larger than memory, is mostly
//! not cached: each lookup waits on a device read. One after another they kept the device
//! at queue depth 1 and held a flush or GC job long enough to slow writers (docs/lifetime.md,
//! "Lookups at queue depth 8"). Running them from a few threads keeps several reads in
//! flight, as RocksDB's MultiGet does with its parallel reads.

use crate::error::Result;

/// Lookups in flight at once.
pub const LOOKUP_THREADS: usize = 8;

/// `f` applied to every item, from up to [`LOOKUP_THREADS`] scoped threads, results in the
/// items' order; the first error (in item order) is returned.
pub fn map_in_parallel<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    if items.len() <= 1 {
        return items.iter().map(&f).collect();
    }
    let chunk = items.len().div_ceil(LOOKUP_THREADS);
    let f = &f;
    let parts: Vec<Result<Vec<R>>> = std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| s.spawn(move || part.iter().map(f).collect::<Result<Vec<R>>>()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a lookup thread panicked"))
            .collect()
    });
    let mut out = Vec::with_capacity(items.len());
    for p in parts {
        out.extend(p?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn results_keep_the_items_order_and_the_first_error_wins() {
        let items: Vec<u32> = (0..1000).collect();
        let out = map_in_parallel(&items, |&i| Ok(i * 2)).unwrap();
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        let e = map_in_parallel(&items, |&i| {
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
        assert!(map_in_parallel(&[] as &[u32], |&i| Ok(i))
            .unwrap()
            .is_empty());
    }
}
