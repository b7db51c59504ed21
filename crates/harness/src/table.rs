//! Plain-text tables and human-readable numbers for the terminal.

use std::fmt::Write;

/// A table with a header row; the first column is left-aligned, the others right-aligned.
#[derive(Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Self {
        self.rows.push(cells.into_iter().map(Into::into).collect());
        self
    }

    pub fn render(&self) -> String {
        let ncols = self
            .rows
            .iter()
            .map(Vec::len)
            .chain(std::iter::once(self.header.len()))
            .max()
            .unwrap_or(0);
        let mut widths = vec![0usize; ncols];
        for row in std::iter::once(&self.header).chain(self.rows.iter()) {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let total: usize = widths.iter().sum::<usize>() + 2 * ncols.saturating_sub(1);
        let mut out = String::new();
        let line = |out: &mut String, row: &[String]| {
            let mut s = String::new();
            for (i, w) in widths.iter().enumerate() {
                let cell = row.get(i).map(String::as_str).unwrap_or("");
                if i > 0 {
                    s.push_str("  ");
                }
                if i == 0 {
                    let _ = write!(s, "{cell:<w$}");
                } else {
                    let _ = write!(s, "{cell:>w$}");
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(&mut out, &self.header);
        out.push_str(&"-".repeat(total));
        out.push('\n');
        for row in &self.rows {
            line(&mut out, row);
        }
        out
    }
}

/// Bytes in binary units with three significant digits: `512 B`, `4.00 KiB`, `1.50 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {}", UNITS[u])
}

/// A count with thousands separators: `1,234,567`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    // The first group has 1-3 digits, the others 3.
    let head = match s.len() % 3 {
        0 => 3.min(s.len()),
        r => r,
    };
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    out.push_str(&s[..head]);
    for group in s.as_bytes()[head..].chunks(3) {
        out.push(',');
        out.push_str(std::str::from_utf8(group).expect("ASCII digits"));
    }
    out
}

/// Microseconds shown in the unit that keeps them short: `850 us`, `12.3 ms`, `1.20 s`.
pub fn micros(us: f64) -> String {
    if us == 0.0 {
        "0".to_string()
    } else if us < 1000.0 {
        if us < 10.0 {
            format!("{us:.1} us")
        } else {
            format!("{us:.0} us")
        }
    } else if us < 1_000_000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{:.2} s", us / 1_000_000.0)
    }
}

/// A ratio like `1.23x`, or `-` when undefined.
pub fn times(x: f64) -> String {
    if x.is_finite() && x > 0.0 {
        format!("{x:.2}x")
    } else {
        "-".to_string()
    }
}

/// Operations per second: `12.3K/s`.
pub fn rate(ops_per_sec: f64) -> String {
    if ops_per_sec >= 1_000_000.0 {
        format!("{:.2}M/s", ops_per_sec / 1e6)
    } else if ops_per_sec >= 1000.0 {
        format!("{:.1}K/s", ops_per_sec / 1e3)
    } else {
        format!("{ops_per_sec:.0}/s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_aligned_columns() {
        let mut t = Table::new(["op", "count", "p99"]);
        t.row(["update", "1,000", "12 us"])
            .row(["read", "5", "1.2 ms"]);
        let s = t.render();
        let expected = "\
op      count     p99
---------------------
update  1,000   12 us
read        5  1.2 ms
";
        assert_eq!(s, expected);
    }

    #[test]
    fn short_rows_and_unicode_do_not_break_alignment() {
        let mut t = Table::new(["a", "b"]);
        t.row(["é", "1"]).row(["long name"]);
        let s = t.render();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[2], "é          1");
        assert_eq!(lines[3], "long name");
    }

    #[test]
    fn formats_numbers() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(4096), "4.00 KiB");
        assert_eq!(bytes(15 * 1024 * 1024 + 512 * 1024), "15.5 MiB");
        assert_eq!(bytes(300 << 30), "300 GiB");
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(micros(5.25), "5.2 us");
        assert_eq!(micros(850.0), "850 us");
        assert_eq!(micros(12_345.0), "12.3 ms");
        assert_eq!(micros(1_200_000.0), "1.20 s");
        assert_eq!(times(1.234), "1.23x");
        assert_eq!(times(f64::NAN), "-");
        assert_eq!(rate(12_345.0), "12.3K/s");
        assert_eq!(rate(2_500_000.0), "2.50M/s");
    }
}
