//! The font every plot's text is drawn in, registered once for all of them.
//!
//! plotters is built without its system-font backend (which needs fontconfig headers at
//! build time); text is drawn with ab_glyph from a TrueType file read once at run time.

use anyhow::{anyhow, Context, Result};
use std::sync::OnceLock;

/// Font files tried in order (Debian's fonts-dejavu-core, installed by `.ci/run`).
const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

static FONT: OnceLock<std::result::Result<(), String>> = OnceLock::new();

/// Registers "sans-serif" for plotters; call before drawing any text.
pub fn init_fonts() -> Result<()> {
    FONT.get_or_init(|| {
        let path = FONT_CANDIDATES
            .iter()
            .find(|p| std::path::Path::new(p).exists())
            .ok_or_else(|| {
                "no DejaVuSans.ttf found; install the fonts-dejavu-core package".to_string()
            })?;
        let bytes: &'static [u8] = Box::leak(
            std::fs::read(path)
                .with_context(|| format!("reading font {path}"))
                .map_err(|e| e.to_string())?
                .into_boxed_slice(),
        );
        plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, bytes)
            .map_err(|_| format!("{path} is not a usable TrueType font"))
    })
    .clone()
    .map_err(|e| anyhow!(e))
}
