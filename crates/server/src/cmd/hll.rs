//! HyperLogLog: `PFADD`, `PFCOUNT`, `PFMERGE`, on string values in Redis's own format, so
//! that `GET`/`SET`/`DUMP` of one carry it and Redis's tests that read or corrupt its
//! bytes see what they would in Redis:
//!
//! ```text
//! "HYLL" | encoding u8 (0 dense, 1 sparse) | 3 unused | cached cardinality u64 LE
//!        (its top bit set: stale) | registers
//! dense:  16384 registers of 6 bits, least significant bits first
//! sparse: runs of registers: 00xxxxxx (1-64 zeros), 01xxxxxx yyyyyyyy (1-16384 zeros),
//!         1vvvvvxx (1-4 registers of value 1-32)
//! ```
//!
//! An element sets register `h mod 16384` of its 64-bit MurmurHash2 (`h`, seed
//! 0xadc83b19) to at most the position of the lowest set bit of the other 50 bits. A
//! sparse value becomes dense when a register passes 32 or it would pass
//! `hll-sparse-max-bytes`. The count is Ertl's improved estimator, as Redis 7's
//! (standard error 0.81 %). Registers are decoded whole to be changed and encoded again
//! (a sparse one as short as its runs allow, which Redis's in-place edits need not be):
//! the values count the same. `PFDEBUG` and `PFSELFTEST` are Redis's internals and are
//! not implemented.

use super::table::c;
use super::{wrongtype, CmdResult, Ctx};
use crate::protocol::Reply;
use crate::record::{Kind, Meta};
use crate::store::Batch;
use bytes::Bytes;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("pfadd", -2, [WRITE DENYOOM FAST], 1, 1, 1, Hyperloglog, pfadd),
    c!("pfcount", -2, [READONLY MAY_REPLICATE], 1, -1, 1, Hyperloglog, pfcount),
    c!("pfmerge", -2, [WRITE DENYOOM], 1, -1, 1, Hyperloglog, pfmerge),
];

const P: u32 = 14;
const Q: u32 = 64 - P;
const REGISTERS: usize = 1 << P;
const BITS: usize = 6;
const HEADER: usize = 16;
const DENSE_SIZE: usize = HEADER + (REGISTERS * BITS).div_ceil(8);
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const SPARSE_MAX_VALUE: u8 = 32;

fn not_hll() -> Reply {
    Reply::Error("WRONGTYPE Key is not a valid HyperLogLog string value.".into())
}

fn corrupt() -> Reply {
    Reply::Error("INVALIDOBJ Corrupted HLL object detected".into())
}

/// MurmurHash64A (Austin Appleby's, public domain), as Redis hashes HLL elements:
/// little-endian 8-byte blocks.
fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4a7935bd1e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut blocks = key.chunks_exact(8);
    for b in &mut blocks {
        let mut k = u64::from_le_bytes(b.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element sets, and the value (the run of zero bits of the hash above
/// the index, plus one).
fn position(ele: &[u8]) -> (usize, u8) {
    let h = murmur64a(ele, 0xadc83b19);
    let index = (h as usize) & (REGISTERS - 1);
    let rest = (h >> P) | (1 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// A HyperLogLog decoded: its registers and whether it was dense.
struct Hll {
    regs: Vec<u8>,
    dense: bool,
}

impl Hll {
    fn new() -> Hll {
        Hll {
            regs: vec![0; REGISTERS],
            dense: false,
        }
    }

    /// Reads a stored value: `WRONGTYPE` if it is not a HyperLogLog's header (or a dense
    /// one of the wrong length), `INVALIDOBJ` if its sparse runs do not cover exactly the
    /// registers.
    fn decode(v: &[u8]) -> Result<Hll, Reply> {
        if v.len() < HEADER || &v[..4] != b"HYLL" || v[4] > SPARSE {
            return Err(not_hll());
        }
        let body = &v[HEADER..];
        let mut regs = vec![0u8; REGISTERS];
        if v[4] == DENSE {
            if v.len() != DENSE_SIZE {
                return Err(not_hll());
            }
            for (i, r) in regs.iter_mut().enumerate() {
                let bit = i * BITS;
                let (byte, fb) = (bit / 8, bit % 8);
                let lo = (body[byte] >> fb) as u16;
                let hi = body.get(byte + 1).map_or(0, |&b| (b as u16) << (8 - fb));
                *r = ((lo | hi) & 63) as u8;
            }
            return Ok(Hll { regs, dense: true });
        }
        let (mut i, mut at) = (0usize, 0usize);
        while i < body.len() {
            let op = body[i];
            let (len, value) = if op & 0x80 != 0 {
                i += 1;
                (((op & 3) + 1) as usize, ((op >> 2) & 0x1f) + 1)
            } else if op & 0x40 != 0 {
                let low = *body.get(i + 1).ok_or_else(corrupt)?;
                i += 2;
                (((((op & 0x3f) as usize) << 8) | low as usize) + 1, 0)
            } else {
                i += 1;
                (((op & 0x3f) + 1) as usize, 0)
            };
            if at + len > REGISTERS {
                return Err(corrupt());
            }
            regs[at..at + len].fill(value);
            at += len;
        }
        if at != REGISTERS {
            return Err(corrupt());
        }
        Ok(Hll { regs, dense: false })
    }

    /// The sparse runs of the registers, or `None` if a register is above what they hold.
    fn sparse(&self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < REGISTERS {
            let v = self.regs[i];
            let run = self.regs[i..].iter().take_while(|&&r| r == v).count();
            if v == 0 {
                let mut left = run;
                while left > 0 {
                    let n = left.min(REGISTERS);
                    if n > 64 {
                        out.push(0x40 | ((n - 1) >> 8) as u8);
                        out.push(((n - 1) & 0xff) as u8);
                    } else {
                        out.push((n - 1) as u8);
                    }
                    left -= n;
                }
            } else {
                if v > SPARSE_MAX_VALUE {
                    return None;
                }
                let mut left = run;
                while left > 0 {
                    let n = left.min(4);
                    out.push(0x80 | ((v - 1) << 2) | (n - 1) as u8);
                    left -= n;
                }
            }
            i += run;
        }
        Some(out)
    }

    /// The stored value: sparse if it was and may stay so, with the cached cardinality
    /// `card` (`None`: stale).
    fn encode(&self, sparse_max: usize, card: Option<u64>) -> Vec<u8> {
        let mut out = b"HYLL".to_vec();
        let sparse = (!self.dense)
            .then(|| self.sparse())
            .flatten()
            .filter(|s| HEADER + s.len() <= sparse_max);
        out.push(if sparse.is_some() { SPARSE } else { DENSE });
        out.extend_from_slice(&[0, 0, 0]);
        let mut c = card.unwrap_or(0).to_le_bytes();
        if card.is_none() {
            c[7] |= 0x80;
        }
        out.extend_from_slice(&c);
        match sparse {
            Some(s) => out.extend_from_slice(&s),
            None => {
                let mut body = vec![0u8; DENSE_SIZE - HEADER];
                for (i, &r) in self.regs.iter().enumerate() {
                    let bit = i * BITS;
                    let (byte, fb) = (bit / 8, bit % 8);
                    body[byte] |= r << fb;
                    if fb > 2 {
                        body[byte + 1] |= r >> (8 - fb);
                    }
                }
                out.extend_from_slice(&body);
            }
        }
        out
    }

    /// Sets register `i` to at least `v`; whether it changed.
    fn raise(&mut self, i: usize, v: u8) -> bool {
        if self.regs[i] < v {
            self.regs[i] = v;
            true
        } else {
            false
        }
    }

    fn merge(&mut self, other: &Hll) {
        for (a, &b) in self.regs.iter_mut().zip(&other.regs) {
            *a = (*a).max(b);
        }
        self.dense |= other.dense;
    }

    /// Ertl's estimator ("New cardinality estimation algorithms for HyperLogLog
    /// sketches", 2017), from the histogram of register values.
    fn count(&self) -> u64 {
        let mut histo = [0u32; 64];
        for &r in &self.regs {
            histo[r as usize & 63] += 1;
        }
        let m = REGISTERS as f64;
        let q = Q as usize;
        let mut z = m * tau((m - histo[q + 1] as f64) / m);
        for j in (1..=q).rev() {
            z += histo[j] as f64;
            z *= 0.5;
        }
        z += m * sigma(histo[0] as f64 / m);
        (0.5 / std::f64::consts::LN_2 * m * m / z).round() as u64
    }
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

fn sparse_max(cx: &Ctx) -> usize {
    cx.sh.settings.compat_num("hll-sparse-max-bytes").max(0) as usize
}

/// The HyperLogLog at `key`, with its metadata (`None`: no key).
fn load(cx: &Ctx, key: &[u8]) -> Result<Option<(Meta, Hll)>, Reply> {
    match cx.meta(key)? {
        None => Ok(None),
        Some(m) if m.kind != Kind::String => Err(wrongtype()),
        Some(m) => {
            let h = Hll::decode(&m.value)?;
            Ok(Some((m, h)))
        }
    }
}

fn store(cx: &Ctx, key: &[u8], old: Option<Meta>, value: Vec<u8>) -> Result<(), Reply> {
    let expiry = old.and_then(|m| m.expire_at_ms);
    let mut b = Batch::new();
    b.put_meta(cx.db(), key, &Meta::string(value, expiry));
    cx.write(b)
}

/// `PFADD key [element ...]`: 1 if a register changed (or the key was created).
pub fn pfadd(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let key = &a[0];
    let _g = cx.lock(&[key]);
    let (meta, mut h, mut changed) = match load(cx, key)? {
        Some((m, h)) => (Some(m), h, false),
        None => (None, Hll::new(), true),
    };
    for e in &a[1..] {
        let (i, v) = position(e);
        changed |= h.raise(i, v);
    }
    if changed {
        // A new, empty one counts 0; any other change makes the cached count stale.
        let card = (meta.is_none() && a.len() == 1).then_some(0);
        store(cx, key, meta, h.encode(sparse_max(cx), card))?;
    }
    Ok(Reply::Int(changed as i64))
}

/// `PFCOUNT key [key ...]`: one key's count is cached in its value (a stale cache is
/// recomputed and written back, as Redis does); several keys' is their union's.
pub fn pfcount(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    if let [key] = a {
        let _g = cx.lock(&[key]);
        let Some((m, h)) = load(cx, key)? else {
            return Ok(Reply::Int(0));
        };
        if m.value[15] & 0x80 == 0 {
            let c = u64::from_le_bytes(m.value[8..16].try_into().expect("8 bytes"));
            return Ok(Reply::Int(c as i64));
        }
        let n = h.count();
        // A replica keeps its primary's records as they are.
        if !cx.sh.store.is_replica() {
            let mut v = m.value.clone();
            v[8..16].copy_from_slice(&n.to_le_bytes());
            store(cx, key, Some(m), v)?;
        }
        return Ok(Reply::Int(n as i64));
    }
    let mut all = Hll::new();
    for k in a {
        if let Some((_, h)) = load(cx, k)? {
            all.merge(&h);
        }
    }
    Ok(Reply::Int(all.count() as i64))
}

/// `PFMERGE dest [source ...]`: the destination holds the union (dense if any input was).
pub fn pfmerge(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let _g = cx.lock(a);
    let mut all = Hll::new();
    let mut dest = None;
    for (i, k) in a.iter().enumerate() {
        if let Some((m, h)) = load(cx, k)? {
            all.merge(&h);
            if i == 0 {
                dest = Some(m);
            }
        }
    }
    store(cx, &a[0], dest, all.encode(sparse_max(cx), None))?;
    Ok(Reply::ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_round_trip_and_count_within_the_error_bound() {
        let mut h = Hll::new();
        for i in 0..20_000u32 {
            let (r, v) = position(i.to_string().as_bytes());
            h.raise(r, v);
        }
        let n = h.count() as f64;
        // Three standard errors (0.81 %) either side.
        assert!((n - 20_000.0).abs() < 20_000.0 * 0.0243, "{n}");
        let dense = h.encode(0, None);
        assert_eq!(dense.len(), DENSE_SIZE);
        assert_eq!(Hll::decode(&dense).unwrap().regs, h.regs);
        let mut small = Hll::new();
        small.raise(5, 3);
        small.raise(6, 3);
        let sparse = small.encode(3000, Some(2));
        assert_eq!(sparse[4], SPARSE);
        assert_eq!(Hll::decode(&sparse).unwrap().regs, small.regs);
        assert_eq!(Hll::new().encode(3000, Some(0))[HEADER..], [0x7f, 0xff]);
        let mut extra = sparse.clone();
        extra.push(0);
        assert_eq!(Hll::decode(&extra).err(), Some(corrupt()));
        assert_eq!(Hll::decode(&sparse[..HEADER]).err(), Some(corrupt()));
        assert_eq!(Hll::decode(b"HYLX").err(), Some(not_hll()));
        assert_eq!(murmur64a(b"", 0), 0);
    }
}
