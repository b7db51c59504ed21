//! Engine options as users type them: the size flags `bench` and `serve` share, and
//! engine errors under those flags' names (the engine names its fields, `memtable_size`;
//! the command line has `--memtable-mb`).

use anyhow::anyhow;

/// The engine's sizes, as `bench` and `serve` take them.
#[derive(clap::Args, Clone, Debug)]
pub struct SizeArgs {
    /// Memtable size in MiB.
    #[arg(long, default_value_t = 64)]
    pub memtable_mb: u64,
    /// Block cache size in MiB.
    #[arg(long = "cache-mib", alias = "cache-mb", default_value_t = 64)]
    pub cache_mib: u64,
    /// Values at least this large (bytes) go to value files (policies other than inline).
    #[arg(long, default_value_t = 512)]
    pub min_blob_size: u64,
    /// Target value file size in MiB.
    #[arg(long, default_value_t = 64)]
    pub blob_file_mb: u64,
}

impl SizeArgs {
    pub fn memtable_bytes(&self) -> usize {
        (self.memtable_mb << 20) as usize
    }

    pub fn cache_bytes(&self) -> usize {
        (self.cache_mib << 20) as usize
    }

    pub fn blob_file_bytes(&self) -> u64 {
        self.blob_file_mb << 20
    }
}

/// The command-line flag that sets each engine option `bench` and `serve` expose, so that an invalid
/// value is reported under the name the user typed rather than the engine's field name.
const OPTION_FLAGS: [(&str, &str); 10] = [
    ("memtable_size", "--memtable-mb"),
    ("block_cache_capacity", "--cache-mib"),
    ("blob_file_size", "--blob-file-mb"),
    ("min_blob_size", "--min-blob-size"),
    ("growth_factor", "--growth-factor"),
    ("gc.garbage_ratio", "--garbage-ratio"),
    ("gc.age_cutoff", "--age-cutoff"),
    ("gc.force_threshold", "--force-threshold"),
    ("cache_warming", "--warming"),
    ("lifetime.initial_ttl", "--lifetime-initial-ttl"),
];

/// An engine error with the option's field name replaced by its flag where there is one.
pub fn user_facing(e: engine::Error) -> anyhow::Error {
    match e {
        engine::Error::InvalidOptions { name, detail } => {
            // Combined names ("a/b/c") come from checks that cover several fields.
            let flags: Vec<&str> = name
                .split('/')
                .map(|n| {
                    OPTION_FLAGS
                        .iter()
                        .find(|(field, _)| *field == n)
                        .map_or(n, |(_, flag)| *flag)
                })
                .collect();
            anyhow!("invalid {}: {detail}", flags.join("/"))
        }
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::user_facing;

    #[test]
    fn field_names_become_flags() {
        let e = engine::Options {
            tree: engine::TreeOptions {
                memtable_size: 0,
                ..Default::default()
            },
            ..engine::Options::default()
        }
        .validate()
        .unwrap_err();
        let shown = user_facing(e).to_string();
        assert!(shown.starts_with("invalid --memtable-mb:"), "{shown}");
        let e = engine::Error::InvalidOptions {
            name: "level1_max_bytes/blob_file_size",
            detail: "sizes must be positive".into(),
        };
        assert_eq!(
            user_facing(e).to_string(),
            "invalid level1_max_bytes/--blob-file-mb: sizes must be positive"
        );
    }
}
