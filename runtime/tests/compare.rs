//! Output agreement metrics on handcrafted vectors.

use half::f16;
use infopt_runtime::HostTensor;
use infopt_runtime::compare::{
    AgreementIssue, Tolerance, all_within_tolerance, compare_outputs, compare_tensors,
    compare_values,
};

const TOL: Tolerance = Tolerance {
    atol: 1e-3,
    rtol: 1e-2,
};

fn f32s(name: &str, shape: Vec<usize>, v: &[f32]) -> HostTensor {
    HostTensor::from_vec(shape, v.to_vec()).unwrap().named(name)
}

#[test]
fn identical_vectors_agree_exactly() {
    let a = compare_values("y", &[1.0, -2.0, 3.5], &[1.0, -2.0, 3.5], TOL);
    assert_eq!(
        (a.max_abs, a.max_rel, a.mismatches, a.elements),
        (0.0, 0.0, 0, 3)
    );
    assert!((a.cosine - 1.0).abs() < 1e-12);
    assert!(a.within_tolerance && a.issue.is_none());
}

#[test]
fn a_vector_against_itself_has_cosine_exactly_one() {
    // sqrt(na) * sqrt(nb) is an ulp off na for some of these (`compare A A`
    // reported 0.9999999999999999); sqrt(na * nb) is not.
    let mut state = 12345u64;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    for n in 1..200 {
        let v: Vec<f64> = (0..n).map(|_| next()).collect();
        let a = compare_values("y", &v, &v, TOL);
        assert_eq!(a.cosine, 1.0, "{v:?}");
    }
}

#[test]
fn diffs_and_tolerance() {
    // b = reference. Diffs: 0.0005 (ok by atol), 0.05 at |b|=10 (ok: 1e-3 + 0.1),
    // 0.5 at |b|=1 (mismatch).
    let a = compare_values("y", &[1.0005, 10.05, 1.5], &[1.0, 10.0, 1.0], TOL);
    assert!((a.max_abs - 0.5).abs() < 1e-12, "{a:?}");
    assert!((a.max_rel - 0.5).abs() < 1e-12, "{a:?}");
    assert_eq!(a.mismatches, 1);
    assert!(!a.within_tolerance);
    assert!(a.cosine > 0.99 && a.cosine < 1.0);
}

#[test]
fn relative_diff_against_zero_uses_the_floor() {
    let a = compare_values("y", &[1e-6], &[0.0], TOL);
    assert!((a.max_rel - 1e-6 / infopt_runtime::compare::REL_FLOOR).abs() < 1e-3);
    assert!(a.within_tolerance, "1e-6 is within atol");
}

#[test]
fn cosine_edge_cases() {
    assert_eq!(
        compare_values("z", &[0.0, 0.0], &[0.0, 0.0], TOL).cosine,
        1.0
    );
    assert_eq!(
        compare_values("z", &[0.0, 0.0], &[1.0, 0.0], TOL).cosine,
        0.0
    );
    let opposite = compare_values("z", &[1.0, -2.0], &[-1.0, 2.0], TOL);
    assert!((opposite.cosine + 1.0).abs() < 1e-12);
    let orthogonal = compare_values("z", &[1.0, 0.0], &[0.0, 1.0], TOL);
    assert!(orthogonal.cosine.abs() < 1e-12);
    let empty = compare_values("z", &[], &[], TOL);
    assert_eq!(
        (empty.elements, empty.cosine, empty.within_tolerance),
        (0, 1.0, true)
    );
}

#[test]
fn nan_handling() {
    let nan = f64::NAN;
    // NaN at the same position is equal.
    let a = compare_values("y", &[nan, 1.0], &[nan, 1.0], TOL);
    assert!(
        a.within_tolerance && a.mismatches == 0 && a.nan_mismatches == 0,
        "{a:?}"
    );
    assert!((a.cosine - 1.0).abs() < 1e-12);
    // NaN against a number, either way round, is a mismatch that does not poison the max.
    let a = compare_values("y", &[nan, 1.0, 2.0], &[0.0, 1.0, 2.5], TOL);
    assert_eq!((a.mismatches, a.nan_mismatches), (2, 1));
    assert!((a.max_abs - 0.5).abs() < 1e-12 && !a.max_abs.is_nan());
    let a = compare_values("y", &[3.0], &[nan], TOL);
    assert_eq!((a.mismatches, a.nan_mismatches), (1, 1));
    assert!(!a.within_tolerance && !a.cosine.is_nan());
}

#[test]
fn infinities() {
    let inf = f64::INFINITY;
    let a = compare_values("y", &[inf, -inf], &[inf, -inf], TOL);
    assert!(a.within_tolerance && a.max_abs == 0.0, "{a:?}");
    let a = compare_values("y", &[1.0], &[inf], TOL);
    assert!(!a.within_tolerance && a.max_abs.is_infinite(), "{a:?}");
    let a = compare_values("y", &[inf], &[-inf], TOL);
    assert_eq!(a.mismatches, 1);
}

#[test]
fn shape_and_dtype_mismatches_are_reported_as_such() {
    let a = f32s("y", vec![2, 3], &[0.0; 6]);
    let b = f32s("y", vec![3, 2], &[0.0; 6]);
    let r = compare_tensors("y", &a, &b, TOL);
    assert_eq!(
        r.issue,
        Some(AgreementIssue::ShapeMismatch {
            actual: vec![2, 3],
            expected: vec![3, 2]
        })
    );
    assert!(!r.within_tolerance);
    assert_eq!(r.elements, 0);

    // f16 against an f32 reference: numbers computed, issue reported, never within tolerance.
    let h = HostTensor::from_vec(vec![2], vec![f16::from_f32(0.5), f16::from_f32(1.0)]).unwrap();
    let r = compare_tensors("y", &h, &f32s("y", vec![2], &[0.5, 1.0]), TOL);
    assert!(
        matches!(r.issue, Some(AgreementIssue::DTypeMismatch { .. })),
        "{r:?}"
    );
    assert_eq!((r.max_abs, r.elements), (0.0, 2));
    assert!(!r.within_tolerance);
}

#[test]
fn integer_and_bool_outputs() {
    let a = HostTensor::from_vec(vec![3], vec![1i64, 2, 3]).unwrap();
    let b = HostTensor::from_vec(vec![3], vec![1i64, 2, 4]).unwrap();
    let r = compare_tensors(
        "ids",
        &a,
        &b,
        Tolerance {
            atol: 0.0,
            rtol: 0.0,
        },
    );
    assert_eq!((r.mismatches, r.max_abs), (1, 1.0));
    let m = HostTensor::from_vec(vec![2], vec![true, false]).unwrap();
    assert!(
        compare_tensors(
            "m",
            &m,
            &m,
            Tolerance {
                atol: 0.0,
                rtol: 0.0
            }
        )
        .within_tolerance
    );
}

#[test]
fn output_sets_match_by_name() {
    let actual = vec![
        f32s("b", vec![1], &[2.0]),
        f32s("a", vec![1], &[1.0]),
        f32s("extra", vec![1], &[0.0]),
    ];
    let expected = vec![
        f32s("a", vec![1], &[1.0]),
        f32s("b", vec![1], &[2.0]),
        f32s("gone", vec![1], &[0.0]),
    ];
    let r = compare_outputs(&actual, &expected, TOL);
    let names: Vec<&str> = r.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "gone", "extra"]);
    assert!(r[0].within_tolerance && r[1].within_tolerance);
    assert_eq!(r[2].issue, Some(AgreementIssue::MissingActual));
    assert_eq!(r[3].issue, Some(AgreementIssue::MissingExpected));
    assert!(!all_within_tolerance(&r));
    assert!(all_within_tolerance(&r[..2]));
}

#[test]
fn agreement_serializes() {
    let r = compare_values("y", &[1.0], &[1.0], TOL);
    // serde derive is in place (the CLI serializes reports with serde_json).
    fn assert_serialize<T: serde::Serialize>(_: &T) {}
    assert_serialize(&r);
    assert_serialize(&Some(AgreementIssue::ShapeMismatch {
        actual: vec![],
        expected: vec![1],
    }));
}

/// The inputs and expected output of ONNX's `pytorch-operator/
/// test_operator_add_broadcast` (float64, values up to 6e199): squares of
/// such values overflow f64, and an exact result read "cosine NaN".
#[test]
fn huge_float64_values_compare_without_overflow() {
    let y = [
        6.9464889005823e-310,
        6.9464868025533e-310,
        6.9465675011827e-310,
        2.417824703940019e+198,
        3.1049478972545534e+169,
        5.8568940091729575e+199,
    ];
    let a = compare_values("y", &y, &y, TOL);
    assert_eq!(a.max_abs, 0.0);
    assert!((a.cosine - 1.0).abs() < 1e-12, "{a:?}");
    assert!(a.snr_db.is_infinite() && a.within_tolerance);
    // A real difference at that scale still shows in the cosine.
    let mut off = y;
    off[5] = -off[5];
    let b = compare_values("y", &off, &y, TOL);
    assert!(b.cosine < 0.0 && b.cosine.is_finite(), "{b:?}");
    assert!(b.snr_db.is_finite(), "{b:?}");
    // 1e223, squared in any order, is past f64's range.
    let c = compare_values("y", &[1e223, 2e223], &[1e223, 2e223], TOL);
    assert!((c.cosine - 1.0).abs() < 1e-12, "{c:?}");
}
