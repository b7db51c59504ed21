//! Alibaba cloud block traces (github.com/alibaba/block-traces, `io_traces.csv`).
//!
//! Columns: `device_id,opcode,offset,length,timestamp`; opcode `R` or `W`; offset and
//! length in bytes; timestamp in microseconds.

use super::{fields, nonzero, sector_aligned, uint, Record};

pub fn parse(line: &str) -> Result<Record, String> {
    let f = fields(line, 5)?;
    let write = match f[1] {
        "W" | "w" => true,
        "R" | "r" => false,
        o => return Err(format!("opcode `{o}` is neither R nor W")),
    };
    if f[0].is_empty() {
        return Err("empty device_id".into());
    }
    Ok(Record {
        volume: f[0].to_string(),
        write,
        offset: sector_aligned(uint(f[2], "offset")?, "offset")?,
        len: nonzero(sector_aligned(uint(f[3], "length")?, "length")?, "length")?,
        t_us: uint(f[4], "timestamp")?,
    })
}

pub fn format(r: &Record) -> String {
    let op = if r.write { "W" } else { "R" };
    format!("{},{op},{},{},{}", r.volume, r.offset, r.len, r.t_us)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let r = parse("3,W,8192,4096,1577808000000123").unwrap();
        assert_eq!(
            (r.write, r.offset, r.len, r.t_us),
            (true, 8192, 4096, 1577808000000123)
        );
        assert_eq!(parse(&format(&r)).unwrap(), r);
        assert!(parse("3,X,0,4096,1").unwrap_err().contains("opcode"));
        assert!(parse("3,W,100,4096,1").unwrap_err().contains("512"));
        assert!(parse("3,W,0,4096").unwrap_err().contains("5"));
        assert!(parse("3,W,0,0,1").unwrap_err().contains("zero"));
    }
}
