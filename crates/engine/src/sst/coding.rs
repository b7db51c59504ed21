//! Little-endian fixed-width integers and LEB128 varints, the two encodings every table
//! structure uses.
//!
//! Decoding is strict and never panics: a varint that runs off the end of its buffer, is
//! longer than its type allows, or carries bits beyond the type's width is rejected, so a
//! corrupt block turns into a typed error instead of a wrong length that is trusted later.

/// Appends `v` as a varint (7 bits per byte, low group first, high bit = "more follows").
pub(crate) fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

pub(crate) fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, u64::from(v));
}

/// Decodes a varint of at most `max_bits` bits at `*pos`, advancing `*pos` past it.
fn get_varint(src: &[u8], pos: &mut usize, max_bits: u32) -> Option<u64> {
    let mut result: u64 = 0;
    let mut shift = 0u32;
    let mut i = *pos;
    loop {
        let byte = *src.get(i)?;
        i += 1;
        let group = u64::from(byte & 0x7f);
        if shift >= max_bits || (shift > 0 && group >> (max_bits - shift).min(63) != 0) {
            return None;
        }
        result |= group << shift;
        if byte & 0x80 == 0 {
            *pos = i;
            return Some(result);
        }
        shift += 7;
    }
}

pub(crate) fn get_varint64(src: &[u8], pos: &mut usize) -> Option<u64> {
    get_varint(src, pos, 64)
}

pub(crate) fn get_varint32(src: &[u8], pos: &mut usize) -> Option<u32> {
    get_varint(src, pos, 32).map(|v| v as u32)
}

/// Reads a little-endian `u32` at `pos`; `None` past the end.
pub(crate) fn get_fixed32(src: &[u8], pos: usize) -> Option<u32> {
    let bytes = src.get(pos..pos.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

/// Reads a little-endian `u64` at `pos`; `None` past the end.
pub(crate) fn get_fixed64(src: &[u8], pos: usize) -> Option<u64> {
    let bytes = src.get(pos..pos.checked_add(8)?)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_the_edges() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            let mut pos = 0;
            assert_eq!(get_varint64(&buf, &mut pos), Some(v));
            assert_eq!(pos, buf.len());
        }
    }

    #[test]
    fn malformed_varints_are_rejected() {
        // Runs off the end.
        assert_eq!(get_varint64(&[0x80, 0x80], &mut 0), None);
        assert_eq!(get_varint64(&[], &mut 0), None);
        // Eleven bytes is longer than any u64.
        assert_eq!(get_varint64(&[0xff; 11], &mut 0), None);
        // Bits beyond 64 in the tenth byte.
        let mut too_big = vec![0xff; 9];
        too_big.push(0x02);
        assert_eq!(get_varint64(&too_big, &mut 0), None);
        // A u32 varint whose value needs 33 bits.
        let mut buf = Vec::new();
        put_varint64(&mut buf, 1 << 32);
        assert_eq!(get_varint32(&buf, &mut 0), None);
        let mut buf = Vec::new();
        put_varint64(&mut buf, u32::MAX as u64);
        assert_eq!(get_varint32(&buf, &mut 0), Some(u32::MAX));
    }
}
