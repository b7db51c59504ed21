//! Tencent CBS traces (SNIA IOTTA trace 27917).
//!
//! Columns: `Timestamp,Offset,Size,IOType,VolumeID`; timestamp in seconds (the published
//! files use whole seconds; a decimal fraction with up to 6 digits is accepted so that
//! generated samples keep microsecond spacing); offset and size in 512-byte sectors;
//! IOType `0` = read, `1` = write.

use super::{fields, nonzero, uint, Record};

pub fn parse(line: &str) -> Result<Record, String> {
    let f = fields(line, 5)?;
    let t_us = seconds_to_us(f[0])?;
    let write = match f[3] {
        "1" => true,
        "0" => false,
        o => return Err(format!("IOType `{o}` is neither 0 (read) nor 1 (write)")),
    };
    if f[4].is_empty() {
        return Err("empty VolumeID".into());
    }
    Ok(Record {
        volume: f[4].to_string(),
        write,
        offset: uint(f[1], "offset (sectors)")? * 512,
        len: nonzero(uint(f[2], "size (sectors)")?, "size")? * 512,
        t_us,
    })
}

fn seconds_to_us(s: &str) -> Result<u64, String> {
    let bad = || format!("timestamp `{s}` is not a number of seconds");
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 6 || !frac.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let secs: u64 = int.parse().map_err(|_| bad())?;
    if secs > 10_000_000_000 {
        return Err(format!(
            "timestamp {secs} is too large for seconds (wrong unit?)"
        ));
    }
    let us: u64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<6}").parse().map_err(|_| bad())?
    };
    Ok(secs * 1_000_000 + us)
}

pub fn format(r: &Record) -> String {
    let t = if r.t_us % 1_000_000 == 0 {
        format!("{}", r.t_us / 1_000_000)
    } else {
        format!("{}.{:06}", r.t_us / 1_000_000, r.t_us % 1_000_000)
    };
    format!(
        "{t},{},{},{},{}",
        r.offset / 512,
        r.len.div_ceil(512),
        u8::from(r.write),
        r.volume
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let r = parse("1538323200,16,8,1,1063").unwrap();
        assert_eq!(
            (r.offset, r.len, r.write, r.t_us),
            (8192, 4096, true, 1_538_323_200_000_000)
        );
        assert_eq!(parse(&format(&r)).unwrap(), r);
        let r = parse("12.5,0,8,0,7").unwrap();
        assert_eq!((r.t_us, r.write), (12_500_000, false));
        assert_eq!(parse(&format(&r)).unwrap(), r);
        assert!(parse("1538323200000000,0,8,1,1")
            .unwrap_err()
            .contains("unit"));
        assert!(parse("1,0,8,2,1").unwrap_err().contains("IOType"));
        assert!(parse("x,0,8,1,1").unwrap_err().contains("seconds"));
    }
}
