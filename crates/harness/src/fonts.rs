//! The font every plot's text is drawn in, registered once for all of them.
//!
//! plotters is built without its system-font backend (which needs fontconfig headers at
//! build time); text is drawn with ab_glyph from a TrueType font compiled into the binary:
//! DejaVu Sans cut to the characters plots use (55 KB; its license and how it was cut are
//! in `fonts/LICENSE`), so that a plot never fails for want of a font on the machine.

use anyhow::{anyhow, Result};
use std::sync::OnceLock;

/// DejaVu Sans, Latin-1 and a few symbols.
const FONT: &[u8] = include_bytes!("../fonts/DejaVuSans-subset.ttf");

static REGISTERED: OnceLock<std::result::Result<(), String>> = OnceLock::new();

/// Registers "sans-serif" for plotters; call before drawing any text.
pub fn init_fonts() -> Result<()> {
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, FONT)
                .map_err(|_| "the embedded font is not a usable TrueType font".to_string())
        })
        .clone()
        .map_err(|e| anyhow!(e))
}

#[cfg(test)]
mod tests {
    use plotters::prelude::*;

    /// Text is drawn with the embedded font: a label leaves dark pixels on a white image.
    #[test]
    fn text_is_drawn_without_a_font_on_the_machine() {
        super::init_fonts().unwrap();
        let (w, h) = (200u32, 60u32);
        let mut buf = vec![0u8; (w * h * 3) as usize];
        {
            let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
            root.fill(&WHITE).unwrap();
            root.draw(&Text::new(
                "p99.9 \u{00b5}s \u{00d7}2",
                (5, 10),
                ("sans-serif", 24).into_font(),
            ))
            .unwrap();
            root.present().unwrap();
        }
        let dark = buf.chunks(3).filter(|p| p.iter().all(|&c| c < 128)).count();
        assert!(dark > 50, "{dark} dark pixels");
    }
}
