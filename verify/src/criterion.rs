//! When two outputs "agree".
//!
//! The default is scale-aware: the largest absolute difference relative to
//! the reference output's magnitude, together with the cosine similarity.
//! Folding a BatchNorm into a Conv reassociates float sums; on an output
//! whose values reach 10, a difference of 7.6e-4 is 7.6e-5 of its scale:
//! correct, yet an element-wise rtol 1e-4 / atol 1e-5 test refuses it.
//! The element-wise test stays available (`--criterion elementwise`), and
//! reports show both.

use infopt_runtime::OutputAgreement;
use infopt_runtime::compare::Tolerance;
use serde::Serialize;

/// How outputs are judged.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Criterion {
    /// `max|a-b| <= max_scaled_error * max|b|` and `cosine >= min_cosine`,
    /// and no NaN/shape/dtype difference.
    Scaled {
        max_scaled_error: f64,
        min_cosine: f64,
    },
    /// Every element within `atol + rtol * |b|`.
    Elementwise { rtol: f64, atol: f64 },
}

/// The default scale-aware bounds: float32 rewrites that reassociate sums
/// (BN folding, MatMul+Add into Gemm) stay within about 1e-5 of the output's
/// scale even through deep networks; one weight off by 1.0 in a 16-channel
/// conv moves its output by 6e-4 of the scale (the test in
/// tests/cli_verify_policy.rs), and cosine alone would not see it (1 - 5e-8).
pub const DEFAULT_MAX_SCALED_ERROR: f64 = 1e-4;
pub const DEFAULT_MIN_COSINE: f64 = 0.9999;

impl Default for Criterion {
    fn default() -> Self {
        Criterion::Scaled {
            max_scaled_error: DEFAULT_MAX_SCALED_ERROR,
            min_cosine: DEFAULT_MIN_COSINE,
        }
    }
}

impl Criterion {
    /// The element-wise tolerance the comparison also computes (for
    /// `mismatches`): the configured one for `Elementwise`, the pipeline's
    /// rtol/atol otherwise.
    pub fn elementwise(&self, fallback: Tolerance) -> Tolerance {
        match *self {
            Criterion::Elementwise { rtol, atol } => Tolerance { rtol, atol },
            Criterion::Scaled { .. } => fallback,
        }
    }

    /// The error relative to the output's scale.
    pub fn scaled_error(a: &OutputAgreement) -> f64 {
        if a.max_abs == 0.0 {
            0.0
        } else {
            a.max_abs / a.scale.max(f64::MIN_POSITIVE)
        }
    }

    /// Sets `within_tolerance` by this criterion.
    pub fn judge(&self, a: &mut OutputAgreement) {
        let clean = a.issue.is_none() && a.nan_mismatches == 0;
        a.within_tolerance = clean
            && match *self {
                Criterion::Elementwise { .. } => a.mismatches == 0,
                Criterion::Scaled {
                    max_scaled_error,
                    min_cosine,
                } => {
                    a.max_abs.is_finite()
                        && Criterion::scaled_error(a) <= max_scaled_error
                        && a.cosine >= min_cosine
                }
            };
    }

    pub fn describe(&self) -> String {
        match self {
            Criterion::Scaled {
                max_scaled_error,
                min_cosine,
            } if max_scaled_error.is_finite() => {
                format!("max abs <= {max_scaled_error:e} x output scale and cosine >= {min_cosine}")
            }
            Criterion::Scaled { min_cosine, .. } => {
                format!("cosine >= {min_cosine} and finite values")
            }
            Criterion::Elementwise { rtol, atol } => {
                format!("every element within atol {atol:e} + rtol {rtol:e} x |expected|")
            }
        }
    }
}
