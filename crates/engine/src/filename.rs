//! The files of a database directory: one place that names them and one that parses
//! them, as LevelDB's `filename.cc` does, so that recovery, repair, the checker and the
//! background jobs agree on which file is which. The formats behind each name are in
//! `docs/format.md`.
//!
//! ```text
//! 000012.sst        Table          sorted string table (sst/)
//! 000012.vlog       ValueFile      value file of the value log (vlog/file.rs)
//! 000012.vmap       IndexMap       index map of value file 12's GC (vlog/index_map.rs)
//! 000012.wal        Wal            write-ahead log (wal/, records are write batches)
//! MANIFEST-000012   Manifest       log of version edits (version/set.rs)
//! CURRENT           Current        names the live manifest
//! CURRENT.tmp       CurrentTmp     a replacement of CURRENT not yet renamed into place
//! LOCK              Lock           held by the open process
//! LIFETIME-MODEL    LifetimeModel  learned lifetime model (lifetime/model.rs)
//! 000012.vlog.orig  ValueFileOrig  repair's copy of a value file whose header it rewrote
//! lost/             (directory)    files recovery or repair could not account for
//! ```
//!
//! Numbered names use at least six digits; a parser accepts any number of digits (and
//! nothing else) so that a name is read back whatever width wrote it.

use std::path::{Path, PathBuf};

/// What a file in a database directory is, by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileKind {
    Table,
    ValueFile,
    IndexMap,
    Wal,
    Manifest,
    Current,
    CurrentTmp,
    Lock,
    LifetimeModel,
    ValueFileOrig,
}

pub const CURRENT: &str = "CURRENT";
pub const CURRENT_TMP: &str = "CURRENT.tmp";
pub const LOCK: &str = "LOCK";
pub const LIFETIME_MODEL: &str = "LIFETIME-MODEL";
/// The directory, inside the database directory, that files recovery or repair cannot
/// account for are moved into instead of being deleted.
pub const LOST_DIR: &str = "lost";
/// The directory, inside the database directory, that obsolete WALs are moved into while
/// `Options::wal.wal_ttl_seconds` or `wal_size_limit` keeps them for `DB::updates_since`.
pub const WAL_ARCHIVE_DIR: &str = "archive";
pub const MANIFEST_PREFIX: &str = "MANIFEST-";

const TABLE_EXT: &str = "sst";
const VALUE_FILE_EXT: &str = "vlog";
const INDEX_MAP_EXT: &str = "vmap";
const WAL_EXT: &str = "wal";
const VALUE_FILE_ORIG_EXT: &str = "vlog.orig";

pub fn table_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.{TABLE_EXT}"))
}

pub fn value_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.{VALUE_FILE_EXT}"))
}

/// The index map made by GC of value file `target` (named after the file it maps).
pub fn index_map_file_name(dir: &Path, target: u64) -> PathBuf {
    dir.join(format!("{target:06}.{INDEX_MAP_EXT}"))
}

pub fn wal_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.{WAL_EXT}"))
}

pub fn value_file_orig_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.{VALUE_FILE_ORIG_EXT}"))
}

/// The file name (not path) of manifest `number`, as CURRENT holds it.
pub fn manifest_name(number: u64) -> String {
    format!("{MANIFEST_PREFIX}{number:06}")
}

fn number(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// What the file name of `path` says it is, with its number (0 for unnumbered kinds);
/// `None` for a name the engine never writes.
pub fn parse(path: &Path) -> Option<(FileKind, u64)> {
    parse_name(path.file_name()?.to_str()?)
}

/// [`parse`] of a bare file name.
pub fn parse_name(name: &str) -> Option<(FileKind, u64)> {
    let fixed = match name {
        CURRENT => Some(FileKind::Current),
        CURRENT_TMP => Some(FileKind::CurrentTmp),
        LOCK => Some(FileKind::Lock),
        LIFETIME_MODEL => Some(FileKind::LifetimeModel),
        _ => None,
    };
    if let Some(kind) = fixed {
        return Some((kind, 0));
    }
    if let Some(digits) = name.strip_prefix(MANIFEST_PREFIX) {
        return Some((FileKind::Manifest, number(digits)?));
    }
    let (stem, ext) = name.split_once('.')?;
    let kind = match ext {
        TABLE_EXT => FileKind::Table,
        VALUE_FILE_EXT => FileKind::ValueFile,
        INDEX_MAP_EXT => FileKind::IndexMap,
        WAL_EXT => FileKind::Wal,
        VALUE_FILE_ORIG_EXT => FileKind::ValueFileOrig,
        _ => return None,
    };
    Some((kind, number(stem)?))
}

/// The number of `path` if it is a file of `kind`.
pub fn number_of(path: &Path, kind: FileKind) -> Option<u64> {
    parse(path).and_then(|(k, n)| (k == kind).then_some(n))
}

/// The number in a numbered engine file's name (`000012.sst`, `000012.vlog`,
/// `000012.vmap`, `000012.wal`, `MANIFEST-000012`); `None` for any other name.
pub fn file_number_of(path: &Path) -> Option<u64> {
    match parse(path)? {
        (
            FileKind::Table
            | FileKind::ValueFile
            | FileKind::IndexMap
            | FileKind::Wal
            | FileKind::Manifest,
            n,
        ) => Some(n),
        _ => None,
    }
}

/// The kind a file's extension claims, whatever its stem: for the checker, which
/// examines a misnamed `notes.sst` rather than passing over it.
pub fn claimed_kind(path: &Path) -> Option<FileKind> {
    match path.extension()?.to_str()? {
        TABLE_EXT => Some(FileKind::Table),
        VALUE_FILE_EXT => Some(FileKind::ValueFile),
        INDEX_MAP_EXT => Some(FileKind::IndexMap),
        WAL_EXT => Some(FileKind::Wal),
        _ => None,
    }
}

/// Whether `name` is a manifest's name, well formed or not (`MANIFEST-` and anything):
/// recovery and repair treat a damaged manifest name as a manifest to set aside.
pub fn is_manifest_like(name: &str) -> bool {
    name.starts_with(MANIFEST_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builder_parses_back() {
        let d = Path::new("/db");
        for (p, kind) in [
            (table_file_name(d, 12), FileKind::Table),
            (value_file_name(d, 12), FileKind::ValueFile),
            (index_map_file_name(d, 12), FileKind::IndexMap),
            (wal_file_name(d, 12), FileKind::Wal),
            (value_file_orig_name(d, 12), FileKind::ValueFileOrig),
            (d.join(manifest_name(12)), FileKind::Manifest),
        ] {
            assert_eq!(parse(&p), Some((kind, 12)), "{}", p.display());
        }
        assert_eq!(table_file_name(d, 7), Path::new("/db/000007.sst"));
        assert_eq!(manifest_name(7), "MANIFEST-000007");
        assert_eq!(parse_name("1234567.wal"), Some((FileKind::Wal, 1234567)));
        for (name, kind) in [
            ("CURRENT", FileKind::Current),
            ("CURRENT.tmp", FileKind::CurrentTmp),
            ("LOCK", FileKind::Lock),
            ("LIFETIME-MODEL", FileKind::LifetimeModel),
        ] {
            assert_eq!(parse_name(name), Some((kind, 0)));
        }
    }

    #[test]
    fn other_names_are_not_engine_files() {
        for name in [
            "x.sst",
            ".sst",
            "12.sst.bak",
            "12.tmp.sst",
            "+12.wal",
            "12",
            "MANIFEST-",
            "MANIFEST-12x",
            "MANIFEST-000012.sst",
            "lost",
            "LOG",
        ] {
            assert_eq!(parse_name(name), None, "{name}");
        }
        assert_eq!(file_number_of(Path::new("CURRENT")), None);
        assert_eq!(file_number_of(Path::new("d/000012.sst")), Some(12));
        assert_eq!(file_number_of(Path::new("MANIFEST-000007")), Some(7));
        assert_eq!(file_number_of(Path::new("000012.vlog")), Some(12));
        assert_eq!(file_number_of(Path::new("lifetime.model")), None);
        assert_eq!(file_number_of(Path::new("12x.sst")), None);
        assert_eq!(file_number_of(Path::new("000012.vlog.orig")), None);
        assert!(is_manifest_like("MANIFEST-12x"));
        assert_eq!(claimed_kind(Path::new("notes.sst")), Some(FileKind::Table));
    }
}
