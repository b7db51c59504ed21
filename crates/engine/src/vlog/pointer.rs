//! The value pointer stored in the tree in place of a separated value:
//! `varint file_number | varint offset | varint size`, where `size` is the length of the
//! whole record in the value file (see [`super::file`]). Bytes after the pointer are
//! reserved for per-key metadata that later policies attach (paper 000's features).

use crate::error::{Error, Result};
use integer_encoding::{VarInt, VarIntWriter};
use std::path::Path;

/// The bytes of a value-file record before its key (crc, key length, value field; the
/// grammar is in [`super::file`]): the pointer's `size` counts them.
pub const RECORD_HEADER: usize = 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValuePointer {
    pub file: u64,
    pub offset: u64,
    pub size: u32,
}

impl ValuePointer {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(16);
        self.encode_into(&mut v);
        v
    }

    pub fn encode_into(&self, v: &mut Vec<u8>) {
        v.write_varint(self.file).unwrap();
        v.write_varint(self.offset).unwrap();
        v.write_varint(self.size).unwrap();
    }

    /// Decodes a pointer; `file` names where it was read from in errors. Returns the
    /// pointer and the bytes that follow it.
    pub fn decode<'a>(file: &Path, data: &'a [u8]) -> Result<(ValuePointer, &'a [u8])> {
        let bad = || Error::corruption(file, "malformed value pointer");
        let (f, a) = u64::decode_var(data).ok_or_else(bad)?;
        let (o, b) = u64::decode_var(&data[a..]).ok_or_else(bad)?;
        let (s, c) = u32::decode_var(&data[a + b..]).ok_or_else(bad)?;
        Ok((
            ValuePointer {
                file: f,
                offset: o,
                size: s,
            },
            &data[a + b + c..],
        ))
    }

    /// Length of the user value the record holds, given the key length.
    pub fn value_len(&self, key_len: usize) -> u64 {
        (self.size as u64).saturating_sub((RECORD_HEADER + key_len) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_trailing_bytes() {
        let p = ValuePointer {
            file: 12,
            offset: 1 << 40,
            size: 4096 + 268,
        };
        let mut e = p.encode();
        e.extend_from_slice(b"meta");
        let (d, rest) = ValuePointer::decode(Path::new("t"), &e).unwrap();
        assert_eq!((d, rest), (p, &b"meta"[..]));
        assert!(ValuePointer::decode(Path::new("t"), &e[..2]).is_err());
        assert_eq!(p.value_len(256), 4096);
    }
}
