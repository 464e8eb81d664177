//! Models that declare dynamic dims as `dim_value: -1` (paddle2onnx does):
//! every command treats such a dim as dynamic, as onnx and ONNX Runtime do.

mod common;

use common::{fixture, infopt, s, stderr};

fn io_shapes(model: &std::path::Path) -> (serde_json::Value, serde_json::Value) {
    let o = infopt(&["inspect", s(model), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    (
        r["inputs"][0]["shape"].clone(),
        r["outputs"][0]["shape"].clone(),
    )
}

#[test]
fn inspect_shows_a_negative_dim_as_dynamic() {
    let model = fixture("paddle_dynamic.onnx");
    let (i, o) = io_shapes(&model);
    assert_eq!(i, serde_json::json!([null, 3, 48, 192]));
    assert_eq!(o, serde_json::json!([null, 2]));
    let out = infopt(&["inspect", s(&model)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[?, 3, 48, 192]"), "{text}");
    assert!(!text.contains("-1"), "{text}");
}

#[test]
fn input_shape_fixes_a_negative_dim() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cls.onnx");
    let o = infopt(&[
        "optimize",
        s(&fixture("paddle_dynamic.onnx")),
        "--input-shape",
        "x:1x3x48x192",
        "-o",
        s(&out),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(
        report.contains("fix-shapes: input 'x' dim 0 is now 1"),
        "{report}"
    );
    let (i, o) = io_shapes(&out);
    assert_eq!(i, serde_json::json!([1, 3, 48, 192]));
    assert_eq!(o, serde_json::json!([1, 2]));
}

#[test]
fn without_input_shape_the_dim_stays_dynamic() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cls.onnx");
    let o = infopt(&[
        "optimize",
        s(&fixture("paddle_dynamic.onnx")),
        "-o",
        s(&out),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (i, o) = io_shapes(&out);
    assert_eq!(i[0], serde_json::Value::Null);
    assert_eq!(o[0], serde_json::Value::Null);
}

#[test]
fn a_fixed_dim_is_still_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let o = infopt(&[
        "optimize",
        s(&fixture("paddle_dynamic.onnx")),
        "--input-shape",
        "x:1x3x32x192",
        "--no-verify",
        "-o",
        s(&tmp.path().join("cls.onnx")),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let last = err.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        "error: fix-shapes: input 'x' dim 2 is fixed at 48 in the model [?,3,48,192]; the shape given has 32"
    );
}
