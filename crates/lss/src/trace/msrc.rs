//! MSRC Cambridge traces (SNIA IOTTA trace 388).
//!
//! Columns: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`; timestamp in
//! Windows filetime (100 ns ticks since 1601-01-01); Type `Read` or `Write`; offset and
//! size in bytes; response time in filetime ticks (ignored). The volume is
//! `Hostname_DiskNumber`. Times are converted to Unix microseconds.

use super::{fields, nonzero, sector_aligned, uint, Record};

/// Filetimes before 1970 mean the column is not a filetime.
const FILETIME_1970: u64 = 116_444_736_000_000_000;

pub fn parse(line: &str) -> Result<Record, String> {
    let f = fields(line, 7)?;
    let ticks = uint(f[0], "timestamp")?;
    if ticks < FILETIME_1970 {
        return Err(format!(
            "timestamp {ticks} is before 1970 as a Windows filetime (wrong unit?)"
        ));
    }
    let write = match f[3] {
        "Write" | "write" => true,
        "Read" | "read" => false,
        o => return Err(format!("Type `{o}` is neither Read nor Write")),
    };
    if f[1].is_empty() {
        return Err("empty Hostname".into());
    }
    let disk = uint(f[2], "DiskNumber")?;
    uint(f[6], "ResponseTime")?;
    Ok(Record {
        volume: format!("{}_{disk}", f[1]),
        write,
        offset: sector_aligned(uint(f[4], "offset")?, "offset")?,
        len: nonzero(sector_aligned(uint(f[5], "size")?, "size")?, "size")?,
        t_us: (ticks - FILETIME_1970) / 10,
    })
}

pub fn format(r: &Record) -> String {
    let (host, disk) = r.volume.rsplit_once('_').unwrap_or((&r.volume, "0"));
    let ty = if r.write { "Write" } else { "Read" };
    format!(
        "{},{host},{disk},{ty},{},{},0",
        r.t_us * 10 + FILETIME_1970,
        r.offset,
        r.len
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let r = parse("128166372003061629,hm,1,Write,3154152960,4096,1985").unwrap();
        assert_eq!(r.volume, "hm_1");
        assert_eq!((r.write, r.offset, r.len), (true, 3154152960, 4096));
        assert_eq!(r.t_us, 1172163600306162); // 2007-02-22, Unix microseconds
        let back = parse(&format(&r)).unwrap();
        assert_eq!(
            (back.volume, back.offset, back.t_us),
            (r.volume, r.offset, r.t_us)
        );
        assert!(parse("1000,hm,1,Write,0,4096,1")
            .unwrap_err()
            .contains("unit"));
        assert!(parse("128166372003061629,hm,1,Flush,0,4096,1")
            .unwrap_err()
            .contains("Type"));
    }
}
