//! Hash slots as Redis Cluster computes them: CRC16-XMODEM of the key, or of its hash tag
//! (the bytes between the first `{` and the next `}`, when not empty), modulo 16384. The
//! clients compute the same function to route a key, so it must match bit for bit.

/// Slots of a cluster (Redis's `CLUSTER_SLOTS`).
pub const SLOTS: u16 = 16384;

/// The part of `key` that is hashed: the content of the first `{...}` if it is not
/// empty, the whole key otherwise (`{}` and an unclosed `{` hash the whole key).
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        let rest = &key[open + 1..];
        if let Some(close) = rest.iter().position(|&b| b == b'}') {
            if close > 0 {
                return &rest[..close];
            }
        }
    }
    key
}

/// The slot of `key`.
pub fn key_slot(key: &[u8]) -> u16 {
    // XMODEM: polynomial 0x1021, initial value 0, no reflection, no final XOR (the
    // CRC-16/CCITT variant the Redis cluster spec names).
    crc16::State::<crc16::XMODEM>::calculate(hash_tag(key)) % SLOTS
}

/// A slot number as a client sends it (`CLUSTER COUNTKEYSINSLOT 42`): digits only,
/// below [`SLOTS`].
pub fn parse_slot(b: &[u8]) -> Option<u16> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) || s.len() > 5 {
        return None;
    }
    s.parse::<u16>().ok().filter(|&n| n < SLOTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_the_cluster_spec() {
        // The spec's check value: CRC16-XMODEM("123456789") = 0x31C3.
        assert_eq!(
            crc16::State::<crc16::XMODEM>::calculate(b"123456789"),
            0x31c3
        );
        assert_eq!(key_slot(b"123456789"), 0x31c3 % SLOTS);
        assert_eq!(key_slot(b"123456789"), 12739);
        // Values `redis-cli CLUSTER KEYSLOT` prints.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"hello"), 866);
        assert_eq!(key_slot(b""), 0);
    }

    #[test]
    fn hash_tags_follow_the_spec() {
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"{bar"), b"{bar");
        assert_eq!(hash_tag(b"bar}"), b"bar}");
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert_eq!(key_slot(b"{foo}x"), key_slot(b"foo"));
    }

    #[test]
    fn slot_numbers_are_strict() {
        assert_eq!(parse_slot(b"0"), Some(0));
        assert_eq!(parse_slot(b"16383"), Some(16383));
        for bad in [
            &b""[..],
            b"16384",
            b"-1",
            b"+1",
            b" 1",
            b"abc",
            b"999999999999",
        ] {
            assert_eq!(parse_slot(bad), None, "{bad:?}");
        }
    }
}
