//! Output agreement between two runs (e.g. the original and the optimized model).
//!
//! Elements are compared in f64. `actual` is the run under test (a), `expected` the
//! reference (b):
//! - abs diff `|a - b|`, rel diff `|a - b| / max(|b|, REL_FLOOR)`;
//! - an element is within tolerance when `|a - b| <= atol + rtol * |b|`;
//! - NaN in both at the same position is equal; NaN against a number is a mismatch
//!   (counted in `mismatches` and `nan_mismatches`, kept out of the max diffs);
//! - equal infinities are equal; an infinity against anything else is a mismatch with an
//!   infinite diff;
//! - cosine similarity over the elements where both sides are finite; two all-zero vectors
//!   have cosine 1, one all-zero vector against a non-zero one has cosine 0.
//!
//! A shape or dtype difference is reported in `issue`. A dtype difference with equal shapes
//! still gets its numbers (an f16 output against an f32 reference is the normal case
//! after a precision change) but is never `within_tolerance`.

use serde::Serialize;

use crate::tensor::{DType, HostTensor};

/// Denominator floor of the relative difference.
pub const REL_FLOOR: f64 = 1e-12;

/// Absolute and relative tolerance: `|a - b| <= atol + rtol * |b|`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tolerance {
    pub atol: f64,
    pub rtol: f64,
}

impl Tolerance {
    /// The tolerance actually applied to outputs of `dtype`: the requested one,
    /// widened to about one unit in the last place for half-precision types
    /// (1e-5 is far below a float16 ulp, so two correct float16 computations
    /// that round once differently would otherwise "disagree").
    pub fn for_dtype(self, dtype: DType) -> Tolerance {
        let (atol, rtol) = match dtype {
            // float16: 10 mantissa bits, ulp/|x| <= 2^-10.
            DType::F16 => (1e-3, 1e-3),
            // bfloat16: 7 mantissa bits, ulp/|x| <= 2^-7.
            DType::BF16 => (1e-2, 8e-3),
            _ => (0.0, 0.0),
        };
        Tolerance {
            atol: self.atol.max(atol),
            rtol: self.rtol.max(rtol),
        }
    }
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance {
            atol: 1e-4,
            rtol: 1e-3,
        }
    }
}

/// The spacing of representable values relative to their magnitude (one
/// ulp of a value just above a power of two): 2^-10 for float16, 2^-7 for
/// bfloat16, 0 for wider types, whose rounding lies far below every
/// tolerance here.
pub fn relative_resolution(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
        _ => 0.0,
    }
}

/// Why two outputs could not be compared element by element, or differ in kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AgreementIssue {
    /// Present in the reference, absent from the run under test.
    MissingActual,
    /// Present in the run under test, absent from the reference.
    MissingExpected,
    ShapeMismatch {
        actual: Vec<usize>,
        expected: Vec<usize>,
    },
    DTypeMismatch {
        actual: DType,
        expected: DType,
    },
}

/// Agreement of one output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputAgreement {
    pub name: String,
    /// Largest `|a - b|` (0 when no element compares; infinite when an infinity meets a
    /// different value).
    pub max_abs: f64,
    /// Largest `|a - b| / max(|b|, REL_FLOOR)`.
    pub max_rel: f64,
    /// Cosine similarity of the finite elements, in [-1, 1].
    pub cosine: f64,
    /// Largest finite `|b|`: the reference's scale, for errors judged
    /// relative to the output's magnitude.
    pub scale: f64,
    /// Signal-to-noise ratio in dB, `10 log10(sum b^2 / sum (a - b)^2)` over
    /// the finite elements (infinite when they are equal).
    pub snr_db: f64,
    /// Elements outside `atol + rtol * |b|`, NaN mismatches included.
    pub mismatches: usize,
    /// Elements where exactly one side is NaN.
    pub nan_mismatches: usize,
    /// Elements compared (0 when shapes differ).
    pub elements: usize,
    pub within_tolerance: bool,
    /// The tolerance applied (the requested one, widened for float16/bfloat16).
    pub atol: f64,
    pub rtol: f64,
    /// The reference's [`relative_resolution`]: a float16 output cannot
    /// agree more closely than its own ulps.
    pub resolution: f64,
    /// Set when the outputs differ in kind (missing, shape, dtype).
    pub issue: Option<AgreementIssue>,
}

impl OutputAgreement {
    fn with_issue(name: &str, issue: AgreementIssue) -> OutputAgreement {
        OutputAgreement {
            name: name.to_string(),
            max_abs: 0.0,
            max_rel: 0.0,
            cosine: 0.0,
            scale: 0.0,
            snr_db: f64::NEG_INFINITY,
            mismatches: 0,
            nan_mismatches: 0,
            elements: 0,
            within_tolerance: false,
            atol: 0.0,
            rtol: 0.0,
            resolution: 0.0,
            issue: Some(issue),
        }
    }
}

/// Compares one output against its reference.
pub fn compare_tensors(
    name: &str,
    actual: &HostTensor,
    expected: &HostTensor,
    tol: Tolerance,
) -> OutputAgreement {
    if actual.shape() != expected.shape() {
        return OutputAgreement::with_issue(
            name,
            AgreementIssue::ShapeMismatch {
                actual: actual.shape().to_vec(),
                expected: expected.shape().to_vec(),
            },
        );
    }
    let tol = tol.for_dtype(expected.dtype());
    let mut agreement = compare_values(name, &actual.to_f64_vec(), &expected.to_f64_vec(), tol);
    agreement.atol = tol.atol;
    agreement.rtol = tol.rtol;
    agreement.resolution = relative_resolution(expected.dtype());
    if actual.dtype() != expected.dtype() {
        agreement.within_tolerance = false;
        agreement.issue = Some(AgreementIssue::DTypeMismatch {
            actual: actual.dtype(),
            expected: expected.dtype(),
        });
    }
    agreement
}

/// The cosine of two vectors from their dot product and squared norms;
/// two all-zero vectors have cosine 1, one against a non-zero one 0.
pub fn cosine_of(dot: f64, na: f64, nb: f64) -> f64 {
    if na == 0.0 && nb == 0.0 {
        return 1.0;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    (dot / sqrt_of_product(na, nb)).clamp(-1.0, 1.0)
}

/// `sqrt(a * b)` for `a, b > 0`, the denominator of a cosine or a
/// correlation: under one square root, `sqrt(a * a)` is `a` exactly in IEEE
/// arithmetic, so a vector against itself scores exactly 1, where
/// `sqrt(a) * sqrt(a)` can be an ulp off (`compare A A` reported
/// 0.9999999999999999). Where the product leaves f64's normal range, the
/// square roots are taken apart.
pub fn sqrt_of_product(a: f64, b: f64) -> f64 {
    let product = a * b;
    if product.is_normal() {
        product.sqrt()
    } else {
        a.sqrt() * b.sqrt()
    }
}

/// Compares two equally long value vectors (see the module doc for the rules).
pub fn compare_values(name: &str, a: &[f64], b: &[f64], tol: Tolerance) -> OutputAgreement {
    let elements = a.len().min(b.len());
    let (mut max_abs, mut max_rel) = (0f64, 0f64);
    let (mut mismatches, mut nan_mismatches) = (0usize, 0usize);
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    let mut scale = 0f64;
    let mut noise = 0f64;
    // Sums of squares overflow f64 for values past 1e154 (float64 outputs
    // reach 1e223 in ONNX's own tests): they are taken of the values divided
    // by the largest finite magnitude on either side, which cancels in the
    // cosine and the SNR.
    let unit = a
        .iter()
        .chain(b)
        .filter(|v| v.is_finite())
        .fold(0f64, |m, v| m.max(v.abs()));
    let unit = if unit > 0.0 { unit } else { 1.0 };
    for (&x, &y) in a.iter().zip(b) {
        if y.is_finite() {
            scale = scale.max(y.abs());
        }
        match (x.is_nan(), y.is_nan()) {
            (true, true) => continue,
            (true, false) | (false, true) => {
                mismatches += 1;
                nan_mismatches += 1;
                continue;
            }
            _ => {}
        }
        if x.is_finite() && y.is_finite() {
            let (xs, ys) = (x / unit, y / unit);
            dot += xs * ys;
            na += xs * xs;
            nb += ys * ys;
            noise += (xs - ys) * (xs - ys);
        }
        // Equal values (equal infinities included) differ by zero.
        let diff = if x == y { 0.0 } else { (x - y).abs() };
        let rel = if diff == 0.0 {
            0.0
        } else {
            diff / y.abs().max(REL_FLOOR)
        };
        max_abs = max_abs.max(diff);
        max_rel = max_rel.max(rel);
        let within = diff == 0.0
            || (x.is_finite() && y.is_finite() && diff <= tol.atol + tol.rtol * y.abs());
        if !within {
            mismatches += 1;
        }
    }
    let cosine = cosine_of(dot, na, nb);
    let mut agreement = OutputAgreement {
        name: name.to_string(),
        max_abs,
        max_rel,
        cosine,
        scale,
        snr_db: if noise == 0.0 {
            f64::INFINITY
        } else {
            10.0 * (nb / noise).log10()
        },
        mismatches,
        nan_mismatches,
        elements,
        within_tolerance: mismatches == 0,
        atol: tol.atol,
        rtol: tol.rtol,
        resolution: 0.0,
        issue: None,
    };
    if a.len() != b.len() {
        agreement.within_tolerance = false;
        agreement.issue = Some(AgreementIssue::ShapeMismatch {
            actual: vec![a.len()],
            expected: vec![b.len()],
        });
    }
    agreement
}

/// Compares two sets of outputs by name (tensors without a name are matched by
/// position, named `#i`). Reference order first, then outputs only the run under test has.
pub fn compare_outputs(
    actual: &[HostTensor],
    expected: &[HostTensor],
    tol: Tolerance,
) -> Vec<OutputAgreement> {
    fn key(t: &HostTensor, i: usize) -> String {
        t.name()
            .map(str::to_string)
            .unwrap_or_else(|| format!("#{i}"))
    }
    let actual_keys: Vec<String> = actual.iter().enumerate().map(|(i, t)| key(t, i)).collect();
    let expected_keys: Vec<String> = expected
        .iter()
        .enumerate()
        .map(|(i, t)| key(t, i))
        .collect();
    let mut out = Vec::with_capacity(expected.len());
    for (e, ek) in expected.iter().zip(&expected_keys) {
        match actual_keys.iter().position(|k| k == ek) {
            Some(i) => out.push(compare_tensors(ek, &actual[i], e, tol)),
            None => out.push(OutputAgreement::with_issue(
                ek,
                AgreementIssue::MissingActual,
            )),
        }
    }
    for ak in &actual_keys {
        if !expected_keys.contains(ak) {
            out.push(OutputAgreement::with_issue(
                ak,
                AgreementIssue::MissingExpected,
            ));
        }
    }
    out
}

/// True when every output agrees within tolerance.
pub fn all_within_tolerance(agreements: &[OutputAgreement]) -> bool {
    agreements.iter().all(|a| a.within_tolerance)
}
