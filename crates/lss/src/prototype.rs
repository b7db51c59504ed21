//! A file-backed prototype of the store (paper 004 sec. 4.4): the same placement
//! policies and the same [`Store`] bookkeeping, driving real writes to an array of files.
//!
//! - One file per device; RAID-5 with the parity chunk rotating over devices by stripe.
//! - Chunks are written asynchronously: each device has a queue served by `io_depth`
//!   writer threads (`pwrite`), so up to `io_depth` chunk writes are in flight per device.
//! - Parity is the real XOR of a stripe's data chunks, written when the stripe's last
//!   data chunk is; [`ProtoResult::stripes_checked`] counts the stripes re-read and
//!   verified after the run.
//! - Clients are closed-loop threads issuing 4 KiB updates (Zipf); the SLA window runs on
//!   the wall clock. Placement and GC bookkeeping happen under one store lock; building
//!   chunk buffers and parity runs under a second lock taken before the first is
//!   released (so chunks are submitted in the order the store wrote them), and the
//!   writes themselves run on the device writer threads. GC victims are chosen and their
//!   valid blocks relocated by the store (relocations are ordinary chunk writes); the
//!   victims' data is read back from the devices by `gc_threads` GC threads.
//!
//! Writes go through the page cache (no O_DIRECT), so absolute throughput reflects the
//! machine's memory and file system more than an SSD array; ratios between policies
//! reflect the bytes each one makes the array write.

use crate::config::Config;
use crate::error::{LssError, Result};
use crate::placement;
use crate::store::{Flushed, Store};
use crate::synth::SynthConfig;
use crate::trace::BLOCK_BYTES;
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Zipf};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::time::Instant;

pub struct Options {
    pub dir: PathBuf,
    pub clients: usize,
    pub io_depth: usize,
    pub gc_threads: usize,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct ProtoResult {
    pub policy: String,
    pub clients: usize,
    pub user_mib_per_s: f64,
    pub device_mib_per_s: f64,
    pub elapsed_s: f64,
    pub wa: f64,
    pub padding_ratio: f64,
    pub stripes_checked: u64,
    pub metadata_bytes: usize,
}

type Job = (u64, Vec<u8>);

/// The array of device files with their writer queues.
struct Array {
    files: Vec<Arc<File>>,
    /// Per device, one queue per writer thread; a stripe always goes to the same
    /// writer, so two writes to one offset land in submission order.
    queues: Vec<Vec<SyncSender<Job>>>,
    workers: Vec<std::thread::JoinHandle<std::io::Result<()>>>,
    chunk_bytes: usize,
    data_devices: u32,
    stripes_per_segment: u32,
}

impl Array {
    fn open(dir: &std::path::Path, cfg: &Config, io_depth: usize) -> Result<Array> {
        let io = |source| LssError::Io {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let devices = cfg.data_devices + 1;
        let mut files = Vec::new();
        let mut queues = Vec::new();
        let mut workers = Vec::new();
        for d in 0..devices {
            let path = dir.join(format!("dev{d}.img"));
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .map_err(|source| LssError::Io { path, source })?;
            let f = Arc::new(f);
            let mut txs = Vec::new();
            for _ in 0..io_depth.max(1) {
                let (tx, rx) = sync_channel::<Job>(1);
                let f = f.clone();
                workers.push(std::thread::spawn(move || {
                    while let Ok((off, buf)) = rx.recv() {
                        f.write_all_at(&buf, off)?;
                    }
                    Ok(())
                }));
                txs.push(tx);
            }
            files.push(f);
            queues.push(txs);
        }
        Ok(Array {
            files,
            queues,
            workers,
            chunk_bytes: (cfg.chunk_blocks as u64 * BLOCK_BYTES) as usize,
            data_devices: cfg.data_devices,
            stripes_per_segment: cfg.stripes_per_segment,
        })
    }

    fn devices(&self) -> u32 {
        self.data_devices + 1
    }

    /// Global stripe of a chunk and its column among the data chunks.
    fn place(&self, segment: u32, chunk: u32) -> (u64, u32) {
        let stripe =
            segment as u64 * self.stripes_per_segment as u64 + (chunk / self.data_devices) as u64;
        (stripe, chunk % self.data_devices)
    }

    fn parity_device(&self, stripe: u64) -> u32 {
        (stripe % self.devices() as u64) as u32
    }

    fn data_device(&self, stripe: u64, col: u32) -> u32 {
        (self.parity_device(stripe) + 1 + col) % self.devices()
    }

    fn submit(&self, device: u32, stripe: u64, buf: Vec<u8>) -> Result<()> {
        let q = &self.queues[device as usize];
        q[(stripe % q.len() as u64) as usize]
            .send((stripe * self.chunk_bytes as u64, buf))
            .map_err(|_| LssError::Config("device writer stopped".into()))
    }

    fn read(&self, device: u32, stripe: u64) -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0u8; self.chunk_bytes];
        let f = &self.files[device as usize];
        let off = stripe * self.chunk_bytes as u64;
        // A stripe never written reads as zeros (sparse file).
        let len = f.metadata()?.len();
        if off < len {
            let n = ((len - off) as usize).min(buf.len());
            f.read_exact_at(&mut buf[..n], off)?;
        }
        Ok(buf)
    }

    /// Stops the writers after draining their queues.
    fn close(&mut self) -> Result<()> {
        self.queues.clear();
        for w in self.workers.drain(..) {
            w.join()
                .map_err(|_| LssError::Config("device writer panicked".into()))?
                .map_err(|source| LssError::Io {
                    path: PathBuf::from("device file"),
                    source,
                })?;
        }
        Ok(())
    }
}

/// Parity accumulators of open stripes, and stripes whose parity is on disk.
#[derive(Default)]
struct Parity {
    open: HashMap<u64, (Vec<u8>, u32)>,
    complete: HashMap<u64, bool>,
}

fn fill_block(buf: &mut [u8], lba: u32) {
    // Recognisable content: the block id repeated.
    for w in buf.chunks_exact_mut(4) {
        w.copy_from_slice(&lba.to_le_bytes());
    }
}

/// Turns written chunks into device writes and parity.
fn write_chunks(array: &Array, parity: &Mutex<Parity>, flushed: Vec<Flushed>) -> Result<()> {
    let bb = BLOCK_BYTES as usize;
    for f in flushed {
        let mut buf = vec![0u8; array.chunk_bytes];
        for (i, &slot) in f.slots.iter().enumerate() {
            match slot {
                Flushed::PAD => {}
                Flushed::SHADOW => buf[i * bb..(i + 1) * bb].fill(0x5a),
                lba => fill_block(&mut buf[i * bb..(i + 1) * bb], lba),
            }
        }
        let (stripe, col) = array.place(f.segment, f.chunk);
        let parity_done = {
            let mut p = parity.lock();
            p.complete.insert(stripe, false);
            let e = p
                .open
                .entry(stripe)
                .or_insert_with(|| (vec![0u8; array.chunk_bytes], 0));
            e.0.iter_mut().zip(&buf).for_each(|(a, b)| *a ^= b);
            e.1 += 1;
            if e.1 == array.data_devices {
                let (x, _) = p.open.remove(&stripe).unwrap();
                p.complete.insert(stripe, true);
                Some(x)
            } else {
                None
            }
        };
        array.submit(array.data_device(stripe, col), stripe, buf)?;
        if let Some(x) = parity_done {
            array.submit(array.parity_device(stripe), stripe, x)?;
        }
    }
    Ok(())
}

/// GC reads: the data chunks of each reclaimed segment are read back from the devices.
fn read_victims(array: &Array, victims: &[u32]) -> Result<()> {
    for &v in victims {
        for c in 0..array.stripes_per_segment * array.data_devices {
            let (stripe, col) = array.place(v, c);
            array
                .read(array.data_device(stripe, col), stripe)
                .map_err(|source| LssError::Io {
                    path: PathBuf::from("device file"),
                    source,
                })?;
        }
    }
    Ok(())
}

struct Shared {
    store: Store,
    policy: Box<dyn placement::Placement>,
}

/// Runs one policy with `clients` closed-loop clients: fills the working set, then
/// issues the updates, all through the real data path.
pub fn run(cfg: &Config, sc: &SynthConfig, policy: &str, opts: &Options) -> Result<ProtoResult> {
    cfg.validate()?;
    if !cfg.chunk_model {
        return Err(LssError::Config(
            "the prototype needs the chunk model".into(),
        ));
    }
    let env = Store::env(cfg, sc.blocks);
    let p = placement::build(policy, &env)?;
    let mut store = Store::new(cfg, sc.blocks, p.groups());
    store.set_recording(true);
    let shared = Mutex::new(Shared { store, policy: p });
    let mut array = Array::open(&opts.dir, cfg, opts.io_depth)?;
    let parity = Mutex::new(Parity::default());
    let submit = Mutex::new(());
    let start = Instant::now();
    let now_us = || start.elapsed().as_micros() as u64;

    // Fill, from one thread.
    for lba in 0..sc.blocks {
        let (flushed, victims) = {
            let mut s = shared.lock();
            let Shared { store, policy } = &mut *s;
            store.write(policy.as_mut(), lba, now_us(), u64::MAX);
            store.take_events()
        };
        write_chunks(&array, &parity, flushed)?;
        read_victims(&array, &victims)?;
    }
    let before = shared.lock().store.total_counters();
    let t0 = Instant::now();
    let per_client = sc.updates / opts.clients.max(1) as u64;
    let zipf =
        Zipf::new(sc.blocks as f64, sc.alpha).map_err(|e| LssError::Config(e.to_string()))?;
    let n = sc.blocks as u64;
    let mult = {
        let mut m = 0x9E37_79B9_7F4A_7C15u64 % n.max(2);
        while n > 1 && (m < 2 || gcd(m, n) != 1) {
            m += 1;
        }
        m.max(1)
    };
    // GC threads: the victims' data is read back from the devices off the clients'
    // path; the bounded queue makes clients wait when GC falls behind.
    let (victim_tx, victim_rx) = sync_channel::<u32>(64);
    let victim_rx = std::sync::Mutex::new(victim_rx);
    std::thread::scope(|s| -> Result<()> {
        let mut gcs = Vec::new();
        for _ in 0..opts.gc_threads.max(1) {
            let (array, rx) = (&array, &victim_rx);
            gcs.push(s.spawn(move || -> Result<()> {
                loop {
                    let v = rx.lock().unwrap().recv();
                    let Ok(v) = v else { return Ok(()) };
                    read_victims(array, &[v])?;
                }
            }));
        }
        let mut hs = Vec::new();
        for c in 0..opts.clients.max(1) {
            let (shared, array, parity, zipf, submit) = (&shared, &array, &parity, &zipf, &submit);
            let victim_tx = victim_tx.clone();
            hs.push(s.spawn(move || -> Result<()> {
                let mut rng = SmallRng::seed_from_u64(sc.seed + 1 + c as u64);
                for _ in 0..per_client {
                    let rank = zipf.sample(&mut rng) as u64 - 1;
                    let lba = ((rank.min(n - 1) * mult) % n) as u32;
                    let mut s = shared.lock();
                    let Shared { store, policy } = &mut *s;
                    store.write(policy.as_mut(), lba, now_us(), u64::MAX);
                    let (flushed, victims) = store.take_events();
                    // Take the submission lock before releasing the store: chunks reach
                    // the parity accumulators and the queues in the order the store
                    // wrote them, while the next client already works on the store.
                    let order = submit.lock();
                    drop(s);
                    write_chunks(array, parity, flushed)?;
                    drop(order);
                    for v in victims {
                        victim_tx
                            .send(v)
                            .map_err(|_| LssError::Config("GC threads stopped".into()))?;
                    }
                }
                Ok(())
            }));
        }
        drop(victim_tx);
        for h in hs.into_iter().chain(gcs) {
            h.join()
                .map_err(|_| LssError::Config("client or GC thread panicked".into()))??;
        }
        Ok(())
    })?;
    // Flush the open chunks, drain the queues.
    let (flushed, _) = {
        let mut s = shared.lock();
        let Shared { store, policy } = &mut *s;
        store.finish(policy.as_mut());
        store.take_events()
    };
    write_chunks(&array, &parity, flushed)?;
    array.close()?;
    let elapsed = t0.elapsed().as_secs_f64();
    let s = shared.into_inner();
    let after = s.store.total_counters();
    let user = (after.user - before.user) * BLOCK_BYTES;
    let device = (after.chunks - before.chunks) * s.store.chunk_blocks() as u64 * BLOCK_BYTES
        + (after.parity_chunks - before.parity_chunks)
            * s.store.chunk_blocks() as u64
            * BLOCK_BYTES;
    let c = after;
    let stripes_checked = verify_parity(&array, &parity.into_inner())?;
    Ok(ProtoResult {
        policy: policy.to_string(),
        clients: opts.clients,
        user_mib_per_s: user as f64 / elapsed / (1 << 20) as f64,
        device_mib_per_s: device as f64 / elapsed / (1 << 20) as f64,
        elapsed_s: elapsed,
        wa: c.wa(),
        padding_ratio: c.padding_ratio(),
        stripes_checked,
        metadata_bytes: s.policy.metadata_bytes(),
    })
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Re-reads every complete stripe and checks parity = XOR of data chunks.
fn verify_parity(array: &Array, parity: &Parity) -> Result<u64> {
    let io = |source| LssError::Io {
        path: PathBuf::from("device file"),
        source,
    };
    let mut checked = 0;
    for (&stripe, &complete) in &parity.complete {
        if !complete {
            continue;
        }
        let mut x = array
            .read(array.parity_device(stripe), stripe)
            .map_err(io)?;
        for col in 0..array.data_devices {
            let d = array
                .read(array.data_device(stripe, col), stripe)
                .map_err(io)?;
            x.iter_mut().zip(&d).for_each(|(a, b)| *a ^= b);
        }
        if x.iter().any(|&b| b != 0) {
            return Err(LssError::Config(format!(
                "parity mismatch in stripe {stripe}"
            )));
        }
        checked += 1;
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parity_of_every_full_stripe_is_the_xor_of_its_data() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = Config {
            chunk_blocks: 4,
            data_devices: 3,
            stripes_per_segment: 4,
            ..Config::default()
        };
        let sc = SynthConfig {
            blocks: 2000,
            updates: 6000,
            alpha: 0.9,
            ..SynthConfig::default()
        };
        // DAC rewrites a lot, so segments (and stripes) are reused while earlier writes
        // may still be queued: the case where submission order matters.
        for policy in ["sepgc", "dac", "adapt"] {
            let opts = Options {
                dir: dir.path().join(policy),
                clients: 4,
                io_depth: 4,
                gc_threads: 2,
            };
            let r = run(&cfg, &sc, policy, &opts).unwrap();
            assert!(r.stripes_checked > 100, "{policy}: {}", r.stripes_checked);
            assert!(r.wa >= 1.0);
        }
    }
}
