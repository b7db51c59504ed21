//! Tables with compressed data blocks: round trips for every codec, the space they save,
//! and damaged compressed blocks reported as corruption naming the file and the block.

use super::*;
use crate::error::Error;
use crate::io::IoCause;
use crate::sst::compression::Compression;
use crate::sst::compression::{BLOCK_TYPE_LZ4, BLOCK_TYPE_UNCOMPRESSED, BLOCK_TYPE_ZSTD};
use crate::sst::format::{block_checksum, BLOCK_TRAILER_LEN};
use std::sync::Arc;

const CODECS: [Compression; 2] = [Compression::Lz4, Compression::Zstd { level: 3 }];

fn open(file: &MemFile) -> Arc<Table> {
    Table::open(file.reader(), 42, None).unwrap()
}

fn read_all(t: &Arc<Table>) -> crate::Result<Entries> {
    let mut it = t.iter(IoCause::ClientRead);
    it.seek_to_first()?;
    collect(&mut it)
}

/// The first data block: its type byte and where its stored contents end.
fn first_block(bytes: &[u8], t: &Arc<Table>) -> (u8, usize) {
    let mut it = t.index_block().iter();
    it.seek_to_first();
    let h = t.index_handle(it.key(), it.value()).unwrap();
    assert_eq!(h.offset, 0);
    let end = h.size as usize;
    (bytes[end], end)
}

#[test]
fn compressed_tables_round_trip_and_are_smaller() {
    let entries = simple_entries(2000);
    let (plain, plain_props) = build_table(&entries, TableOptions::new());
    assert_eq!(read_all(&open(&plain)).unwrap(), entries);
    for c in CODECS {
        let (file, props) = build_table(&entries, TableOptions::new().compression(c));
        let t = open(&file);
        assert_eq!(read_all(&t).unwrap(), entries, "{c}");
        for (k, v) in entries.iter().step_by(37) {
            let got = t.get(k, IoCause::ClientRead).unwrap().expect("present");
            assert_eq!(&got.1, v, "{c}");
        }
        assert!(
            props.file_size < plain_props.file_size / 2,
            "{c}: {} vs {} bytes",
            props.file_size,
            plain_props.file_size
        );
        let want = if c == Compression::Lz4 {
            BLOCK_TYPE_LZ4
        } else {
            BLOCK_TYPE_ZSTD
        };
        assert_eq!(first_block(&file.bytes(), &t).0, want, "{c}");
    }
}

#[test]
fn incompressible_blocks_are_stored_plain_in_a_compressed_table() {
    let mut x = 1u64;
    let entries: Entries = simple_entries(300)
        .into_iter()
        .map(|(k, _)| {
            let v = (0..200)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (x >> 56) as u8
                })
                .collect();
            (k, v)
        })
        .collect();
    let (file, _) = build_table(&entries, TableOptions::new().compression(Compression::Lz4));
    let t = open(&file);
    assert_eq!(first_block(&file.bytes(), &t).0, BLOCK_TYPE_UNCOMPRESSED);
    assert_eq!(read_all(&t).unwrap(), entries);
}

/// A compressed block whose bytes were damaged and whose checksum was then recomputed (a
/// bug upstream of the checksum, or a deliberate edit): the codec, not the CRC, must catch
/// it, as a corruption naming the file and the block.
#[test]
fn damaged_compressed_block_with_a_valid_checksum_is_corruption() {
    let entries = simple_entries(2000);
    for c in CODECS {
        let (file, _) = build_table(&entries, TableOptions::new().compression(c));
        let clean = file.bytes();
        let (block_type, end) = first_block(&clean, &open(&file));
        let with_crc = |mut bytes: Vec<u8>| {
            let crc = block_checksum(&bytes[..end], block_type);
            bytes[end + 1..end + BLOCK_TRAILER_LEN].copy_from_slice(&crc.to_le_bytes());
            bytes
        };
        let expect_corruption = |bytes: Vec<u8>, detail_has: &str| {
            file.set_bytes(bytes);
            match read_all(&open(&file)).unwrap_err() {
                Error::Corruption { file: f, detail } => {
                    assert_eq!(f, std::path::Path::new("test/000042.sst"));
                    assert!(detail.contains("block at offset 0"), "{c}: {detail}");
                    assert!(detail.contains(detail_has), "{c}: {detail}");
                }
                other => panic!("{c}: expected corruption, got {other}"),
            }
        };
        // The length prefix claims one byte more than the codec yields.
        let mut bytes = clean.clone();
        assert!(bytes[0] & 0x7f < 0x7f);
        bytes[0] += 1;
        expect_corruption(with_crc(bytes), "decompress");
        // The stream's last 16 bytes overwritten: the codec reports it, or (LZ4 ends in
        // literals, which decode to the right length) the block parser does.
        let mut bytes = clean.clone();
        bytes[end - 16..end].fill(0xff);
        expect_corruption(with_crc(bytes), "");
        // A flipped bit anywhere in the stored contents, checksum left alone: the CRC.
        let mut bytes = clean.clone();
        bytes[end / 2] ^= 0x04;
        file.set_bytes(bytes);
        let err = read_all(&open(&file)).unwrap_err().to_string();
        assert!(err.contains("checksum mismatch"), "{c}: {err}");
        // An unknown type byte with a matching checksum.
        let mut bytes = clean.clone();
        bytes[end] = 7;
        let crc = block_checksum(&bytes[..end], 7);
        bytes[end + 1..end + BLOCK_TRAILER_LEN].copy_from_slice(&crc.to_le_bytes());
        file.set_bytes(bytes);
        let err = read_all(&open(&file)).unwrap_err().to_string();
        assert!(err.contains("unknown block type 7"), "{c}: {err}");
    }
}
