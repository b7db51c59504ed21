//! Output paths, checked before a run: a benchmark that fails to write its report after
//! minutes of work has lost those minutes, so every command creates and probes its output
//! directories first, and every I/O error names the path it was about.

use anyhow::{Context, Result};
use std::path::Path;

/// Creates `dir` (and its parents) and proves it writable by creating and removing a file
/// in it.
pub fn ensure_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating directory {}", dir.display()))?;
    tempfile::Builder::new()
        .prefix(".halflife-probe-")
        .tempfile_in(dir)
        .with_context(|| format!("output directory {} is not writable", dir.display()))?;
    Ok(())
}

/// [`ensure_dir`] on the directory a file will be written in (the current directory for a
/// bare file name).
pub fn ensure_parent(file: &Path) -> Result<()> {
    match file.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => ensure_dir(dir),
        None => ensure_dir(Path::new(".")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_missing_directories() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("a/b/report.json");
        ensure_parent(&f).unwrap();
        assert!(t.path().join("a/b").is_dir());
        // The probe file is gone.
        assert_eq!(std::fs::read_dir(t.path().join("a/b")).unwrap().count(), 0);
    }

    #[test]
    fn error_names_the_path() {
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("plain-file");
        std::fs::write(&file, b"x").unwrap();
        let out = file.join("sub/report.json");
        let e = format!("{:#}", ensure_parent(&out).unwrap_err());
        assert!(e.contains(&file.join("sub").display().to_string()), "{e}");
    }
}
