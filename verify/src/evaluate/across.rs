//! Outputs of a few values per sample (a quality score, an age, a MOS
//! triple) judged by how each value follows the original's across samples.
//!
//! A cosine over every sample is dominated by such an output's common
//! offset: speechmos's PLCMOS scores of 1.6-2.5 reached a cosine of
//! 0.99995 in INT8 while their correlation with float32's across 100 clips
//! was 0.988 (0.031 MOS off on average, 13% of the scores' spread). The
//! correlation of each value with the original's across the judged samples
//! is what a user of the score sees, and it is held to the cosine target.

/// Outputs with at most this many values per sample are judged across
/// samples (beyond that a sample's own values vary, and the cosine sees it).
pub const MOST_VALUES: usize = 16;

/// Fewer judged samples than this say nothing about a correlation.
pub const FEWEST_SAMPLES: usize = 4;

/// A value whose spread across samples is below this share of its level is
/// a constant up to float32's rounding (a norm that is always 1): its
/// correlation is that of rounding noise, and the cosine judges it.
const LEAST_SPREAD: f64 = 1e-5;

/// Running sums for one value position, shifted by the original's first
/// value so a large common offset does not cancel away the spread.
#[derive(Default, Clone)]
struct Moments {
    shift: f64,
    /// Sums of the original's `y`, the candidate's `x` and `u`, the
    /// candidate with its error times the unseen factor.
    y: f64,
    yy: f64,
    x: f64,
    xx: f64,
    xy: f64,
    u: f64,
    uu: f64,
    uy: f64,
    level: f64,
    not_finite: bool,
}

/// Positions of a regression output (see [`Across::regression`]) whose
/// spread across samples is below this share of the median position's are
/// left to the cosine: MediaPipe pose's 195 values hold the depth and
/// visibility of auxiliary points that vary by 0.03 where the coordinates
/// vary by 13 px, and their correlation is that of noise (-1.0 on 8
/// samples with every layer in INT8).
const FLAT_SHARE: f64 = 0.01;

/// The per-position sums of one output over the samples seen.
#[derive(Default, Clone)]
pub struct Across {
    per: Vec<Moments>,
    samples: usize,
    /// The output's size changed between samples: not judged this way.
    mixed: bool,
    /// Positions varying less than this share of the median position are
    /// not judged (0: every position that varies at all).
    flat_share: f64,
}

/// Pearson correlation from shifted sums over `n` samples (the original's
/// spread is checked by the caller); 0 when the candidate does not vary.
fn correlation(n: f64, (x, xx): (f64, f64), (y, yy): (f64, f64), xy: f64) -> f64 {
    let vx = n * xx - x * x;
    let vy = n * yy - y * y;
    if vx <= 0.0 {
        // The candidate is constant where the original varies.
        return 0.0;
    }
    let spread = infopt_runtime::compare::sqrt_of_product(vx, vy);
    ((n * xy - x * y) / spread).clamp(-1.0, 1.0)
}

impl Across {
    /// For a regression output of many values (coordinates beside depths
    /// and visibilities): positions nearly constant against the others
    /// are left to the cosine (see [`FLAT_SHARE`]).
    pub fn regression() -> Across {
        Across {
            flat_share: FLAT_SHARE,
            ..Across::default()
        }
    }

    /// One sample: the candidate's values `a`, the original's `b`; `factor`
    /// the error's multiple for the unseen estimate.
    pub fn add(&mut self, a: &[f64], b: &[f64], factor: f64) {
        if self.mixed {
            return;
        }
        if self.samples == 0 {
            self.per = b
                .iter()
                .map(|&y| Moments {
                    shift: if y.is_finite() { y } else { 0.0 },
                    ..Default::default()
                })
                .collect();
        }
        if a.len() != b.len() || b.len() != self.per.len() {
            self.mixed = true;
            return;
        }
        for ((m, &x), &y) in self.per.iter_mut().zip(a).zip(b) {
            if !x.is_finite() || !y.is_finite() {
                m.not_finite = true;
                continue;
            }
            let u = y + factor * (x - y);
            let (x, y, u) = (x - m.shift, y - m.shift, u - m.shift);
            m.level += (y + m.shift).abs();
            m.y += y;
            m.yy += y * y;
            m.x += x;
            m.xx += x * x;
            m.xy += x * y;
            m.u += u;
            m.uu += u * u;
            m.uy += u * y;
        }
        self.samples += 1;
    }

    /// The lowest correlation over the positions whose original varies:
    /// (measured, with the error times the factor); None when too few
    /// samples, no position varies, or the output is not one of a few
    /// values. A value that was not finite in either model correlates at
    /// NaN (the worst).
    pub fn lowest(&self) -> Option<(f64, f64)> {
        if self.mixed || self.samples < FEWEST_SAMPLES {
            return None;
        }
        let n = self.samples as f64;
        let spread_of = |m: &Moments| (n * m.yy - m.y * m.y).max(0.0).sqrt() / n;
        let flat = if self.flat_share > 0.0 {
            let mut spreads: Vec<f64> = self.per.iter().map(spread_of).collect();
            spreads.sort_by(f64::total_cmp);
            self.flat_share * spreads.get(spreads.len() / 2).copied().unwrap_or(0.0)
        } else {
            0.0
        };
        let mut out: Option<(f64, f64)> = None;
        for m in &self.per {
            if m.not_finite {
                return Some((f64::NAN, f64::NAN));
            }
            let spread = spread_of(m);
            if spread <= LEAST_SPREAD * (m.level / n) || spread == 0.0 || spread < flat {
                continue;
            }
            let r = correlation(n, (m.x, m.xx), (m.y, m.yy), m.xy);
            let ru = correlation(n, (m.u, m.uu), (m.y, m.yy), m.uy);
            out = Some(match out {
                Some((a, b)) => (a.min(r), b.min(ru)),
                None => (r, ru),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(pairs: &[(f64, f64)]) -> Across {
        let mut a = Across::default();
        for &(x, y) in pairs {
            a.add(&[x], &[y], 2.0);
        }
        a
    }

    #[test]
    fn an_offset_score_with_a_small_error_correlates_less_than_its_cosine_says() {
        // Scores about 2.0 with a spread of 0.2, off by +-0.05 in turn.
        let pairs: Vec<(f64, f64)> = (0..8)
            .map(|i| {
                let y = 2.0 + 0.2 * ((i as f64) * 1.3).sin();
                let e = if i % 2 == 0 { 0.05 } else { -0.05 };
                (y + e, y)
            })
            .collect();
        let (dot, nx, ny) = pairs.iter().fold((0.0, 0.0, 0.0), |(d, a, b), (x, y)| {
            (d + x * y, a + x * x, b + y * y)
        });
        let cosine = dot / (nx * ny).sqrt();
        assert!(cosine > 0.999, "{cosine}");
        let (r, unseen) = fill(&pairs).lowest().unwrap();
        assert!(r < 0.99 && r > 0.8, "{r}");
        assert!(unseen < r, "{unseen} {r}");
    }

    #[test]
    fn exact_values_correlate_at_one_and_a_shift_does_not_matter() {
        let pairs: Vec<(f64, f64)> = (0..6).map(|i| (1e4 + i as f64, 1e4 + i as f64)).collect();
        let (r, unseen) = fill(&pairs).lowest().unwrap();
        assert_eq!((r, unseen), (1.0, 1.0));
        // Exactly 1 for a model against itself: samples 0, 0, 1 spread by
        // 3 * 1 - 1 * 1 = 2, and sqrt(2) * sqrt(2) is 2.0000000000000004.
        assert_eq!(super::correlation(3.0, (1.0, 1.0), (1.0, 1.0), 1.0), 1.0);
        // A candidate off by a constant still follows the original.
        let shifted: Vec<(f64, f64)> = pairs.iter().map(|&(x, y)| (x + 3.0, y)).collect();
        assert!((fill(&shifted).lowest().unwrap().0 - 1.0).abs() < 1e-9);
    }

    #[test]
    fn too_few_samples_a_constant_or_a_size_change_are_not_judged() {
        assert_eq!(fill(&[(1.0, 1.0), (2.0, 2.0), (3.0, 3.0)]).lowest(), None);
        // The original constant up to rounding: skipped.
        let flat: Vec<(f64, f64)> = (0..8).map(|i| (5.0, 5.0 + 1e-6 * i as f64)).collect();
        assert_eq!(fill(&flat).lowest(), None);
        let mut a = fill(&[(1.0, 1.0), (2.0, 2.0), (3.0, 3.0), (4.0, 4.0)]);
        a.add(&[1.0, 2.0], &[1.0, 2.0], 2.0);
        assert_eq!(a.lowest(), None);
    }

    #[test]
    fn a_regression_leaves_its_nearly_constant_positions_to_the_cosine() {
        // Two coordinates varying by about 10, and a value varying by 0.03
        // that the candidate gets backwards.
        let mut plain = Across::default();
        let mut regression = Across::regression();
        for i in 0..8 {
            let t = i as f64;
            let b = [
                10.0 * (t * 0.9).sin(),
                20.0 + 10.0 * (t * 0.7).cos(),
                0.03 * (t % 2.0),
            ];
            let a = [b[0] + 0.01, b[1] - 0.01, 0.03 - b[2]];
            plain.add(&a, &b, 2.0);
            regression.add(&a, &b, 2.0);
        }
        assert!(plain.lowest().unwrap().0 < -0.99);
        assert!(regression.lowest().unwrap().0 > 0.999);
    }

    #[test]
    fn a_candidate_that_stops_varying_or_goes_nan_is_the_worst() {
        let flat: Vec<(f64, f64)> = (0..6).map(|i| (3.0, i as f64)).collect();
        assert_eq!(fill(&flat).lowest().unwrap().0, 0.0);
        let mut pairs: Vec<(f64, f64)> = (0..6).map(|i| (i as f64, i as f64)).collect();
        pairs[2].0 = f64::NAN;
        assert!(fill(&pairs).lowest().unwrap().0.is_nan());
    }
}
