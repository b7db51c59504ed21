//! A load generator for streams that `redis-benchmark` cannot make: consumers of a group
//! that read (`XREADGROUP ... >`) and acknowledge (`XACK`) each entry, and a producer at a
//! fixed rate, against any server speaking RESP2 (`halflife serve` or `redis-server`).
//!
//! Why a program of its own: `redis-benchmark` repeats one command with random arguments,
//! so it cannot acknowledge the IDs a read returned; a Python client spends more CPU per
//! request than either server on a 2-core machine, and would measure itself.
//!
//! ```text
//! stream-load consume --port P [--key s] [--group g] [--consumers 10] [--pipeline 1] [--entries N]
//! stream-load produce --port P [--key s] [--size 4096] [--rate 10000] [--seconds 60] [--maxlen N]
//! stream-load steady  --port P [--key s] [--group g] [--size 4096] [--rate 10000] [--bytes B] [--consumers 10] [--pipeline 16]
//! ```
//!
//! `consume`: each consumer (a connection of its own) sends `--pipeline` reads of one
//! entry (`COUNT 1`), then one `XACK` per entry read, and repeats until the group has no
//! new entry or `--entries` entries were acknowledged in all; prints the entries
//! acknowledged per second. `produce`: `XADD`s of one field of `--size` bytes at `--rate`
//! a second. `steady`: a producer at `--rate` and the consumers at once (reads `BLOCK`
//! for 100 ms when they are ahead) until `--bytes` of field values were appended; prints
//! one line of JSON a second (appended and acknowledged entries so far) on stdout.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A RESP2 reply.
#[derive(Debug)]
enum Reply {
    Simple,
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

struct Conn {
    r: BufReader<TcpStream>,
    w: BufWriter<TcpStream>,
}

impl Conn {
    fn open(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        Conn {
            r: BufReader::with_capacity(1 << 16, s.try_clone().expect("clone")),
            w: BufWriter::with_capacity(1 << 16, s),
        }
    }

    fn send(&mut self, args: &[&[u8]]) {
        write!(self.w, "*{}\r\n", args.len()).unwrap();
        for a in args {
            write!(self.w, "${}\r\n", a.len()).unwrap();
            self.w.write_all(a).unwrap();
            self.w.write_all(b"\r\n").unwrap();
        }
    }

    fn flush(&mut self) {
        self.w.flush().expect("write to the server");
    }

    fn line(&mut self) -> Vec<u8> {
        let mut l = Vec::new();
        self.r.read_until(b'\n', &mut l).expect("read");
        assert!(l.ends_with(b"\r\n"), "connection closed");
        l.truncate(l.len() - 2);
        l
    }

    fn read(&mut self) -> Reply {
        let l = self.line();
        let rest = || String::from_utf8_lossy(&l[1..]).into_owned();
        let n = || rest().parse::<i64>().expect("a length");
        match l[0] {
            b'+' => Reply::Simple,
            b'-' => Reply::Error(rest()),
            b':' => Reply::Int(n()),
            b'$' if n() < 0 => Reply::Bulk(None),
            b'$' => {
                let mut v = vec![0; n() as usize + 2];
                self.r.read_exact(&mut v).expect("read");
                v.truncate(v.len() - 2);
                Reply::Bulk(Some(v))
            }
            b'*' if n() < 0 => Reply::Array(None),
            b'*' => Reply::Array(Some((0..n()).map(|_| self.read()).collect())),
            other => panic!("not RESP2: {:?}", other as char),
        }
    }

    fn call(&mut self, args: &[&[u8]]) -> Reply {
        self.send(args);
        self.flush();
        self.read()
    }
}

/// The IDs in an `XREADGROUP` reply (nil: none).
fn ids(r: Reply) -> Vec<Vec<u8>> {
    let Reply::Array(Some(streams)) = r else {
        if let Reply::Error(e) = r {
            panic!("XREADGROUP: {e}");
        }
        return Vec::new();
    };
    let mut out = Vec::new();
    for s in streams {
        let Reply::Array(Some(mut kv)) = s else {
            continue;
        };
        if let Some(Reply::Array(Some(entries))) = kv.pop() {
            for e in entries {
                if let Reply::Array(Some(mut e)) = e {
                    if let Reply::Bulk(Some(id)) = e.swap_remove(0) {
                        out.push(id);
                    }
                }
            }
        }
    }
    out
}

struct Args {
    port: u16,
    key: String,
    group: String,
    consumers: usize,
    pipeline: usize,
    entries: u64,
    size: usize,
    rate: u64,
    seconds: u64,
    bytes: u64,
    maxlen: Option<u64>,
}

fn parse() -> (String, Args) {
    let mut it = std::env::args().skip(1);
    let mode = it.next().unwrap_or_default();
    let mut a = Args {
        port: 6379,
        key: "s".into(),
        group: "g".into(),
        consumers: 10,
        pipeline: 1,
        entries: u64::MAX,
        size: 4096,
        rate: 10_000,
        seconds: 60,
        bytes: u64::MAX,
        maxlen: None,
    };
    while let Some(flag) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        let n = || v.parse::<u64>().unwrap_or_else(|_| panic!("{flag}: {v}"));
        match flag.as_str() {
            "--port" => a.port = n() as u16,
            "--key" => a.key = v.clone(),
            "--group" => a.group = v.clone(),
            "--consumers" => a.consumers = n() as usize,
            "--pipeline" => a.pipeline = n().max(1) as usize,
            "--entries" => a.entries = n(),
            "--size" => a.size = n() as usize,
            "--rate" => a.rate = n().max(1),
            "--seconds" => a.seconds = n(),
            "--bytes" => a.bytes = n(),
            "--maxlen" => a.maxlen = Some(n()),
            _ => panic!("unknown flag {flag}"),
        }
    }
    (mode, a)
}

/// Reads and acknowledges entries as consumer `me` until `stop` says so, or (without
/// `block`) until the group has nothing new; counts them in `acked`.
fn consumer(a: &Args, me: usize, block: bool, acked: &AtomicU64, stop: &AtomicBool) {
    let mut c = Conn::open(a.port);
    let name = format!("c{me}");
    let (key, group) = (a.key.as_bytes(), a.group.as_bytes());
    while !stop.load(Ordering::Relaxed) && acked.load(Ordering::Relaxed) < a.entries {
        for _ in 0..a.pipeline {
            let mut cmd: Vec<&[u8]> = vec![b"XREADGROUP", b"GROUP", group, name.as_bytes()];
            cmd.extend([&b"COUNT"[..], b"1"]);
            if block {
                cmd.extend([&b"BLOCK"[..], b"100"]);
            }
            cmd.extend([&b"STREAMS"[..], key, b">"]);
            c.send(&cmd);
        }
        c.flush();
        let read: Vec<Vec<u8>> = (0..a.pipeline).flat_map(|_| ids(c.read())).collect();
        if read.is_empty() {
            if block {
                continue;
            }
            break;
        }
        for id in &read {
            c.send(&[b"XACK", key, group, id]);
        }
        c.flush();
        for _ in &read {
            match c.read() {
                Reply::Int(1) => {}
                other => panic!("XACK: {other:?}"),
            }
        }
        acked.fetch_add(read.len() as u64, Ordering::Relaxed);
    }
}

fn create_group(a: &Args) {
    let mut c = Conn::open(a.port);
    let r = c.call(&[
        b"XGROUP",
        b"CREATE",
        a.key.as_bytes(),
        a.group.as_bytes(),
        b"0",
        b"MKSTREAM",
    ]);
    match r {
        Reply::Simple => {}
        Reply::Error(e) if e.starts_with("BUSYGROUP") => {}
        other => panic!("XGROUP CREATE: {other:?}"),
    }
}

/// Appends at `a.rate` entries a second until `stop`, `a.seconds` or `a.bytes`; counts
/// them in `added`. Returns the server's first error (e.g. Redis's `OOM` at its
/// `maxmemory`), after which it stops appending.
fn producer(a: &Args, added: &AtomicU64, stop: &AtomicBool) -> Option<String> {
    let mut c = Conn::open(a.port);
    let value = vec![b'v'; a.size];
    let maxlen = a.maxlen.map(|n| n.to_string());
    let start = Instant::now();
    let end = start + Duration::from_secs(a.seconds);
    // Batches of a hundredth of a second's entries, pipelined.
    let per_tick = (a.rate / 100).max(1);
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        if sent * a.size as u64 >= a.bytes {
            break;
        }
        let due = (start.elapsed().as_secs_f64() * a.rate as f64) as u64;
        if sent >= due {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let n = (due - sent).min(per_tick * 4);
        for _ in 0..n {
            let mut cmd: Vec<&[u8]> = vec![b"XADD", a.key.as_bytes()];
            if let Some(m) = &maxlen {
                cmd.extend([&b"MAXLEN"[..], b"~", m.as_bytes()]);
            }
            cmd.extend([&b"*"[..], b"f", &value]);
            c.send(&cmd);
        }
        c.flush();
        let mut error = None;
        for _ in 0..n {
            match c.read() {
                Reply::Bulk(Some(_)) => sent += 1,
                Reply::Error(e) => error = error.or(Some(e)),
                other => panic!("XADD: {other:?}"),
            }
        }
        added.store(sent, Ordering::Relaxed);
        if error.is_some() {
            return error;
        }
    }
    None
}

/// `"error": "..."` for the JSON lines, or nothing.
fn error_field(e: &Option<String>) -> String {
    e.as_ref()
        .map(|e| format!(", \"error\": {:?}", e))
        .unwrap_or_default()
}

fn main() {
    let (mode, a) = parse();
    let a = Arc::new(a);
    let acked = Arc::new(AtomicU64::new(0));
    let added = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    match mode.as_str() {
        "consume" => {
            create_group(&a);
            let threads: Vec<_> = (0..a.consumers)
                .map(|i| {
                    let (a, acked, stop) = (a.clone(), acked.clone(), stop.clone());
                    std::thread::spawn(move || consumer(&a, i, false, &acked, &stop))
                })
                .collect();
            for t in threads {
                t.join().expect("consumer");
            }
            let n = acked.load(Ordering::Relaxed);
            let secs = start.elapsed().as_secs_f64();
            println!(
                "{{\"acked\": {n}, \"seconds\": {secs:.3}, \"rps\": {:.1}}}",
                n as f64 / secs
            );
        }
        "produce" => {
            let error = producer(&a, &added, &stop);
            let n = added.load(Ordering::Relaxed);
            let secs = start.elapsed().as_secs_f64();
            println!(
                "{{\"added\": {n}, \"seconds\": {secs:.3}, \"rps\": {:.1}{}}}",
                n as f64 / secs,
                error_field(&error)
            );
        }
        "steady" => {
            create_group(&a);
            let p = {
                let (a, added, stop) = (a.clone(), added.clone(), stop.clone());
                std::thread::spawn(move || producer(&a, &added, &stop))
            };
            let consumers: Vec<_> = (0..a.consumers)
                .map(|i| {
                    let (a, acked, stop) = (a.clone(), acked.clone(), stop.clone());
                    std::thread::spawn(move || consumer(&a, i, true, &acked, &stop))
                })
                .collect();
            let mut out = std::io::stdout();
            while !p.is_finished() {
                std::thread::sleep(Duration::from_secs(1));
                let line = format!(
                    "{{\"t\": {:.1}, \"added\": {}, \"acked\": {}}}\n",
                    start.elapsed().as_secs_f64(),
                    added.load(Ordering::Relaxed),
                    acked.load(Ordering::Relaxed)
                );
                out.write_all(line.as_bytes()).unwrap();
                out.flush().unwrap();
            }
            let error = p.join().expect("producer");
            // The consumers catch up with what was appended, then stop.
            let deadline = Instant::now() + Duration::from_secs(60);
            while acked.load(Ordering::Relaxed) < added.load(Ordering::Relaxed)
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            stop.store(true, Ordering::Relaxed);
            for t in consumers {
                t.join().expect("consumer");
            }
            println!(
                "{{\"t\": {:.1}, \"added\": {}, \"acked\": {}, \"done\": true{}}}",
                start.elapsed().as_secs_f64(),
                added.load(Ordering::Relaxed),
                acked.load(Ordering::Relaxed),
                error_field(&error)
            );
        }
        _ => {
            eprintln!(
                "usage: stream-load consume|produce|steady --port P [flags] (see the source)"
            );
            std::process::exit(2);
        }
    }
}
