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

/// The fewest units of an output's own resolution the scaled bound allows:
/// a float16 output cannot agree within 1e-4 of its scale when one ulp at
/// that scale is 9.8e-4 of it. A float16 Mistral step whose rewrite changed
/// only rounding (ONNX Runtime's fused kernels on the candidate) missed by
/// 1.1e-4.
pub const RESOLUTION_UNITS: f64 = 2.0;

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

    /// The scaled bound applied to `a`: `max_scaled_error`, or
    /// [`RESOLUTION_UNITS`] ulps of the output's type at its scale when that
    /// is more (float16, bfloat16).
    pub fn scaled_bound(max_scaled_error: f64, a: &OutputAgreement) -> f64 {
        max_scaled_error.max(RESOLUTION_UNITS * a.resolution)
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
                        && Criterion::scaled_error(a)
                            <= Criterion::scaled_bound(max_scaled_error, a)
                        && a.cosine >= min_cosine
                }
            };
    }

    /// Sets `within_tolerance` for a class map (an ArgMax's labels, see
    /// `evaluate::heads::label_outputs`): its values are class indices,
    /// whose differences and cosine mean nothing; what counts is how many
    /// labels differ. Under the scaled criterion at most `1 - min_cosine`
    /// of them may (float rounding flips a label whose two best classes tie
    /// to the last bits, and float16 flips more); elementwise, none.
    pub fn judge_labels(&self, a: &mut OutputAgreement) {
        let clean = a.issue.is_none() && a.nan_mismatches == 0;
        a.within_tolerance = clean
            && match *self {
                Criterion::Elementwise { .. } => a.mismatches == 0,
                // The slack absorbs `1 - 0.9999` being 9.99999e-5 in f64.
                Criterion::Scaled { min_cosine, .. } => {
                    a.mismatches as f64 <= (1.0 - min_cosine) * a.elements as f64 + 1e-6
                }
            };
    }

    /// Sets `within_tolerance` for an output whose values lie in a range
    /// fixed by the op that makes it (`range`: its magnitude, 1 for a
    /// probability), `reference_max` being the reference's largest
    /// magnitude on these inputs. When the reference never leaves the bottom
    /// `1 - min_cosine` of that range (a text detector fed noise scores about
    /// 1e-7 everywhere), the output carries nothing a cosine could judge: a
    /// float16 model's 1e-7 of rounding there reads as cosine 0.99. Such an
    /// output agrees when its error stays within that same sliver of the
    /// range; the cosine decides otherwise.
    pub fn judge_bounded(&self, a: &mut OutputAgreement, reference_max: f64, range: f64) {
        self.judge(a);
        if a.within_tolerance {
            return;
        }
        if let Criterion::Scaled {
            max_scaled_error,
            min_cosine,
        } = *self
        {
            let floor = (1.0 - min_cosine) * range;
            let clean = a.issue.is_none() && a.nan_mismatches == 0 && a.max_abs.is_finite();
            a.within_tolerance = clean
                && reference_max <= floor
                && a.max_abs <= floor
                && Criterion::scaled_error(a) <= Criterion::scaled_bound(max_scaled_error, a);
        }
    }

    /// True when `a` agrees although its cosine is below the target: see
    /// [`Criterion::judge_bounded`].
    pub fn passed_below_cosine(&self, a: &OutputAgreement) -> bool {
        match *self {
            Criterion::Scaled { min_cosine, .. } => a.within_tolerance && a.cosine < min_cosine,
            Criterion::Elementwise { .. } => false,
        }
    }

    /// One failing output for an error message: its figures, or what kind
    /// of difference it is when the values cannot be compared (a shape or
    /// type the original does not have reads "max abs 0, cosine 0" otherwise).
    pub fn failure_summary(a: &OutputAgreement) -> String {
        use infopt_runtime::compare::AgreementIssue as I;
        match &a.issue {
            Some(I::ShapeMismatch { actual, expected }) => format!(
                "{} (shape {actual:?} where the original's is {expected:?})",
                a.name
            ),
            Some(I::DTypeMismatch { actual, expected }) => format!(
                "{} (type {actual} where the original's is {expected})",
                a.name
            ),
            Some(I::MissingActual) => format!("{} (missing from the rewritten model)", a.name),
            Some(I::MissingExpected) => format!("{} (not an output of the original)", a.name),
            None => format!(
                "{} (max abs {:.3e}, {:.2e} of its scale, cosine {:.6}{})",
                a.name,
                a.max_abs,
                Criterion::scaled_error(a),
                a.cosine,
                if a.mismatches > 0 {
                    format!(", {} of {} elements differ", a.mismatches, a.elements)
                } else {
                    String::new()
                }
            ),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Criterion::Scaled {
                max_scaled_error,
                min_cosine,
            } if max_scaled_error.is_finite() => {
                format!(
                    "max abs <= {max_scaled_error:e} x output scale (at least {RESOLUTION_UNITS} ulps of a float16/bfloat16 output) and cosine >= {min_cosine}"
                )
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

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_runtime::compare::compare_values;

    fn fp16() -> Criterion {
        Criterion::Scaled {
            max_scaled_error: f64::INFINITY,
            min_cosine: 0.999,
        }
    }

    fn judged(reference: &[f64], candidate: &[f64], range: f64) -> bool {
        let tol = Tolerance {
            rtol: 2e-2,
            atol: 2e-2,
        };
        let mut a = compare_values("p", candidate, reference, tol);
        let reference_max = a.scale;
        a.scale = a.scale.max(range);
        fp16().judge_bounded(&mut a, reference_max, range);
        a.within_tolerance
    }

    #[test]
    fn a_class_map_is_judged_by_how_many_labels_differ() {
        // 10000 labels of 3 classes; the cosine of indices says nothing.
        let reference: Vec<f64> = (0..10_000).map(|i| (i % 3) as f64).collect();
        let flipped = |n: usize| {
            let mut c = reference.clone();
            for x in c.iter_mut().take(n) {
                *x = (*x + 1.0) % 3.0;
            }
            c
        };
        let tol = Tolerance {
            rtol: 1e-4,
            atol: 1e-5,
        };
        let judge = |criterion: Criterion, n: usize| {
            let mut a = compare_values("labels", &flipped(n), &reference, tol);
            assert_eq!(a.mismatches, n);
            criterion.judge_labels(&mut a);
            a.within_tolerance
        };
        // float16: at most 0.1% (10 of 10000).
        assert!(judge(fp16(), 10));
        assert!(!judge(fp16(), 11));
        // The float rewrites' bound (cosine 0.9999): one label in 10000.
        let float = Criterion::Scaled {
            max_scaled_error: DEFAULT_MAX_SCALED_ERROR,
            min_cosine: DEFAULT_MIN_COSINE,
        };
        assert!(judge(float, 1));
        assert!(!judge(float, 2));
        // Elementwise: none.
        let exact = Criterion::Elementwise {
            rtol: 0.0,
            atol: 0.0,
        };
        assert!(judge(exact, 0));
        assert!(!judge(exact, 1));
        let mut a = compare_values("labels", &flipped(3), &reference, tol);
        fp16().judge_labels(&mut a);
        assert!(Criterion::failure_summary(&a).ends_with(", 3 of 10000 elements differ)"));
    }

    #[test]
    fn a_bounded_output_left_near_zero_is_judged_by_its_absolute_error() {
        // Probabilities of 1e-7 rounded by a third: cosine about 0.97.
        let reference = [1.0e-7, 1.2e-7, 0.9e-7, 1.1e-7];
        let candidate = [1.3e-7, 0.9e-7, 0.6e-7, 1.1e-7];
        assert!(judged(&reference, &candidate, 1.0));
        // Without a known range the cosine decides.
        assert!(!judged(&reference, &candidate, 0.0));
        // An error beyond 0.1% of the range fails, however small the reference.
        assert!(!judged(&reference, &[2e-3, 1e-7, 1e-7, 1e-7], 1.0));
        // A reference that reaches into its range is judged by the cosine.
        assert!(!judged(&[0.9, 0.1, 0.0, 0.0], &[0.1, 0.9, 0.0, 0.0], 1.0));
        assert!(judged(&[0.9, 0.1, 0.0, 0.0], &[0.9, 0.1, 0.0, 0.0], 1.0));
    }

    #[test]
    fn a_half_precision_output_is_allowed_two_of_its_ulps_at_its_scale() {
        use infopt_runtime::DType;
        use infopt_runtime::compare::relative_resolution;
        let judge = |candidate: &[f64], dtype: DType| {
            let reference = [8.0, 1.0, -2.0, 0.5];
            let mut a = compare_values("y", candidate, &reference, Tolerance::default());
            a.resolution = relative_resolution(dtype);
            Criterion::default().judge(&mut a);
            a.within_tolerance
        };
        // 8.0 and 8.0078125 are one float16 ulp apart: 9.8e-4 of the scale.
        let one_ulp = [8.0078125, 1.0, -2.0, 0.5];
        assert!(judge(&one_ulp, DType::F16));
        // The same difference between float32 outputs is a real one.
        assert!(!judge(&one_ulp, DType::F32));
        // Four float16 ulps at the scale are more than rounding.
        assert!(!judge(&[8.03125, 1.0, -2.0, 0.5], DType::F16));
    }

    #[test]
    fn a_shape_difference_is_named_not_given_as_zero_figures() {
        let mut a = compare_values("logits", &[1.0, 2.0], &[1.0, 2.0], Tolerance::default());
        assert_eq!(
            Criterion::failure_summary(&a),
            "logits (max abs 0.000e0, 0.00e0 of its scale, cosine 1.000000)"
        );
        a.issue = Some(infopt_runtime::compare::AgreementIssue::ShapeMismatch {
            actual: vec![2, 5],
            expected: vec![2, 4],
        });
        assert_eq!(
            Criterion::failure_summary(&a),
            "logits (shape [2, 5] where the original's is [2, 4])"
        );
    }
}
