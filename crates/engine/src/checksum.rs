//! The one checksum of every engine file: crc32c (Castagnoli), stored *masked*.
//!
//! Why masked: several formats checksum data that itself contains checksums (a WAL record
//! holding a batch, a manifest edit, a table block with handles, an index map whose body
//! ends in a stored CRC). The crc32c of a string that ends in its own crc32c is a constant,
//! so a checksum over embedded checksums would be degenerate; rotating and offsetting the
//! stored value (as LevelDB does) breaks that. The mask must never change: every file on
//! disk stores masked values. The file formats are in `docs/format.md`.
//!
//! `LIFETIME-MODEL` is the one file that stores its crc32c unmasked (see
//! [`crate::lifetime::model`]); it uses [`crc`] without [`mask`].

const MASK_DELTA: u32 = 0xa282_ead8;

/// The crc32c of `data`.
pub fn crc(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// The crc32c of the bytes already summed into `crc` followed by `data`.
pub fn extend(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// The stored form of `crc` (see the module docs for why).
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// The crc32c a stored (masked) checksum stands for.
pub fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// The stored (masked) checksum of `data`.
pub fn masked(data: &[u8]) -> u32 {
    mask(crc(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_round_trips_and_changes_the_value() {
        for crc in [0u32, 1, 0xdead_beef, u32::MAX] {
            assert_eq!(unmask(mask(crc)), crc);
            assert_ne!(mask(crc), crc);
        }
    }

    #[test]
    fn masked_values_are_those_already_on_disk() {
        // Pinned: the mask is part of every file format.
        assert_eq!(crc(b"123456789"), 0xe306_9283);
        assert_eq!(mask(0xe306_9283), 0xc78a_b0e5);
        assert_eq!(extend(crc(b"1234"), b"56789"), crc(b"123456789"));
    }
}
