//! `BITFIELD` and `BITFIELD_RO`: integers of 1 to 64 bits (unsigned up to 63) at any bit
//! offset of a string, read, set and incremented with Redis's overflow policies. The
//! string is one metadata record, read once and written once per command.

use super::table::c;
use super::{eq, wrongtype, CmdResult, Ctx, MAX_STRING};
use crate::protocol::Reply;
use crate::record::{Kind, Meta};
use crate::store::Batch;
use bytes::Bytes;

#[rustfmt::skip]
pub static COMMANDS: &[super::table::Spec] = &[
    c!("bitfield", -2, [WRITE DENYOOM], 1, 1, 1, Bitmap, bitfield),
    c!("bitfield_ro", -2, [READONLY FAST], 1, 1, 1, Bitmap, bitfield_ro),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind2 {
    Get,
    Set,
    Incr,
}

struct Op {
    kind: Kind2,
    signed: bool,
    bits: u32,
    offset: u64,
    value: i64,
    overflow: Overflow,
}

fn bad_type() -> Reply {
    Reply::err("Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")
}

/// `i<bits>` (1 to 64) or `u<bits>` (1 to 63).
fn field_type(b: &[u8]) -> Result<(bool, u32), Reply> {
    let signed = match b.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(bad_type()),
    };
    let bits = super::parse_int(&b[1..]).ok_or_else(bad_type)?;
    if bits < 1 || bits > if signed { 64 } else { 63 } {
        return Err(bad_type());
    }
    Ok((signed, bits as u32))
}

/// A bit offset, or `#n`: the n-th field of this width.
fn offset(b: &[u8], bits: u32) -> Result<u64, Reply> {
    let err = || Reply::err("bit offset is not an integer or out of range");
    let (hash, digits) = match b.first() {
        Some(b'#') => (true, &b[1..]),
        _ => (false, b),
    };
    let mut n = super::parse_int(digits).ok_or_else(err)?;
    if hash {
        n = n.checked_mul(bits as i64).ok_or_else(err)?;
    }
    if n < 0 || (n as u64 >> 3) >= MAX_STRING {
        return Err(err());
    }
    Ok(n as u64)
}

fn get_bits(s: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v = 0u64;
    for j in offset..offset + bits as u64 {
        let byte = (j >> 3) as usize;
        let bit = s.get(byte).map_or(0, |b| (b >> (7 - (j & 7))) & 1);
        v = (v << 1) | bit as u64;
    }
    v
}

fn set_bits(s: &mut [u8], offset: u64, bits: u32, v: u64) {
    for (i, j) in (offset..offset + bits as u64).enumerate() {
        let bit = (v >> (bits as u64 - 1 - i as u64)) & 1;
        let (byte, shift) = ((j >> 3) as usize, 7 - (j & 7));
        s[byte] = (s[byte] & !(1 << shift)) | ((bit as u8) << shift);
    }
}

/// The field's range.
fn range(signed: bool, bits: u32) -> (i128, i128) {
    if signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

/// `v` brought into the field's range by `policy`: `None` for a refused overflow.
fn fit(v: i128, signed: bool, bits: u32, policy: Overflow) -> Option<i128> {
    let (min, max) = range(signed, bits);
    if (min..=max).contains(&v) {
        return Some(v);
    }
    match policy {
        Overflow::Fail => None,
        Overflow::Sat => Some(if v > max { max } else { min }),
        Overflow::Wrap => {
            let m = v.rem_euclid(1i128 << bits);
            Some(if signed && m > max {
                m - (1i128 << bits)
            } else {
                m
            })
        }
    }
}

fn parse(a: &[Bytes]) -> Result<Vec<Op>, Reply> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 1;
    while j < a.len() {
        let rest = a.len() - j - 1;
        let sub = &a[j];
        let kind = if eq(sub, "get") && rest >= 2 {
            Kind2::Get
        } else if eq(sub, "set") && rest >= 3 {
            Kind2::Set
        } else if eq(sub, "incrby") && rest >= 3 {
            Kind2::Incr
        } else if eq(sub, "overflow") && rest >= 1 {
            let t = &a[j + 1];
            overflow = if eq(t, "wrap") {
                Overflow::Wrap
            } else if eq(t, "sat") {
                Overflow::Sat
            } else if eq(t, "fail") {
                Overflow::Fail
            } else {
                return Err(Reply::err("Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return Err(super::syntax());
        };
        let (signed, bits) = field_type(&a[j + 1])?;
        let offset = offset(&a[j + 2], bits)?;
        let value = match kind {
            Kind2::Get => 0,
            _ => super::int(&a[j + 3])?,
        };
        ops.push(Op {
            kind,
            signed,
            bits,
            offset,
            value,
            overflow,
        });
        j += if kind == Kind2::Get { 3 } else { 4 };
    }
    Ok(ops)
}

/// `BITFIELD key [GET type offset] [SET type offset value] [INCRBY type offset incr]
/// [OVERFLOW WRAP|SAT|FAIL] ...`
pub fn bitfield(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    run(cx, a, false)
}

/// `BITFIELD_RO key [GET type offset] ...`
pub fn bitfield_ro(cx: &mut Ctx, a: &[Bytes]) -> CmdResult {
    run(cx, a, true)
}

fn run(cx: &Ctx, a: &[Bytes], readonly: bool) -> CmdResult {
    let key = &a[0];
    let ops = parse(a)?;
    let writes = ops.iter().any(|o| o.kind != Kind2::Get);
    if writes && readonly {
        return Err(Reply::err("BITFIELD_RO only supports the GET subcommand"));
    }
    let _g = writes.then(|| cx.lock(&[key]));
    let meta = match cx.meta(key)? {
        Some(m) if m.kind != Kind::String => return Err(wrongtype()),
        m => m,
    };
    let mut s = meta.as_ref().map_or_else(Vec::new, |m| m.value.clone());
    let end = ops
        .iter()
        .filter(|o| o.kind != Kind2::Get)
        .map(|o| ((o.offset + o.bits as u64 - 1) >> 3) as usize + 1)
        .max()
        .unwrap_or(0);
    let grown = end > s.len() || (writes && meta.is_none());
    if end > s.len() {
        s.resize(end, 0);
    }
    let mut changed = false;
    let mut out = Vec::with_capacity(ops.len());
    for o in &ops {
        let raw = get_bits(&s, o.offset, o.bits);
        let old: i128 = if o.signed && o.bits < 64 && raw >> (o.bits - 1) & 1 == 1 {
            raw as i128 - (1i128 << o.bits)
        } else if o.signed {
            raw as i64 as i128
        } else {
            raw as i128
        };
        if o.kind == Kind2::Get {
            out.push(Reply::Int(old as i64));
            continue;
        }
        let wanted = match o.kind {
            Kind2::Incr => old + o.value as i128,
            // An unsigned field takes the value's 64 bits, as Redis reads it.
            _ if !o.signed => o.value as u64 as i128,
            _ => o.value as i128,
        };
        let Some(new) = fit(wanted, o.signed, o.bits, o.overflow) else {
            out.push(Reply::Nil);
            continue;
        };
        let mask = if o.bits == 64 {
            u64::MAX
        } else {
            (1u64 << o.bits) - 1
        };
        set_bits(&mut s, o.offset, o.bits, (new as i64 as u64) & mask);
        changed |= new != old;
        out.push(Reply::Int(
            if o.kind == Kind2::Incr { new } else { old } as i64
        ));
    }
    if writes && (changed || grown) {
        let mut b = Batch::new();
        let expiry = meta.and_then(|m| m.expire_at_ms);
        b.put_meta(cx.db(), key, &Meta::string(s, expiry));
        cx.write(b)?;
    }
    Ok(Reply::Array(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_overflow_as_redis_says() {
        assert_eq!(fit(256, false, 8, Overflow::Wrap), Some(0));
        assert_eq!(fit(-1, false, 8, Overflow::Wrap), Some(255));
        assert_eq!(fit(300, false, 8, Overflow::Sat), Some(255));
        assert_eq!(fit(-5, false, 8, Overflow::Sat), Some(0));
        assert_eq!(fit(128, true, 8, Overflow::Wrap), Some(-128));
        assert_eq!(fit(-129, true, 8, Overflow::Sat), Some(-128));
        assert_eq!(fit(128, true, 8, Overflow::Fail), None);
        let mut s = vec![0u8; 2];
        set_bits(&mut s, 4, 8, 0xab);
        assert_eq!(s, [0x0a, 0xb0]);
        assert_eq!(get_bits(&s, 4, 8), 0xab);
        assert_eq!(get_bits(&s, 12, 8), 0, "past the end reads zeros");
    }
}
