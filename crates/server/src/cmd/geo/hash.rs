//! Redis's geohash: the 52-bit integer a member's position is stored as (its sorted-set
//! score), the cells a search reads, and the distances it filters by.
//!
//! Hand-written because the encoding must be Redis's bit for bit, so that a score written
//! here is the score a Redis client (or Redis itself) computes for the same position and
//! a search returns the members Redis returns. The georust `geohash` crate encodes
//! base-32 strings over latitudes -90..90 only; Redis's score interleaves 26 bits of
//! latitude over the Web-Mercator range -85.05112878..85.05112878 (even bits) with 26
//! bits of longitude (odd bits), and its searches depend on Redis's own choice of cell
//! size and its eight neighbours (`geohash_helper.c`), which no crate provides.
//!
//! The arithmetic follows Redis's in its order of operations (a decoded cell's edges, the
//! bounding box, the haversine distance): the same doubles in give the same doubles out,
//! with the platform's `sin`/`cos`/`asin` as Redis's.

/// Bits per coordinate of a stored position (26 + 26 = 52, exact in a double).
pub const STEP_MAX: u8 = 26;
pub const LON_MIN: f64 = -180.0;
pub const LON_MAX: f64 = 180.0;
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
/// Redis's earth radius (the quadratic mean of WGS-84's).
pub const EARTH_RADIUS_M: f64 = 6372797.560856;
/// Half the earth's circumference in Web-Mercator metres (the largest cell).
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

fn deg_rad(d: f64) -> f64 {
    d * D_R
}

fn rad_deg(r: f64) -> f64 {
    r / D_R
}

/// A cell: `step` bits of each coordinate, interleaved (latitude in the even bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub bits: u64,
    pub step: u8,
}

/// A range of one coordinate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    pub min: f64,
    pub max: f64,
}

/// The ranges a score encodes (Web Mercator's latitudes).
const LON: Span = Span {
    min: LON_MIN,
    max: LON_MAX,
};
const LAT: Span = Span {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// The area a cell covers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Area {
    pub lon: Span,
    pub lat: Span,
}

/// The 32 bits of `v` moved to the even bit positions of a u64.
fn spread(v: u32) -> u64 {
    let mut x = v as u64;
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// The even bits of `x`, packed: [`spread`]'s inverse.
fn squash(x: u64) -> u32 {
    let mut x = x & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    (x | (x >> 16)) as u32
}

fn interleave(lat: u32, lon: u32) -> u64 {
    spread(lat) | (spread(lon) << 1)
}

/// (latitude, longitude) bits of an interleaved hash.
fn deinterleave(bits: u64) -> (u32, u32) {
    (squash(bits), squash(bits >> 1))
}

/// The cell of `step` bits holding (`lon`, `lat`) over the ranges `lon_r`, `lat_r`;
/// `None` outside the positions Redis can store or outside the ranges.
pub fn encode_in(lon_r: Span, lat_r: Span, lon: f64, lat: f64, step: u8) -> Option<Cell> {
    if step == 0 || step > 32 {
        return None;
    }
    let storable = (LON_MIN..=LON_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat);
    let in_ranges =
        (lat_r.min..=lat_r.max).contains(&lat) && (lon_r.min..=lon_r.max).contains(&lon);
    if !storable || !in_ranges {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_off = (lat - lat_r.min) / (lat_r.max - lat_r.min) * scale;
    let lon_off = (lon - lon_r.min) / (lon_r.max - lon_r.min) * scale;
    // Truncated, as C's conversion to uint32_t is (LAT_MAX itself gives 2^step, one past
    // the last cell, as in Redis).
    Some(Cell {
        bits: interleave(lat_off as u32, lon_off as u32),
        step,
    })
}

/// The cell of `step` bits of a position Redis can store.
pub fn encode(lon: f64, lat: f64, step: u8) -> Option<Cell> {
    encode_in(LON, LAT, lon, lat, step)
}

/// The score Redis stores for (`lon`, `lat`): its 26-bit cell (`None` outside
/// -180..180, -85.05112878..85.05112878).
pub fn score(lon: f64, lat: f64) -> Option<u64> {
    encode(lon, lat, STEP_MAX).map(align52)
}

/// The cell's bits as the top bits of a 52-bit score.
fn align52(c: Cell) -> u64 {
    c.bits << (52 - 2 * c.step as u32)
}

/// The area of `c` over the ranges `lon_r`, `lat_r`.
fn decode_in(lon_r: Span, lat_r: Span, c: Cell) -> Area {
    let (ilat, ilon) = deinterleave(c.bits);
    let cells = (1u64 << c.step) as f64;
    let (lat_scale, lon_scale) = (lat_r.max - lat_r.min, lon_r.max - lon_r.min);
    let edge = |i: u32, r: Span, scale: f64| r.min + (i as f64 * 1.0 / cells) * scale;
    Area {
        lat: Span {
            min: edge(ilat, lat_r, lat_scale),
            max: edge(ilat.wrapping_add(1), lat_r, lat_scale),
        },
        lon: Span {
            min: edge(ilon, lon_r, lon_scale),
            max: edge(ilon.wrapping_add(1), lon_r, lon_scale),
        },
    }
}

pub fn decode(c: Cell) -> Area {
    decode_in(LON, LAT, c)
}

/// The position a score stands for: the centre of its cell, within the storable range.
pub fn position(score: f64) -> (f64, f64) {
    let a = decode(Cell {
        bits: score as u64,
        step: STEP_MAX,
    });
    let lon = ((a.lon.min + a.lon.max) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((a.lat.min + a.lat.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// The standard 11-character geohash of a score, as `GEOHASH` answers: the position
/// encoded again over latitudes -90..90 (the usual geohash's), 52 bits in base 32 and a
/// last character `0`.
pub fn geohash_string(score: f64) -> String {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = position(score);
    let std_lat = Span {
        min: -90.0,
        max: 90.0,
    };
    let bits = encode_in(LON, std_lat, lon, lat, STEP_MAX).map_or(0, |c| c.bits);
    (0..11)
        .map(|i| {
            let idx = if i == 10 {
                0
            } else {
                (bits >> (52 - (i + 1) * 5)) & 0x1f
            };
            ALPHABET[idx as usize] as char
        })
        .collect()
}

/// `c` moved by `dlon` cells east and `dlat` cells north, wrapping around at the edges
/// of the `step`-bit grid (a coordinate that does not move keeps its bits as they are).
fn moved(c: Cell, dlon: i64, dlat: i64) -> Cell {
    let (mut lat, mut lon) = deinterleave(c.bits);
    let mask = (1u64 << c.step) - 1;
    if dlon != 0 {
        lon = ((lon as u64).wrapping_add(dlon as u64) & mask) as u32;
    }
    if dlat != 0 {
        lat = ((lat as u64).wrapping_add(dlat as u64) & mask) as u32;
    }
    Cell {
        bits: interleave(lat, lon),
        step: c.step,
    }
}

/// What a search covers: a circle of `radius`, or a box `width` x `height`, in units of
/// `conversion` metres, around `center` (lon, lat).
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub center: (f64, f64),
    pub conversion: f64,
    pub kind: ShapeKind,
}

#[derive(Clone, Copy, Debug)]
pub enum ShapeKind {
    Radius(f64),
    Box { width: f64, height: f64 },
}

/// The cell size (bits per coordinate) whose cells are about as large as `range_m`
/// around latitude `lat` (Redis's `geohashEstimateStepsByRadius`).
fn estimate_step(range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return STEP_MAX;
    }
    let (mut range, mut step) = (range_m, 1i32);
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    // Make sure the range is included in most of the base cases, and wider towards the
    // poles.
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, STEP_MAX as i32) as u8
}

impl Shape {
    /// The shape's bounding box: (min lon, min lat, max lon, max lat). The box's edges of
    /// longitude are taken on the side of the equator where it is wider.
    pub fn bounds(&self) -> [f64; 4] {
        let (lon, lat) = self.center;
        let (half_h, half_w) = match self.kind {
            ShapeKind::Radius(r) => (r, r),
            ShapeKind::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let (height, width) = (self.conversion * half_h, self.conversion * half_w);
        let lat_delta = rad_deg(height / EARTH_RADIUS_M);
        let lon_delta_top = rad_deg(width / EARTH_RADIUS_M / deg_rad(lat + lat_delta).cos());
        let lon_delta_bottom = rad_deg(width / EARTH_RADIUS_M / deg_rad(lat - lat_delta).cos());
        let d = if lat < 0.0 {
            lon_delta_bottom
        } else {
            lon_delta_top
        };
        [lon - d, lat - lat_delta, lon + d, lat + lat_delta]
    }

    /// The cells a search reads, in Redis's order (centre, north, south, east, west,
    /// north-east, north-west, south-east, south-west), `None` for those that cannot
    /// hold a match (Redis's `geohashCalculateAreasByShapeWGS84`).
    pub fn cells(&self) -> [Option<Cell>; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounds();
        let (lon, lat) = self.center;
        let mut radius_m = match self.kind {
            ShapeKind::Radius(r) => r,
            ShapeKind::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        };
        radius_m *= self.conversion;
        let mut step = estimate_step(radius_m, lat);
        let around = |step: u8| {
            let c = encode(lon, lat, step).expect("a search's centre is a storable position");
            let n = [
                c,
                moved(c, 0, 1),
                moved(c, 0, -1),
                moved(c, 1, 0),
                moved(c, -1, 0),
                moved(c, 1, 1),
                moved(c, -1, 1),
                moved(c, 1, -1),
                moved(c, -1, -1),
            ];
            (n, decode(c))
        };
        let (mut n, mut area) = around(step);
        // When the shape reaches past a neighbour (near an edge of the centre cell), one
        // step of larger cells covers it.
        let too_small = decode(n[1]).lat.max < max_lat
            || decode(n[2]).lat.min > min_lat
            || decode(n[3]).lon.max < max_lon
            || decode(n[4]).lon.min > min_lon;
        if step > 1 && too_small {
            step -= 1;
            (n, area) = around(step);
        }
        let mut out = n.map(Some);
        // Neighbours on a side the shape does not reach are left out.
        if step >= 2 {
            let mut drop = |idx: &[usize]| idx.iter().for_each(|&i| out[i] = None);
            if area.lat.min < min_lat {
                drop(&[2, 7, 8]);
            }
            if area.lat.max > max_lat {
                drop(&[1, 5, 6]);
            }
            if area.lon.min < min_lon {
                drop(&[4, 8, 6]);
            }
            if area.lon.max > max_lon {
                drop(&[3, 7, 5]);
            }
        }
        out
    }

    /// The distance in metres from the centre to (`lon`, `lat`) if that point is inside
    /// the shape.
    pub fn contains(&self, lon: f64, lat: f64) -> Option<f64> {
        let (x1, y1) = self.center;
        match self.kind {
            ShapeKind::Radius(r) => {
                let d = distance(x1, y1, lon, lat);
                (d <= r * self.conversion).then_some(d)
            }
            ShapeKind::Box { width, height } => {
                let (width_m, height_m) = (width * self.conversion, height * self.conversion);
                if lat_distance(lat, y1) > height_m / 2.0 {
                    return None;
                }
                if distance(lon, lat, x1, lat) > width_m / 2.0 {
                    return None;
                }
                Some(distance(x1, y1, lon, lat))
            }
        }
    }
}

/// The scores a cell's members have: `min` inclusive, `max` exclusive.
pub fn score_range(c: Cell) -> (f64, f64) {
    let next = Cell {
        bits: c.bits + 1,
        step: c.step,
    };
    (align52(c) as f64, align52(next) as f64)
}

/// The distance along a meridian.
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// The haversine great-circle distance in metres.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (lon1r, lon2r) = (deg_rad(lon1), deg_rad(lon2));
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scores from Redis 7.0's own test suite (tests/unit/geo.tcl, "Check geoset
    /// values", after "GEOADD multi add" and "GEOADD create").
    const NYC: &[(f64, f64, u64)] = &[
        (-74.0131604, 40.7126674, 1791873972053020),
        (-73.9903085, 40.7362513, 1791875485187452),
        (-73.9733487, 40.7648057, 1791875761332224),
        (-73.9564142, 40.7480973, 1791875796750882),
        (-73.9454966, 40.747533, 1791875804419201),
        (-73.9375699, 40.7498929, 1791875830079666),
        (-73.7858139, 40.6428986, 1791895905559723),
    ];

    #[test]
    fn scores_are_redis_scores() {
        for &(lon, lat, want) in NYC {
            assert_eq!(score(lon, lat), Some(want), "{lon},{lat}");
        }
        assert_eq!(score(-180.1, 0.0), None);
        assert_eq!(score(0.0, 85.06), None);
    }

    #[test]
    fn geohash_strings_are_redis_strings() {
        // geo.tcl's "GEOHASH is able to return geohash strings" (Wikipedia's example),
        // and redis.io's GEOHASH page (Palermo, Catania).
        for (lon, lat, want) in [
            (-5.6, 42.6, "ezs42e44yx0"),
            (13.361389, 38.115556, "sqc8b49rny0"),
            (15.087269, 37.502669, "sqdtr74hyu0"),
        ] {
            let s = score(lon, lat).unwrap() as f64;
            assert_eq!(geohash_string(s), want);
        }
    }

    #[test]
    fn positions_and_distances_are_redis_ones() {
        // redis.io's GEOPOS and GEODIST pages: Palermo and Catania as stored.
        let p = position(score(13.361389, 38.115556).unwrap() as f64);
        let c = position(score(15.087269, 37.502669).unwrap() as f64);
        assert_eq!(
            (format!("{:.17}", p.0), format!("{:.17}", p.1)),
            ("13.36138933897018433".into(), "38.11555639549629859".into())
        );
        assert_eq!(
            (format!("{:.17}", c.0), format!("{:.17}", c.1)),
            ("15.08726745843887329".into(), "37.50266842333162032".into())
        );
        let d = distance(p.0, p.1, c.0, c.1);
        assert_eq!(format!("{d:.4}"), "166274.1516");
        assert_eq!(format!("{:.4}", d / 1000.0), "166.2742");
        assert_eq!(format!("{:.4}", d / 1609.34), "103.3182");
    }

    #[test]
    fn interleaving_round_trips_and_neighbours_wrap() {
        for (lat, lon) in [
            (0u32, 0u32),
            (1, 0),
            (0, 1),
            (0x3ff_ffff, 0x155_5555),
            (u32::MAX, 7),
        ] {
            assert_eq!(deinterleave(interleave(lat, lon)), (lat, lon));
        }
        let c = Cell {
            bits: interleave(0, 3),
            step: 2,
        };
        // East of the last column is the first; south of the first row is the last.
        assert_eq!(deinterleave(moved(c, 1, 0).bits), (0, 0));
        assert_eq!(deinterleave(moved(c, 0, -1).bits), (3, 3));
        assert_eq!(deinterleave(moved(c, -1, 1).bits), (1, 2));
    }

    #[test]
    fn a_cells_score_range_holds_its_members() {
        for &(lon, lat, s) in NYC {
            for step in [1u8, 8, 17, 26] {
                let (min, max) = score_range(encode(lon, lat, step).unwrap());
                assert!(min <= s as f64 && (s as f64) < max, "{step}");
            }
        }
    }

    #[test]
    fn a_search_covers_its_shape() {
        // Every point within the radius falls in one of the cells searched.
        let shape = Shape {
            center: (-73.9798091, 40.7598464),
            conversion: 1000.0,
            kind: ShapeKind::Radius(3.0),
        };
        let cells = shape.cells();
        for &(lon, lat, s) in NYC {
            if shape.contains(lon, lat).is_some() {
                assert!(cells.iter().flatten().any(|&c| {
                    let (min, max) = score_range(c);
                    min <= s as f64 && (s as f64) < max
                }));
            }
        }
        assert_eq!(estimate_step(0.0, 0.0), STEP_MAX);
        assert_eq!(estimate_step(5e7, 0.0), 1);
    }
}
