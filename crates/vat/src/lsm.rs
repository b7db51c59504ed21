//! The original LSM-tree insert cost (O'Neil et al.), as restated in appendix B: the baseline
//! that VAT generalises, and the curves of Fig. 6(a).
//!
//! Per unit of inserted data, level `i` is read `f_i` times and written `f_i + 1` times for
//! the merge into it, and read once more for the merge out of it (none for the last read of
//! the in-memory level), so the page I/O rate is proportional to `2 * sum(f_i) + 2l - 1`
//! (Eq. 19). With `prod(f_i) = C` the optimum has equal factors `f = C^(1/l)` (Eq. 23), and
//! the cost becomes `2 l C^(1/l) + 2l - 1`.

use crate::error::Result;
use crate::optimum::lambert_w0;
use crate::params::{check_c, Shape};

/// `2 l f + 2l - 1` with `f = C^(1/l)` (Eq. 21 with equal growth factors).
pub fn cost(shape: &Shape) -> f64 {
    let (l, f) = (shape.levels(), shape.growth());
    2.0 * l * f + 2.0 * l - 1.0
}

/// Appendix B.1, exact: `l = ln C / (W(1/e) + 1)` and `f = e^(W(1/e) + 1)`, about 3.59.
///
/// The appendix then rounds `W(1/e)` to 0.5 and writes `f = e^(2/3)`; neither is right
/// (`W(1/e) = 0.2785`), so this function uses the exact value. Clamped to one level when
/// `C` is smaller than the optimal growth factor.
pub fn optimal_shape(c: f64) -> Result<Shape> {
    check_c(c)?;
    let x = 1.0 + lambert_w0(1.0 / std::f64::consts::E);
    let l = c.ln() / x;
    if l < 1.0 {
        return Shape::from_levels(c, 1.0);
    }
    Shape::from_levels(c, l)
}

/// Appendix B.1, simplified: minimising `l * f` alone gives `l = ln C` and `f = e`.
pub fn simplified_optimal_shape(c: f64) -> Result<Shape> {
    check_c(c)?;
    Shape::from_levels(c, c.ln().max(1.0))
}

/// Appendix B.2: under a fixed total size `S_0 + ... + S_l` the optimal growth factors are not
/// all equal. Given the last one, `f_l`, the others follow from the back:
/// `f_k = f_{k+1} + 1 / (f_{k+1} f_{k+2} ... f_{l-1})` (the empty product being 1, so
/// `f_{l-1} = f_l + 1`). Returns `[f_1, ..., f_l]`.
pub fn total_size_growth_factors(last: f64, levels: usize) -> Vec<f64> {
    let mut fs = vec![0.0; levels];
    if levels == 0 {
        return fs;
    }
    fs[levels - 1] = last;
    // `tail` is 1 / (f_{k+1} ... f_{l-1}) for the k being computed.
    let mut tail = 1.0;
    for k in (0..levels - 1).rev() {
        fs[k] = fs[k + 1] + tail;
        tail /= fs[k];
    }
    fs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(x: f64, want: f64, tol: f64) {
        assert!((x - want).abs() <= tol, "got {x}, want {want} ± {tol}");
    }

    #[test]
    fn closed_form_is_the_minimum_of_the_lsm_cost() {
        for c in [50.0, 1000.0, 1e5] {
            let best = optimal_shape(c).unwrap();
            close(best.growth(), 3.591_121, 1e-5);
            let at = |l: f64| cost(&Shape::from_levels(c, l).unwrap());
            for i in 0..3000 {
                let l = 1.0 + i as f64 * 0.005;
                assert!(at(best.levels()) <= at(l) + 1e-9, "C={c}, l={l}");
            }
        }
    }

    #[test]
    fn simplified_optimum_minimises_l_times_f() {
        let c = 1000.0;
        let s = simplified_optimal_shape(c).unwrap();
        close(s.growth(), std::f64::consts::E, 1e-12);
        let lf = |l: f64| l * c.powf(1.0 / l);
        assert!(lf(s.levels()) < lf(s.levels() * 0.98));
        assert!(lf(s.levels()) < lf(s.levels() * 1.02));
    }

    #[test]
    fn cost_at_integer_shape() {
        // l = 3, f = 10: 2*3*10 + 2*3 - 1.
        close(cost(&Shape::from_growth(1000.0, 10.0).unwrap()), 65.0, 1e-9);
    }

    #[test]
    fn appendix_b2_sequence() {
        // l = 5, f_5 = 10: 11.0998, 11.0991, 11.0909, 11, 10.
        let fs = total_size_growth_factors(10.0, 5);
        let want = [11.0998, 11.0991, 11.0909, 11.0, 10.0];
        for (got, want) in fs.iter().zip(want) {
            close(*got, want, 5e-5);
        }
        assert!(total_size_growth_factors(10.0, 0).is_empty());
        assert_eq!(total_size_growth_factors(7.0, 1), vec![7.0]);
    }
}
