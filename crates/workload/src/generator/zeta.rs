//! The generalized harmonic number zeta(n, theta) = sum_{i=1..n} i^-theta that normalizes a
//! Zipfian distribution.
//!
//! Summing term by term costs one `powf` per item: fine for a million items, hopeless for
//! the 10^10 items of the scrambled generator (YCSB pays minutes for that whenever theta is
//! not its precomputed 0.99). Above [`EXACT_LIMIT`] items we therefore sum the first
//! `EM_HEAD - 1` terms exactly and replace the tail by the Euler–Maclaurin formula
//!
//! ```text
//! sum_{i=m..n} f(i) = ∫_m^n f(x) dx + (f(m) + f(n)) / 2
//!                   + Σ_k B_2k / (2k)! · (f^(2k-1)(n) - f^(2k-1)(m)) + R
//! ```
//!
//! with f(x) = x^-theta, m = [`EM_HEAD`] and the corrections up to B_6. The derivatives of f
//! shrink like m^-(theta+2k), so the remainder is below 1e-20 for m = 1000: the result
//! agrees with exact summation to the last few bits of an f64 (and with YCSB's constant
//! zeta(10^10, 0.99) = 26.46902820178302 to 1e-12 relative; that constant itself carries
//! the round-off of ten billion additions).

/// Up to this many items, zeta is summed exactly (about a million `powf`, a few ms).
pub const EXACT_LIMIT: u64 = 1 << 20;

/// The Euler–Maclaurin tail starts at this term; the terms before it are summed exactly.
pub const EM_HEAD: u64 = 1000;

/// zeta(n, theta) for `theta` in `[0, 1)`; exact below [`EXACT_LIMIT`], Euler–Maclaurin above.
pub fn zeta(n: u64, theta: f64) -> f64 {
    if n <= EXACT_LIMIT {
        zeta_range(0, n, theta)
    } else {
        zeta_euler_maclaurin(n, theta)
    }
}

/// sum_{i=from+1..=to} i^-theta by direct summation: the increment from `from` to `to` items.
pub fn zeta_range(from: u64, to: u64, theta: f64) -> f64 {
    (from + 1..=to).map(|i| (i as f64).powf(-theta)).sum()
}

/// zeta(n, theta) with the tail from [`EM_HEAD`] on given by Euler–Maclaurin.
pub fn zeta_euler_maclaurin(n: u64, theta: f64) -> f64 {
    assert!(n >= EM_HEAD, "Euler-Maclaurin path needs n >= {EM_HEAD}");
    let head = zeta_range(0, EM_HEAD - 1, theta);
    let (m, x) = (EM_HEAD as f64, n as f64);
    let f = |t: f64| t.powf(-theta);
    // Odd derivatives of t^-theta: f' = -θ t^-(θ+1), f''' = -θ(θ+1)(θ+2) t^-(θ+3), ...
    let d1 = |t: f64| -theta * t.powf(-theta - 1.0);
    let c3 = theta * (theta + 1.0) * (theta + 2.0);
    let d3 = |t: f64| -c3 * t.powf(-theta - 3.0);
    let c5 = c3 * (theta + 3.0) * (theta + 4.0);
    let d5 = |t: f64| -c5 * t.powf(-theta - 5.0);
    let integral = (x.powf(1.0 - theta) - m.powf(1.0 - theta)) / (1.0 - theta);
    // Bernoulli numbers B2 = 1/6, B4 = -1/30, B6 = 1/42 over (2k)!.
    let tail = integral + (f(m) + f(x)) / 2.0 + (d1(x) - d1(m)) / 12.0 - (d3(x) - d3(m)) / 720.0
        + (d5(x) - d5(m)) / 30240.0;
    head + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel_err(a: f64, b: f64) -> f64 {
        ((a - b) / b).abs()
    }

    #[test]
    fn small_values_are_exact() {
        assert_eq!(zeta(1, 0.99), 1.0);
        assert!((zeta(2, 0.5) - (1.0 + 1.0 / 2f64.sqrt())).abs() < 1e-15);
        // theta = 0 counts the items.
        assert_eq!(zeta(1000, 0.0), 1000.0);
    }

    #[test]
    fn euler_maclaurin_agrees_with_exact_sum() {
        for theta in [0.0, 0.2, 0.5, 0.9, 0.99] {
            for n in [1000, 1001, 54_321, 1_000_000] {
                let exact = zeta_range(0, n, theta);
                let approx = zeta_euler_maclaurin(n, theta);
                assert!(
                    rel_err(approx, exact) < 1e-12,
                    "theta {theta} n {n}: {approx} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn euler_maclaurin_reproduces_ycsb_constant() {
        let z = zeta(10_000_000_000, 0.99);
        assert!(rel_err(z, 26.469_028_201_783_02) < 1e-10, "{z}");
    }

    #[test]
    fn range_sums_compose() {
        let whole = zeta_range(0, 5000, 0.9);
        let split = zeta_range(0, 1234, 0.9) + zeta_range(1234, 5000, 0.9);
        assert!(rel_err(split, whole) < 1e-13);
    }
}
