//! Every precision override on every path: `optimize` and `build-engine
//! --emit-onnx` × FP16 / BF16 / INT8 × a node name, an op type, a regex, the
//! pipeline's `precision:` section, and an unknown name. Asserted on the
//! graph the command WROTE: the layer an override keeps in float32 has a
//! float32 weight (no DequantizeLinear in front of it under INT8, no
//! float16/bfloat16 initializer under FP16/BF16), while the layers it does
//! not select are converted in the same graph (or, for the op-type and
//! whole-set cases, in the run without the override). Unknown names and
//! overrides no pass makes exit 2 with one line naming them.
//!
//! build-engine's `--emit-onnx` writes the ONNX TensorRT would build, without
//! TensorRT. The numbers of the INT8 case in ONNX Runtime:
//! tests/interop/test_precision.py::test_int8_override_keeps_the_layer_float_in_ort.

mod common;

use std::path::Path;

use common::{fixture, infopt, s, stderr};
use infopt_ir::{DataType, Model};

const MODEL: &str = "cnn_bn_relu.onnx";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Cmd {
    Optimize,
    BuildEngine,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum P {
    Fp16,
    Bf16,
    Int8,
}

impl P {
    fn flags(self) -> Vec<&'static str> {
        match self {
            P::Fp16 => vec!["--fp16"],
            // Neither CPU runtime runs a bfloat16 Gemm (ONNX Runtime has no
            // kernel, tract no bfloat16 type): the graph is what is checked.
            P::Bf16 => vec!["--bf16", "--no-verify"],
            // Seeded random samples: the graph, not the accuracy, is asserted.
            P::Int8 => vec![
                "--int8",
                "--calib-data",
                "random:12",
                "--calib-samples",
                "8",
                "--held-out",
                "4",
            ],
        }
    }

    /// What a converted layer's weight is in the written graph.
    fn converted(self) -> &'static str {
        match self {
            P::Fp16 => "float16",
            P::Bf16 => "bfloat16",
            P::Int8 => "int8 (DequantizeLinear)",
        }
    }
}

const ALL: [(Cmd, P); 6] = [
    (Cmd::Optimize, P::Fp16),
    (Cmd::Optimize, P::Bf16),
    (Cmd::Optimize, P::Int8),
    (Cmd::BuildEngine, P::Fp16),
    (Cmd::BuildEngine, P::Bf16),
    (Cmd::BuildEngine, P::Int8),
];

/// Runs `cmd` on cnn_bn_relu with precision `p` and `extra` flags, writing to
/// `out`.
fn run(cmd: Cmd, p: P, extra: &[&str], out: &Path) -> std::process::Output {
    let model = fixture(MODEL);
    let mut args: Vec<&str> = match cmd {
        Cmd::Optimize => vec!["optimize", s(&model), "-o", s(out)],
        // The batch is a symbol: TensorRT needs it fixed (or profiles).
        Cmd::BuildEngine => vec![
            "build-engine",
            s(&model),
            "--emit-onnx",
            s(out),
            "--input-shape",
            "input:1x3x32x32",
        ],
    };
    args.extend(p.flags());
    args.extend_from_slice(extra);
    args.push("--json");
    infopt(&args)
}

/// The written graph's node `name`'s weight (input 1): "int8 (DequantizeLinear)"
/// when a DequantizeLinear produces it, else the element type of the constant.
fn weight(m: &Model, name: &str) -> String {
    let g = &m.graph;
    let id = g
        .find_node(name)
        .unwrap_or_else(|| panic!("no node '{name}' in the written graph"));
    let mut w = g.node(id).inputs[1].expect("a weight input");
    // Under --int8 --fp16 an INT8 weight reaches the layer as DQ -> Cast.
    // (Only that: a float32 constant Cast to float16 is a float16 weight.)
    if let Some(x) = g
        .producer(w)
        .filter(|p| p.op_type == "Cast")
        .and_then(|c| c.inputs[0])
        && g.producer(x)
            .is_some_and(|p| p.op_type == "DequantizeLinear")
    {
        w = x;
    }
    if g.producer(w)
        .is_some_and(|p| p.op_type == "DequantizeLinear")
    {
        return "int8 (DequantizeLinear)".into();
    }
    match g.constant(w).map(|t| t.dtype()) {
        Some(DataType::Float) => "float32".into(),
        Some(DataType::Float16) => "float16".into(),
        Some(DataType::Bfloat16) => "bfloat16".into(),
        other => format!("{other:?} (not a constant?)"),
    }
}

/// Runs the case and loads what it wrote.
fn written(cmd: Cmd, p: P, extra: &[&str]) -> (Model, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.onnx");
    let o = run(cmd, p, extra, &out);
    assert!(
        o.status.success(),
        "{cmd:?} {p:?} {extra:?}: {}",
        stderr(&o)
    );
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON report");
    (Model::load(&out).expect("the written model loads"), r)
}

/// Without an override, cnn_bn_relu's fc/Gemm (and conv1/Conv, except in
/// bfloat16 at opset 17, where Conv has no bfloat16 form) are converted: the
/// control that makes every "stays float32" below able to fail.
#[test]
fn without_an_override_the_layers_are_converted() {
    for (cmd, p) in ALL {
        let (m, _) = written(cmd, p, &[]);
        assert_eq!(weight(&m, "fc/Gemm"), p.converted(), "{cmd:?} {p:?}");
        if p != P::Bf16 {
            assert_eq!(weight(&m, "conv2/Conv"), p.converted(), "{cmd:?} {p:?}");
        }
    }
}

/// A node name, an op type and a regex select fc/Gemm: it stays float32 in
/// every command and precision.
#[test]
fn name_op_type_and_regex_keep_the_gemm_float32_everywhere() {
    for (cmd, p) in ALL {
        for sel in ["fc/Gemm=fp32", "Gemm=fp32", "f[a-z]/Ge.*=fp32"] {
            let (m, r) = written(cmd, p, &["--precision", sel]);
            assert_eq!(weight(&m, "fc/Gemm"), "float32", "{cmd:?} {p:?} {sel}");
            if p == P::Int8 {
                let q = &r["int8"];
                assert_eq!(
                    q["kept_by_user"],
                    serde_json::json!(["fc/Gemm (fp32)"]),
                    "{cmd:?} {sel}"
                );
                assert_eq!(q["kept_float"], serde_json::json!([]), "{cmd:?} {sel}");
                assert_eq!(weight(&m, "conv1/Conv"), p.converted(), "{cmd:?} {sel}");
            }
        }
    }
}

/// The case: `--int8 --precision conv2/Conv=fp32` keeps that Conv's
/// weight float32 (no DequantizeLinear) while its neighbours are INT8; an op
/// type keeps every Conv; a regex two of them. Both commands.
#[test]
fn int8_keeps_the_named_conv_out_and_quantizes_the_rest() {
    for cmd in [Cmd::Optimize, Cmd::BuildEngine] {
        let (m, r) = written(cmd, P::Int8, &["--precision", "conv2/Conv=fp32"]);
        assert_eq!(weight(&m, "conv2/Conv"), "float32", "{cmd:?}");
        for other in ["conv1/Conv", "conv3/Conv", "fc/Gemm"] {
            assert_eq!(
                weight(&m, other),
                "int8 (DequantizeLinear)",
                "{cmd:?} {other}"
            );
        }
        // The report says who kept it: the user, not the search.
        assert_eq!(
            r["int8"]["kept_by_user"],
            serde_json::json!(["conv2/Conv (fp32)"])
        );
        assert!(
            r["declined"]
                .to_string()
                .contains("kept float by the user's precision map: the override for name 'conv2/Conv' says fp32"),
            "{}",
            r["declined"]
        );

        let (m, _) = written(cmd, P::Int8, &["--precision", "Conv=fp32"]);
        for conv in ["conv1/Conv", "conv2/Conv", "conv3/Conv", "conv4/Conv"] {
            assert_eq!(weight(&m, conv), "float32", "{cmd:?} {conv}");
        }
        assert_eq!(weight(&m, "fc/Gemm"), "int8 (DequantizeLinear)", "{cmd:?}");

        let (m, _) = written(cmd, P::Int8, &["--precision", "conv[23]/Conv=fp32"]);
        assert_eq!(
            weight(&m, "conv1/Conv"),
            "int8 (DequantizeLinear)",
            "{cmd:?}"
        );
        assert_eq!(weight(&m, "conv2/Conv"), "float32", "{cmd:?}");
        assert_eq!(weight(&m, "conv3/Conv"), "float32", "{cmd:?}");
    }
}

/// FP16 keeps the named Conv float32 while the next one converts.
#[test]
fn fp16_keeps_the_named_conv_float32() {
    for cmd in [Cmd::Optimize, Cmd::BuildEngine] {
        let (m, _) = written(cmd, P::Fp16, &["--precision", "conv2/Conv=fp32"]);
        assert_eq!(weight(&m, "conv2/Conv"), "float32", "{cmd:?}");
        assert_eq!(weight(&m, "conv3/Conv"), "float16", "{cmd:?}");
    }
}

/// The pipeline's `precision:` section drives FP16, BF16 and INT8 the same
/// way as `--precision`.
#[test]
fn the_yaml_precision_section_drives_every_precision() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("pipeline.yaml");
    std::fs::write(
        &cfg,
        "version: 1\npasses: [fuse-conv-bn, eliminate-dead]\nprecision:\n  overrides:\n    - { name: fc/Gemm, to: fp32 }\n    - { op: Relu, to: fp32 }\n",
    )
    .unwrap();
    for (cmd, p) in ALL {
        let (m, r) = written(cmd, p, &["-c", s(&cfg)]);
        assert_eq!(weight(&m, "fc/Gemm"), "float32", "{cmd:?} {p:?}");
        if p == P::Int8 {
            assert_eq!(weight(&m, "conv1/Conv"), p.converted(), "{cmd:?}");
            let kept = r["int8"]["kept_by_user"].to_string();
            assert!(
                kept.contains("fc/Gemm (fp32)") && kept.contains("relu1/Relu (fp32)"),
                "{kept}"
            );
        }
    }
}

/// One `error:` line on stderr, exit 2, containing every `want`.
fn refused(o: &std::process::Output, want: &[&str], case: &str) {
    assert_eq!(o.status.code(), Some(2), "{case}: {}", stderr(o));
    let err = stderr(o);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(lines.len(), 1, "{case}: {err}");
    for w in want {
        assert!(lines[0].contains(w), "{case}: '{w}' in {}", lines[0]);
    }
}

/// A misspelt node name, an op type the model lacks and a regex that
/// matches nothing exit 2 before any work, naming the entry, with "did you
/// mean" for a near miss; in every command and precision, from the command
/// line and from the pipeline file.
#[test]
fn unknown_names_are_refused_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never.onnx");
    let cfg = dir.path().join("pipeline.yaml");
    std::fs::write(
        &cfg,
        "version: 1\npasses: [fuse-conv-bn]\nprecision:\n  overrides:\n    - { name: conv2/conv, to: fp32 }\n",
    )
    .unwrap();
    for (cmd, p) in ALL {
        let case = format!("{cmd:?} {p:?}");
        let o = run(cmd, p, &["--precision", "conv2/conv=fp32"], &out);
        refused(
            &o,
            &["--precision conv2/conv=fp32", "did you mean 'conv2/Conv'?"],
            &case,
        );
        let o = run(cmd, p, &["--precision", "Gem=fp32"], &out);
        refused(&o, &["--precision Gem=fp32", "did you mean 'Gemm'?"], &case);
        let o = run(cmd, p, &["--precision", "Softmax=fp32"], &out);
        refused(
            &o,
            &["--precision Softmax=fp32", "the model has no Softmax node"],
            &case,
        );
        let o = run(cmd, p, &["--precision", "/head/.*=fp32"], &out);
        refused(
            &o,
            &["--precision /head/.*=fp32", "no regex matching a node name"],
            &case,
        );
        let o = run(cmd, p, &["-c", s(&cfg)], &out);
        refused(
            &o,
            &[
                "the pipeline's precision override { name: conv2/conv, to: fp32 }",
                "did you mean 'conv2/Conv'?",
            ],
            &case,
        );
        assert!(!out.exists(), "{case}: nothing is written");
    }
}

/// An override whose precision no pass of the pipeline makes is refused,
/// never dropped: fp16 under --int8, int8 under --fp16, bf16 under --fp16.
#[test]
fn overrides_no_pass_makes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never.onnx");
    for cmd in [Cmd::Optimize, Cmd::BuildEngine] {
        let case = format!("{cmd:?}");
        let o = run(cmd, P::Int8, &["--precision", "conv2/Conv=fp16"], &out);
        refused(
            &o,
            &[
                "--precision conv2/Conv=fp16",
                "needs convert-float16",
                "add --fp16",
            ],
            &case,
        );
        let o = run(cmd, P::Fp16, &["--precision", "conv2/Conv=int8"], &out);
        refused(
            &o,
            &[
                "--precision conv2/Conv=int8",
                "needs quantize-int8",
                "add --int8",
            ],
            &case,
        );
        let o = run(cmd, P::Fp16, &["--precision", "fc/Gemm=bf16"], &out);
        refused(&o, &["--precision fc/Gemm=bf16", "converts to fp16"], &case);
    }
    // INT8 options and --no-auto-fp32 without the pass they configure.
    let model = fixture(MODEL);
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--calib-data",
        "random:4",
    ]);
    refused(
        &o,
        &["--calib-data", "no quantize-int8 step", "add --int8"],
        "calib-data",
    );
    let o = infopt(&["optimize", s(&model), "-o", s(&out), "--no-auto-fp32"]);
    refused(
        &o,
        &["--no-auto-fp32", "add --fp16 or --bf16"],
        "no-auto-fp32",
    );
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--fp16",
        "--disable",
        "convert-float16",
        "--precision",
        "conv2/Conv=fp16",
    ]);
    refused(
        &o,
        &[
            "needs convert-float16",
            "--disable convert-float16 skips it",
        ],
        "disabled reader",
    );
    assert!(!out.exists());
}

/// The INT8 accuracy search takes the user's float overrides as fixed: on
/// the onnxruntime placement conv2, kept float, still reads a dequantized
/// input, yet the search does not offer it (4 candidates, not the 5 of the
/// run without the override) and never lists it as its own.
#[test]
fn the_int8_search_never_offers_a_layer_the_user_kept() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.onnx");
    // Out of reach of the first INT8 model: the search runs.
    let search = |extra: &[&str]| int8_search(&out, "0.999999", extra);
    let o = search(&[]);
    assert!(
        stderr(&o).contains("(5 weighted layer(s)"),
        "{}",
        stderr(&o)
    );
    let o = search(&["--precision", "conv2/Conv=fp32"]);
    let err = stderr(&o);
    assert!(err.contains("(4 weighted layer(s)"), "{err}");
    assert!(o.status.success(), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let q = &r["int8"];
    assert_eq!(q["kept_by_user"], serde_json::json!(["conv2/Conv (fp32)"]));
    assert!(!q["kept_float"].to_string().contains("conv2/Conv"), "{q}");
    assert_eq!(weight(&Model::load(&out).unwrap(), "conv2/Conv"), "float32");
}

/// An override of a node that exists in the model as loaded but not where
/// the precision pass runs (fuse-conv-bn folds bn1 into conv1) would change
/// nothing: refused at that pass, exit 2, naming it.
#[test]
fn an_override_of_a_node_the_pipeline_folds_away_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never.onnx");
    for (cmd, p) in ALL {
        let o = run(
            cmd,
            p,
            &["--precision", "bn1/BatchNormalization=fp32"],
            &out,
        );
        let pass = match p {
            P::Fp16 => "convert-float16",
            P::Bf16 => "convert-bfloat16",
            P::Int8 => "quantize-int8",
        };
        refused(
            &o,
            &[
                "the precision override for name 'bn1/BatchNormalization' (fp32) selects no node",
                pass,
            ],
            &format!("{cmd:?} {p:?}"),
        );
        assert!(!out.exists());
    }
}

/// An op type a fusion creates may be named before the model has it
/// (gelu_variants' Erf/Tanh forms become Gelu), and it is honoured; the
/// op type the fusion removed (Tanh) is refused where the pass runs.
#[test]
fn an_op_type_a_fusion_creates_is_checked_where_the_pass_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.onnx");
    let model = fixture("gelu_variants.onnx");
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--fp16",
        "--precision",
        "Gelu=fp32",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        r["declined"]
            .to_string()
            .contains("kept in fp32: the override for op Gelu says fp32"),
        "{}",
        r["declined"]
    );
    let m = Model::load(&out).unwrap();
    let gelus: Vec<_> = m.graph.nodes().filter(|(_, n)| n.is("Gelu")).collect();
    assert!(!gelus.is_empty());
    for (_, n) in gelus {
        let x = n.inputs[0].unwrap();
        assert_eq!(
            m.graph.value_type(x).map(|t| t.dtype),
            Some(DataType::Float),
            "{n:?}"
        );
    }
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--fp16",
        "--precision",
        "Tanh=fp32",
    ]);
    refused(
        &o,
        &[
            "the precision override for op Tanh (fp32) selects no node of the graph convert-float16 converts",
        ],
        "Tanh",
    );
}

/// A layer pinned to int8 by the user is a fixed member too: the search
/// does not offer it (3 candidates where conv1 is pinned, not 4), so it
/// stays INT8 whatever the search keeps.
#[test]
fn the_int8_search_never_offers_a_layer_the_user_pinned_to_int8() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.onnx");
    // Above the first INT8 model (0.99995), reachable with conv1 and the input
    // it reads in INT8.
    let o = int8_search(
        &out,
        "0.99999",
        &[
            "--precision",
            "conv1/Conv=int8",
            "--precision",
            "conv2/Conv=fp32",
        ],
    );
    let err = stderr(&o);
    assert!(err.contains("(3 weighted layer(s)"), "{err}");
    assert!(o.status.success(), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!r["int8"]["kept_float"].to_string().contains("conv1/Conv"));
    assert_eq!(
        weight(&Model::load(&out).unwrap(), "conv1/Conv"),
        "int8 (DequantizeLinear)"
    );
}

/// `=int8` on nodes quantize-int8 cannot put in INT8 would change nothing:
/// refused with the reason (an op it keeps float; a layer a BatchNorm
/// reads), in both commands.
#[test]
fn an_int8_override_that_cannot_take_effect_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never.onnx");
    for cmd in [Cmd::Optimize, Cmd::BuildEngine] {
        let case = format!("{cmd:?}");
        let o = run(cmd, P::Int8, &["--precision", "relu1/Relu=int8"], &out);
        refused(
            &o,
            &[
                "the precision override for name 'relu1/Relu' (int8) puts none of its nodes in INT8",
                "the Relu stays float",
            ],
            &case,
        );
        let o = run(cmd, P::Int8, &["--precision", "conv4/Conv=int8"], &out);
        refused(
            &o,
            &[
                "conv4/Conv",
                "BatchNormalization 'bn4/BatchNormalization' reads its output",
            ],
            &case,
        );
        // Where one of the selected layers is quantized, the rest say why not.
        let (m, _) = written(cmd, P::Int8, &["--precision", "Conv=int8"]);
        assert_eq!(weight(&m, "conv1/Conv"), "int8 (DequantizeLinear)");
        assert!(!out.exists());
    }
}

/// `=fp16`/`=bf16` on nodes the conversion cannot convert would change
/// nothing: refused with the reason (Conv has no bfloat16 form at opset 17).
#[test]
fn a_half_override_that_cannot_take_effect_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never.onnx");
    for cmd in [Cmd::Optimize, Cmd::BuildEngine] {
        let o = run(cmd, P::Bf16, &["--precision", "conv2/Conv=bf16"], &out);
        refused(
            &o,
            &[
                "the precision override for name 'conv2/Conv' (bf16) converts none of its nodes",
                "no bfloat16 form at opset 17",
            ],
            &format!("{cmd:?}"),
        );
        assert!(!out.exists());
    }
}

/// The YAML's `default: int8` adds the quantize-int8 step as `--int8` does,
/// with the file's overrides kept out of INT8; `--int8 --fp16` with a node
/// set to fp16 computes it in float16 (quantize-int8 leaves it float,
/// convert-float16 converts it).
#[test]
fn yaml_default_int8_and_int8_with_fp16_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("int8.yaml");
    std::fs::write(
        &cfg,
        "version: 1\npasses: [fuse-conv-bn, eliminate-dead]\nprecision:\n  default: int8\n  overrides:\n    - { name: \"conv[23]/Conv\", to: fp32 }\n",
    )
    .unwrap();
    for cmd in [Cmd::Optimize, Cmd::BuildEngine] {
        // P::Int8's flags minus --int8: the file asks for it.
        let (m, r) = written(cmd, P::Int8, &["-c", s(&cfg)]);
        assert_eq!(
            weight(&m, "conv1/Conv"),
            "int8 (DequantizeLinear)",
            "{cmd:?}"
        );
        assert_eq!(weight(&m, "conv2/Conv"), "float32", "{cmd:?}");
        assert_eq!(weight(&m, "conv3/Conv"), "float32", "{cmd:?}");
        assert_eq!(
            r["int8"]["kept_by_user"],
            serde_json::json!(["conv2/Conv (fp32)", "conv3/Conv (fp32)"])
        );
    }
    let (m, _) = written(
        Cmd::Optimize,
        P::Int8,
        &["--fp16", "--precision", "conv2/Conv=fp16"],
    );
    assert_eq!(weight(&m, "conv2/Conv"), "float16");
    assert_eq!(weight(&m, "conv3/Conv"), "int8 (DequantizeLinear)");
}

/// `optimize --int8` on the onnxruntime placement with seeded samples and
/// `--int8-min-cosine MIN`, plus `extra`, writing `out`, with a JSON report.
fn int8_search(out: &std::path::Path, min: &str, extra: &[&str]) -> std::process::Output {
    let model = fixture(MODEL);
    let mut args = vec![
        "optimize",
        s(&model),
        "-o",
        s(out),
        "--int8",
        "--calib-data",
        "random:24",
        "--calib-samples",
        "8",
        "--held-out",
        "16",
        "--target",
        "onnxruntime",
        "--int8-min-cosine",
        min,
        "--json",
    ];
    args.extend_from_slice(extra);
    infopt(&args)
}
