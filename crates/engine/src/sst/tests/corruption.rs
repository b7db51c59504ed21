//! Damaged table files must produce `Error::Corruption` naming the file, never a panic or
//! wrong data.

use super::*;
use crate::error::Error;
use crate::internal_key::KIND_SEEK;
use crate::io::{FileStorage, IoCause, Storage};
use crate::sst::format::FOOTER_LEN;
use std::path::Path;
use std::sync::Arc;

fn assert_corruption(err: Error, file: &Path, detail_has: &str) {
    match err {
        Error::Corruption { file: f, detail } => {
            assert_eq!(f, file);
            assert!(
                detail.contains(detail_has),
                "detail {detail:?} lacks {detail_has:?}"
            );
        }
        other => panic!("expected corruption, got {other}"),
    }
}

fn table_bytes() -> (MemFile, TableProperties) {
    build_table(&simple_entries(400), TableOptions::new().block_size(512))
}

/// Reads everything through `iter` and `get`, returning the first error.
fn read_everything(t: &Arc<Table>) -> crate::Result<()> {
    let mut it = t.iter(IoCause::ClientRead);
    it.seek_to_first()?;
    collect(&mut it)?;
    for (k, _) in simple_entries(400) {
        t.get(&k, IoCause::ClientRead)?;
    }
    Ok(())
}

#[test]
fn flipped_byte_in_a_data_block_names_file_and_offset() {
    let (file, _) = table_bytes();
    let path = Path::new("test/000042.sst");
    let mut bytes = file.bytes();
    bytes[10] ^= 0x40; // inside the first data block, at offset 0
    file.set_bytes(bytes);
    let t = Table::open(file.reader(), 42, None).expect("meta blocks are intact");
    let err = t
        .get(&simple_entries(1)[0].0, IoCause::ClientRead)
        .unwrap_err();
    assert_corruption(err, path, "checksum mismatch in block at offset 0");
    let mut it = t.iter(IoCause::ClientRead);
    assert_corruption(it.seek_to_first().unwrap_err(), path, "offset 0");
    assert!(!it.valid());
    // A seek into an intact later block still works.
    let last = simple_entries(400).pop().unwrap();
    it.seek(&last.0).unwrap();
    assert_eq!(it.value(), &last.1[..]);
}

#[test]
fn flipped_byte_in_the_footer_is_detected() {
    let (file, _) = table_bytes();
    let clean = file.bytes();
    let path = Path::new("test/000042.sst");
    let footer_start = clean.len() - FOOTER_LEN;
    for (i, expect) in [
        (3, "footer checksum"),
        (50, "footer checksum"),
        (60, "bad magic"),
    ] {
        let mut bytes = clean.clone();
        bytes[footer_start + i] ^= 0x01;
        file.set_bytes(bytes);
        assert_corruption(
            Table::open(file.reader(), 42, None).unwrap_err(),
            path,
            expect,
        );
    }
}

#[test]
fn flipped_byte_in_the_index_or_properties_fails_open() {
    let (file, _) = table_bytes();
    let clean = file.bytes();
    let footer =
        format::Footer::decode(clean[clean.len() - FOOTER_LEN..].try_into().unwrap()).unwrap();
    for h in [footer.index, footer.filter, footer.properties] {
        let mut bytes = clean.clone();
        bytes[h.offset as usize + 1] ^= 0x08;
        file.set_bytes(bytes);
        let err = Table::open(file.reader(), 42, None).unwrap_err();
        assert_corruption(
            err,
            Path::new("test/000042.sst"),
            &format!("offset {}", h.offset),
        );
    }
}

#[test]
fn truncated_files_fail_to_open() {
    let (file, _) = table_bytes();
    let clean = file.bytes();
    for len in [
        0,
        1,
        FOOTER_LEN - 1,
        FOOTER_LEN,
        clean.len() / 2,
        clean.len() - 1,
    ] {
        file.set_bytes(clean[..len].to_vec());
        let err = Table::open(file.reader(), 42, None).unwrap_err();
        assert!(err.is_corruption(), "truncation to {len}: {err}");
        assert!(err.to_string().contains("test/000042.sst"), "{err}");
    }
}

#[test]
fn every_single_byte_flip_is_an_error_or_harmless_never_a_panic() {
    let (file, _) = build_table(&simple_entries(60), TableOptions::new().block_size(128));
    let clean = file.bytes();
    let mut detected = 0;
    for i in 0..clean.len() {
        let mut bytes = clean.clone();
        bytes[i] ^= 0x20;
        file.set_bytes(bytes);
        let result = Table::open(file.reader(), 1, None).and_then(|t| {
            let mut it = t.iter(IoCause::ClientRead);
            it.seek_to_first()?;
            collect(&mut it)
        });
        match result {
            Err(e) => {
                assert!(e.is_corruption(), "flip at {i}: {e}");
                detected += 1;
            }
            Ok(_) => panic!("flip at byte {i} went unnoticed"),
        }
    }
    assert_eq!(detected, clean.len());
}

#[test]
fn corruption_on_a_real_file_names_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FileStorage::new();
    let path = dir.path().join("000007.sst");
    let mut b = TableBuilder::new(
        fs.create(&path, IoCause::Flush).unwrap(),
        TableOptions::new(),
    );
    for (k, v) in simple_entries(100) {
        b.add(&k, &v).unwrap();
    }
    let props = b.finish().unwrap();
    assert_eq!(fs.file_size(&path).unwrap(), props.file_size);
    let t = Table::open(fs.open(&path).unwrap(), 7, None).unwrap();
    read_everything(&t).unwrap();
    let seek = make_internal_key(b"key-000050", u64::from(u32::MAX), KIND_SEEK);
    assert!(t.get(&seek, IoCause::ClientRead).unwrap().is_some());

    let mut bytes = std::fs::read(&path).unwrap();
    bytes[5] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let t = Table::open(fs.open(&path).unwrap(), 7, None).unwrap();
    assert_corruption(read_everything(&t).unwrap_err(), &path, "offset 0");

    fs.truncate(&path, props.file_size - 3).unwrap();
    assert_corruption(
        Table::open(fs.open(&path).unwrap(), 7, None).unwrap_err(),
        &path,
        "footer",
    );
}
