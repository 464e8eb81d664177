//! `infopt build-engine` with the real TensorRT-RTX library from PyPI
//! (`tensorrt-rtx-cu13-libs`), on a machine without a GPU: engines are built ahead of
//! time, the kernel table comes from the builder's log, and the realized precision of
//! every placed node is checked against the request.
//!
//! The libraries are found as infopt finds them (`TENSORRT_RTX_LIB`, `$VIRTUAL_ENV`, the
//! repository's `.venv`). Without them these tests skip with a note, unless
//! `INFOPT_REQUIRE_TRT_RTX=1` (scripts/test.sh sets it after installing them), when a
//! missing library or a binary without built-in shims fails them.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{fixture, s, stderr};

fn rtx_lib_dir() -> Option<PathBuf> {
    let has = |d: &Path| d.join("libtensorrt_rtx.so.1").is_file();
    if let Some(d) = std::env::var_os("TENSORRT_RTX_LIB").map(PathBuf::from) {
        return has(&d).then_some(d);
    }
    let mut roots: Vec<PathBuf> = std::env::var_os("VIRTUAL_ENV")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    roots.push(Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv"));
    for root in roots {
        let Ok(entries) = std::fs::read_dir(root.join("lib")) else {
            continue;
        };
        for e in entries.flatten() {
            let d = e.path().join("site-packages/tensorrt_rtx_libs");
            if has(&d) {
                return Some(d);
            }
        }
    }
    None
}

/// The library folder, or `None` (after a note) when the test should skip.
fn rtx() -> Option<PathBuf> {
    match rtx_lib_dir() {
        Some(d) => Some(d),
        None if std::env::var_os("INFOPT_REQUIRE_TRT_RTX").is_some() => panic!(
            "INFOPT_REQUIRE_TRT_RTX is set but libtensorrt_rtx.so.1 was not found (pip install tensorrt-rtx-cu13-libs==1.7.1.116 into .venv, or set TENSORRT_RTX_LIB)"
        ),
        None => {
            eprintln!("skipping: TensorRT-RTX not installed (pip install tensorrt-rtx-cu13-libs)");
            None
        }
    }
}

fn build(lib: &Path, args: &[&str]) -> Output {
    common::infopt_command()
        .arg("build-engine")
        .args(args)
        .args(["--no-verify", "--runs", "0", "--json"])
        .env("TENSORRT_RTX_LIB", lib)
        .env("INFOPT_TRT_GPU", "0")
        .env_remove("INFOPT_TRT_SHIM")
        .output()
        .expect("run infopt")
}

fn report(o: &Output) -> serde_json::Value {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

fn error_line(o: &Output) -> String {
    let err: Vec<String> = stderr(o)
        .lines()
        .filter(|l| l.starts_with("error"))
        .map(str::to_string)
        .collect();
    assert_eq!(err.len(), 1, "one error line: {}", stderr(o));
    err[0].clone()
}

/// (kernel name, realized precision, fused ONNX nodes).
fn kernels(r: &serde_json::Value) -> Vec<(String, String, Vec<String>)> {
    r["engine"]["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["name"].as_str().unwrap().to_string(),
                l["precision"].as_str().unwrap().to_string(),
                l["onnx_nodes"]
                    .as_array()
                    .map(|a| a.iter().map(|n| n.as_str().unwrap().to_string()).collect())
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// The outcome of one node in the realized-precision report.
fn node<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["engine"]["realized_precision"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == name)
        .unwrap_or_else(|| panic!("{name} not in the report"))
}

fn kernel_of<'a>(
    ks: &'a [(String, String, Vec<String>)],
    name: &str,
) -> &'a (String, String, Vec<String>) {
    ks.iter()
        .find(|k| k.0 == name)
        .unwrap_or_else(|| panic!("no kernel {name}: {ks:?}"))
}

const CNN_SHAPES: &str = "input:1x3x32x32/4x3x32x32/8x3x32x32";

#[test]
fn fp32_cnn_with_a_dynamic_profile_builds_float_kernels_byte_identically() {
    let Some(lib) = rtx() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.engine"), dir.path().join("b.engine"));
    let model = fixture("cnn_bn_relu.onnx");
    let args = |out: &Path| {
        vec![
            s(&model).to_string(),
            "-o".into(),
            s(out).to_string(),
            "--workspace".into(),
            "1G".into(),
            "--shapes".into(),
            CNN_SHAPES.into(),
        ]
    };
    let argv: Vec<String> = args(&a);
    let r = report(&build(
        &lib,
        &argv.iter().map(String::as_str).collect::<Vec<_>>(),
    ));
    let e = &r["engine"];
    assert_eq!(e["flavor"], "TensorRT-RTX");
    assert_eq!(e["layer_source"], "build_log");
    assert_eq!(e["gpu"], false);
    assert_eq!(
        r["settings"]["profiles"][0]["max"],
        serde_json::json!([8, 3, 32, 32])
    );
    assert!(e["memory"]["max_scratch_bytes"].as_u64().unwrap() > 0);
    let ks = kernels(&r);
    // conv1 + bn1 + relu1 is one float convolution kernel, named after conv1.
    let conv1 = ks
        .iter()
        .find(|k| {
            k.2.contains(&"conv1/Conv".to_string()) && k.2.contains(&"relu1/Relu".to_string())
        })
        .unwrap_or_else(|| panic!("{ks:?}"));
    assert_eq!(conv1.1, "fp32");
    for k in &ks {
        assert!(k.1 == "fp32" || k.1 == "unknown", "{k:?}");
    }
    let rp = &e["realized_precision"];
    assert_eq!(rp["mismatched"], 0, "{rp}");
    assert!(rp["matched"].as_u64().unwrap() >= 10, "{rp}");
    assert_eq!(node(&r, "conv2/Conv")["outcome"], "match");
    // The same build twice gives the same bytes.
    let argv: Vec<String> = args(&b);
    report(&build(
        &lib,
        &argv.iter().map(String::as_str).collect::<Vec<_>>(),
    ));
    let (x, y) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert!(x.len() > 1000);
    assert!(x == y, "two builds of the same graph differ");
}

#[test]
fn fp16_transformer_keeps_the_softmax_override_unobservable_not_mismatched() {
    let Some(lib) = rtx() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.engine");
    let model = fixture("transformer_block.onnx");
    let r = report(&build(
        &lib,
        &[
            s(&model),
            "-o",
            s(&out),
            "--fp16",
            "--precision",
            "Softmax=fp32",
            "--shapes",
            "hidden:1x8x32/2x16x32/4x32x32",
            "--shapes",
            "attention_mask:1x8/2x16/4x32",
            "--gate",
            "realized_precision",
        ],
    ));
    let ks = kernels(&r);
    // Attention is one fused kernel: MatMuls, the Softmax and its Casts.
    let attn = ks
        .iter()
        .find(|k| k.2.contains(&"/attn/Softmax".to_string()))
        .unwrap_or_else(|| panic!("{ks:?}"));
    assert_eq!(attn.1, "fp16", "{attn:?}");
    let sm = node(&r, "/attn/Softmax");
    assert_eq!(sm["requested"], "fp32");
    assert_eq!(sm["overridden"], true);
    assert_eq!(sm["outcome"], "not_observable", "{sm}");
    // Everything else that was placed in half precision got it.
    let rp = &r["engine"]["realized_precision"];
    assert_eq!(rp["mismatched"], 0, "{rp}");
    let fp16 = rp["per_precision"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["requested"] == "fp16")
        .unwrap();
    assert!(fp16["matched"].as_u64().unwrap() >= 20, "{fp16}");
    assert!(out.is_file());
}

#[test]
fn calibrated_int8_cnn_gets_int8_convolutions_with_float_outputs() {
    let Some(lib) = rtx() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.engine");
    let model = fixture("cnn_bn_relu.onnx");
    let ranges = fixture("quantized/cnn_bn_relu.ranges.json");
    let r = report(&build(
        &lib,
        &[
            s(&model),
            "-o",
            s(&out),
            "--int8",
            "--ranges",
            s(&ranges),
            "--shapes",
            CNN_SHAPES,
        ],
    ));
    let ks = kernels(&r);
    let conv1 = kernel_of(&ks, "conv1/Conv_myl0_2");
    assert_eq!(
        conv1.1, "int8",
        "Int8 inputs and weights make an INT8 kernel: {conv1:?}"
    );
    let raw = r["engine"]["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "conv1/Conv_myl0_2")
        .unwrap();
    assert_eq!(raw["inputs"][0]["datatype"], "int8");
    assert_eq!(raw["outputs"][0]["datatype"], "fp32", "its output is Float");
    for conv in ["conv1/Conv", "conv2/Conv", "conv3/Conv", "fc/Gemm"] {
        let n = node(&r, conv);
        assert_eq!(
            (n["requested"].as_str(), n["outcome"].as_str()),
            (Some("int8"), Some("match")),
            "{n}"
        );
    }
    assert_eq!(r["engine"]["realized_precision"]["mismatched"], 0);
}

/// `--int8 --precision conv2/Conv=fp32` in a real engine: conv2 is asked for
/// and built in float32 while its neighbours are INT8 kernels, and the
/// realized-precision gate passes.
#[test]
fn int8_engine_keeps_the_overridden_conv_in_float32() {
    let Some(lib) = rtx() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.engine");
    let model = fixture("cnn_bn_relu.onnx");
    let ranges = fixture("quantized/cnn_bn_relu.ranges.json");
    let r = report(&build(
        &lib,
        &[
            s(&model),
            "-o",
            s(&out),
            "--int8",
            "--ranges",
            s(&ranges),
            "--precision",
            "conv2/Conv=fp32",
            "--shapes",
            CNN_SHAPES,
            "--gate",
            "realized_precision",
        ],
    ));
    let n = node(&r, "conv2/Conv");
    assert_eq!(
        (n["requested"].as_str(), n["overridden"].as_bool()),
        (Some("fp32"), Some(true)),
        "{n}"
    );
    assert_ne!(n["realized"], "int8", "{n}");
    let ks = kernels(&r);
    let conv2 = ks
        .iter()
        .find(|k| k.0.starts_with("conv2/Conv"))
        .unwrap_or_else(|| panic!("no kernel named after conv2/Conv: {ks:?}"));
    assert_eq!(conv2.1, "fp32", "{conv2:?}");
    for conv in ["conv1/Conv", "conv3/Conv", "fc/Gemm"] {
        let n = node(&r, conv);
        assert_eq!(
            (n["requested"].as_str(), n["outcome"].as_str()),
            (Some("int8"), Some("match")),
            "{n}"
        );
    }
    assert_eq!(r["engine"]["realized_precision"]["mismatched"], 0);
    assert!(out.is_file());
}

#[test]
fn refusals_are_one_line_and_leave_no_engine() {
    let Some(lib) = rtx() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.engine");
    let cnn = fixture("cnn_bn_relu.onnx");

    // A workspace below the scratch the build needs: how much, and the flag.
    let o = build(
        &lib,
        &[
            s(&cnn),
            "-o",
            s(&out),
            "--workspace",
            "1M",
            "--shapes",
            CNN_SHAPES,
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = error_line(&o);
    assert!(
        e.contains("--workspace 1M is too small: this build needs "),
        "{e}"
    );
    assert!(
        e.contains("bytes of scratch memory; raise it to at least --workspace 9M"),
        "{e}"
    );
    assert!(!out.exists());

    // ONNX Runtime-style Q/DQ (INT32 bias through DequantizeLinear).
    let ort = fixture("quantized/cnn_int8_onnxruntime.onnx");
    let o = build(
        &lib,
        &[s(&ort), "-o", s(&out), "--shapes", "input:1x3x32x32"],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let e = error_line(&o);
    assert!(e.contains("rejected node `conv1/Conv.bn1/BatchNormalization.bias_conv1/Conv_DequantizeLinear` (DequantizeLinear)"), "{e}");
    assert!(
        e.contains("ONNX Runtime-style Q/DQ") && e.contains("--target tensorrt"),
        "{e}"
    );
    assert!(!e.contains("cudaError"), "{e}");
    assert!(!out.exists());

    // A compute capability TensorRT-RTX does not target.
    let o = build(
        &lib,
        &[
            s(&cnn),
            "-o",
            s(&out),
            "--compute-capability",
            "86,90",
            "--shapes",
            CNN_SHAPES,
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = error_line(&o);
    assert!(
        e.contains("--compute-capability 90 is not supported by TensorRT-RTX 1.7"),
        "{e}"
    );
    assert!(e.contains("supported: 80, 86, 89, 120, 121"), "{e}");

    // A profile the model rejects (it fixes 32x32).
    let o = build(
        &lib,
        &[s(&cnn), "-o", s(&out), "--shapes", "input:1x3x64x64"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(error_line(&o).contains("input"), "{}", stderr(&o));
    assert!(!out.exists());

    // Given targets are what the engine is built for.
    let r = report(&build(
        &lib,
        &[
            s(&cnn),
            "-o",
            s(&out),
            "--compute-capability",
            "86,89,120",
            "--shapes",
            CNN_SHAPES,
        ],
    ));
    assert_eq!(
        r["engine"]["compute_capabilities"]["sm"],
        serde_json::json!([86, 89, 120])
    );
    assert_eq!(r["engine"]["compute_capabilities"]["explicit"], true);
}

#[test]
fn doctor_lists_tensorrt_rtx_with_its_version_and_targets() {
    let Some(lib) = rtx() else { return };
    let o = common::infopt_command()
        .args(["doctor", "--json"])
        .env("TENSORRT_RTX_LIB", &lib)
        .env_remove("INFOPT_TRT_SHIM")
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let item = r["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "TensorRT-RTX")
        .unwrap();
    assert_eq!(item["status"], "ok", "{item}");
    assert!(
        item["version"].as_str().unwrap().starts_with("1.7."),
        "{item}"
    );
    let detail = item["detail"].as_str().unwrap();
    assert!(detail.contains("built in (headers 1.7"), "{detail}");
    assert!(
        detail.contains("compute capabilities: 80, 86, 89, 120, 121"),
        "{detail}"
    );
    // TensorRT 11 is not installed here: missing, with the fix.
    let t11 = r["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "TensorRT 11")
        .unwrap();
    if t11["status"] == "missing" {
        assert!(
            t11["fix"]
                .as_str()
                .unwrap()
                .contains("pip install tensorrt-cu12"),
            "{t11}"
        );
    }
}
