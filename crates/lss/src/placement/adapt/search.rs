//! The threshold search of the ghost sets (paper 004 sec. 3.2).
//!
//! The ghost sets start on an exponentially growing window of thresholds (0, then one
//! segment doubling upwards). After the first decision the window switches to linear
//! steps from the lower neighbour of the best threshold up to its upper neighbour,
//! `T[k-1] ..= T[k+1]`, with a step of at least one segment. When the best threshold sits at an edge of a linear window,
//! WA is monotone over it, and the exponential window is reused from that edge so the
//! search can follow a workload that moved.

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Mode {
    Exponential,
    Linear,
}

#[derive(Clone, Debug)]
pub struct ThresholdSearch {
    thresholds: Vec<f64>,
    mode: Mode,
    unit: f64,
}

impl ThresholdSearch {
    /// `m` thresholds; `unit` is the segment size in blocks.
    pub fn new(m: usize, unit: f64) -> Self {
        let m = m.max(3);
        let thresholds = (0..m)
            .map(|i| {
                if i == 0 {
                    0.0
                } else {
                    unit * 2f64.powi(i as i32 - 1)
                }
            })
            .collect();
        ThresholdSearch {
            thresholds,
            mode: Mode::Exponential,
            unit,
        }
    }

    pub fn thresholds(&self) -> &[f64] {
        &self.thresholds
    }

    /// The threshold unit (one segment, in blocks).
    pub fn unit(&self) -> f64 {
        self.unit
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Takes the WA measured for each threshold, returns the best threshold and moves
    /// the window for the next epoch.
    pub fn step(&mut self, wa: &[f64]) -> f64 {
        assert_eq!(wa.len(), self.thresholds.len());
        let m = self.thresholds.len();
        // Ties go to the lower threshold: it keeps fewer blocks in the hot group.
        let k = (0..m)
            .min_by(|&a, &b| wa[a].total_cmp(&wa[b]).then(a.cmp(&b)))
            .unwrap();
        let t = &self.thresholds;
        let best = t[k];
        let at_edge = k == 0 || k == m - 1;
        if self.mode == Mode::Linear && at_edge {
            // Monotone: exponential window from the edge, in the direction of improvement.
            let base = best.max(self.unit);
            self.thresholds = if k == m - 1 {
                (0..m).map(|i| base * 2f64.powi(i as i32)).collect()
            } else {
                let mut v: Vec<f64> = (0..m)
                    .map(|i| base * 2f64.powi(i as i32 - (m as i32 - 2)))
                    .collect();
                v[0] = 0.0;
                v
            };
            self.mode = Mode::Exponential;
        } else {
            let lo = if k > 0 { t[k - 1] } else { 0.0 };
            let hi = if k + 1 < m { t[k + 1] } else { best * 2.0 };
            let step = ((hi - lo) / (m - 1) as f64).max(self.unit);
            self.thresholds = (0..m).map(|i| lo + step * i as f64).collect();
            self.mode = Mode::Linear;
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_then_linear_then_exponential_again() {
        let mut s = ThresholdSearch::new(8, 10.0);
        assert_eq!(
            s.thresholds(),
            &[0.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0]
        );
        // Best at 80: linear window over 40..=160, step (160-40)/7 ~ 17.1.
        let best = s.step(&[5.0, 4.0, 3.0, 2.5, 2.0, 2.2, 2.4, 3.0]);
        assert_eq!(best, 80.0);
        assert_eq!(s.mode(), Mode::Linear);
        let t = s.thresholds().to_vec();
        assert_eq!(t[0], 40.0);
        assert!((t.last().unwrap() - 160.0).abs() < 1e-9);
        assert!(t
            .windows(2)
            .all(|w| (w[1] - w[0] - (120.0 / 7.0)).abs() < 1e-9));
        // Monotone decreasing WA: best at the top edge, exponential from there.
        let top = *t.last().unwrap();
        let best = s.step(&[3.0, 2.9, 2.8, 2.7, 2.6, 2.5, 2.4, 2.3]);
        assert_eq!(best, top);
        assert_eq!(s.mode(), Mode::Exponential);
        assert_eq!(s.thresholds()[0], top);
        assert_eq!(s.thresholds()[1], 2.0 * top);
    }

    #[test]
    fn linear_step_is_at_least_one_segment() {
        let mut s = ThresholdSearch::new(8, 10.0);
        s.step(&[1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0]); // best 0
        let t = s.thresholds();
        assert_eq!(t[0], 0.0);
        assert!(t.windows(2).all(|w| w[1] - w[0] >= 10.0 - 1e-9));
    }

    #[test]
    fn edge_at_bottom_goes_exponential_downwards() {
        let mut s = ThresholdSearch::new(4, 10.0);
        s.step(&[3.0, 3.0, 1.0, 3.0]); // best 20, linear
        let low = s.thresholds()[0];
        s.step(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(s.mode(), Mode::Exponential);
        let t = s.thresholds();
        assert_eq!(t[0], 0.0);
        assert!(t.contains(&low.max(10.0)));
    }
}
