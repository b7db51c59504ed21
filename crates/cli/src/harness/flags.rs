//! Engine option errors under the names users type: the engine names its fields
//! (`memtable_size`), the command line has flags (`--memtable-mb`).

use anyhow::anyhow;

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
            memtable_size: 0,
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
