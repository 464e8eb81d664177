//! Conformance of the reference kernels against the node test cases the `onnx`
//! Python package ships (`onnx.backend.test.case.node`): every case whose
//! single node is an op the kernels claim is evaluated, and the result must
//! equal the expected output. A kernel may decline a case (an unsupported
//! dtype or form: folding then leaves the node alone), never return a wrong
//! value.
//!
//! The cases are generated into a temporary folder by the project's Python
//! (`.venv/bin/python`, or `INFOPT_PYTHON`); nothing is committed. Without
//! Python and `onnx` the test says so and passes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use infopt_ir::kernels::{Array, Buf, Evaluator, Num, ReferenceKernels, SUPPORTED_OPS};
use infopt_ir::proto::TensorProto;
use infopt_ir::{Model, Tensor};
use prost::Message;

const GENERATE: &str = r#"
import os, sys, warnings
warnings.filterwarnings("ignore")
import onnx
from onnx import numpy_helper
from onnx.backend.test.case import node
out, ops = sys.argv[1], set(sys.argv[2].split(","))
n = 0
for c in node.collect_testcases(None):
    g = c.model.graph
    if "expanded" in c.name or len(g.node) != 1:
        continue
    nd = g.node[0]
    if nd.domain not in ("", "ai.onnx") or nd.op_type not in ops or not c.data_sets:
        continue
    inputs, outputs = c.data_sets[0]
    d = os.path.join(out, c.name)
    def proto(a, name):
        if isinstance(a, onnx.TensorProto):
            t = onnx.TensorProto()
            t.CopyFrom(a)
            t.name = name
            return t
        return numpy_helper.from_array(a, name)
    try:
        ins = [proto(a, vi.name) for vi, a in zip(g.input, inputs)]
        outs = [proto(a, vi.name) for vi, a in zip(g.output, outputs)]
    except Exception:
        continue
    os.makedirs(d, exist_ok=True)
    onnx.save(c.model, os.path.join(d, "model.onnx"))
    for i, t in enumerate(ins):
        open(os.path.join(d, f"input_{i}.pb"), "wb").write(t.SerializeToString())
    for i, t in enumerate(outs):
        open(os.path.join(d, f"output_{i}.pb"), "wb").write(t.SerializeToString())
    n += 1
print(n)
"#;

fn python() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("INFOPT_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    venv.exists().then_some(venv)
}

fn read_tensor(path: &Path) -> Tensor {
    let bytes = std::fs::read(path).unwrap();
    Tensor::from_proto(TensorProto::decode(bytes.as_slice()).unwrap())
}

/// Ops whose float results must be bit-exact (no transcendental math, no
/// accumulation order).
const EXACT: &[&str] = &[
    "Abs",
    "Add",
    "Cast",
    "CastLike",
    "Ceil",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "DepthToSpace",
    "Div",
    "Expand",
    "Flatten",
    "Floor",
    "Gather",
    "GatherElements",
    "Identity",
    "Max",
    "Min",
    "Mod",
    "Mul",
    "Neg",
    "Reciprocal",
    "ReduceMax",
    "ReduceMin",
    "Relu",
    "Reshape",
    "Round",
    "Shape",
    "Sign",
    "Size",
    "Slice",
    "SpaceToDepth",
    "Split",
    "Sqrt",
    "Squeeze",
    "Sub",
    "Tile",
    "Transpose",
    "Unsqueeze",
    "Where",
];

fn same(op: &str, got: &Array, want: &Array) -> Result<(), String> {
    if got.dtype() != want.dtype() {
        return Err(format!("dtype {} != {}", got.dtype(), want.dtype()));
    }
    if got.dims != want.dims {
        return Err(format!("dims {:?} != {:?}", got.dims, want.dims));
    }
    match (got.buf.to_num(), want.buf.to_num()) {
        (Some(Num::F(a)), Some(Num::F(b))) => {
            let tol = match want.dtype() {
                infopt_ir::DataType::Float16 | infopt_ir::DataType::Bfloat16 => 1e-2,
                infopt_ir::DataType::Float => 1e-6,
                _ => 1e-12,
            };
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                let ok = if x.is_nan() || y.is_nan() {
                    x.is_nan() && y.is_nan()
                } else if EXACT.contains(&op) {
                    x == y
                } else {
                    x == y || (x - y).abs() <= tol * y.abs().max(1.0)
                };
                if !ok {
                    return Err(format!("element {i}: {x} != {y}"));
                }
            }
            Ok(())
        }
        _ => {
            if got.buf == want.buf {
                Ok(())
            } else {
                Err(format!(
                    "values {:?} != {:?}",
                    short(&got.buf),
                    short(&want.buf)
                ))
            }
        }
    }
}

fn short(b: &Buf) -> String {
    let s = format!("{b:?}");
    s.chars().take(200).collect()
}

/// Skips locally; in CI (where scripts/test.sh has set up the venv) a skip
/// would hide a broken test, so it fails instead.
fn skip(why: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "conformance test cannot run in CI: {why}"
    );
    eprintln!("skipped: {why}");
}

#[test]
fn reference_kernels_match_onnx_node_tests() {
    let Some(py) = python() else {
        skip("no Python (set INFOPT_PYTHON or run scripts/setup-venv.sh)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(&py)
        .arg("-c")
        .arg(GENERATE)
        .arg(dir.path())
        .arg(SUPPORTED_OPS.join(","))
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            skip(&format!(
                "generating the onnx node tests failed: {}",
                String::from_utf8_lossy(&o.stderr)
            ));
            return;
        }
        Err(e) => {
            skip(&format!("cannot run {}: {e}", py.display()));
            return;
        }
    };
    eprintln!(
        "generated {} node test cases",
        String::from_utf8_lossy(&out.stdout).trim()
    );
    let kernels = ReferenceKernels::new();
    let mut passed: BTreeMap<String, usize> = BTreeMap::new();
    let mut declined: Vec<String> = Vec::new();
    let mut wrong: Vec<String> = Vec::new();
    let mut passed_names: Vec<String> = Vec::new();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    cases.sort();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let model = Model::load(&case.join("model.onnx")).unwrap();
        let g = &model.graph;
        let (_, node) = g.nodes().next().unwrap();
        let opset = model.opset("").unwrap_or(1);
        let mut by_name: BTreeMap<String, Tensor> = BTreeMap::new();
        for (i, io) in g.inputs.iter().enumerate() {
            let p = case.join(format!("input_{i}.pb"));
            if p.exists() {
                by_name.insert(g.value(io.value).name.clone(), read_tensor(&p));
            }
        }
        // Initializers of the test model are inputs too.
        for (v, t) in g.initializers() {
            by_name
                .entry(g.value(v).name.clone())
                .or_insert_with(|| t.clone());
        }
        let inputs: Vec<Option<&Tensor>> = node
            .inputs
            .iter()
            .map(|i| i.and_then(|v| by_name.get(&g.value(v).name)))
            .collect();
        if node
            .inputs
            .iter()
            .zip(&inputs)
            .any(|(i, t)| i.is_some() && t.is_none())
        {
            declined.push(format!("{name}: missing input data"));
            continue;
        }
        match kernels.eval(node, &inputs, opset) {
            Ok(Some(outs)) => {
                let mut ok = true;
                for (k, io) in g.outputs.iter().enumerate() {
                    let want =
                        Array::from_tensor(&read_tensor(&case.join(format!("output_{k}.pb"))));
                    let slot = node
                        .outputs
                        .iter()
                        .position(|o| *o == Some(io.value))
                        .unwrap();
                    let got = Array::from_tensor(&outs[slot]);
                    let verdict = match (got, want) {
                        (Ok(g), Ok(w)) => same(&node.op_type, &g, &w),
                        (Err(e), _) | (_, Err(e)) => Err(e.to_string()),
                    };
                    if let Err(e) = verdict {
                        wrong.push(format!("{name} output {k}: {e}"));
                        ok = false;
                    }
                }
                if ok {
                    *passed.entry(node.op_type.clone()).or_default() += 1;
                    passed_names.push(name.clone());
                }
            }
            Ok(None) => declined.push(format!("{name}: not implemented")),
            Err(e) => declined.push(format!("{name}: {e}")),
        }
    }
    let total: usize = passed.values().sum();
    eprintln!("passed {total} cases: {passed:?}");
    eprintln!("declined {}:\n  {}", declined.len(), declined.join("\n  "));
    assert!(wrong.is_empty(), "wrong results:\n  {}", wrong.join("\n  "));
    // Cases the fallback runtime (tract) folded wrong before these ops had
    // kernels of their own: each must now be computed, and right.
    for must in [
        "test_bitshift_left_int8_shift_ge_width",
        "test_bitshift_right_int8_shift_ge_width",
        "test_bitshift_left_int32_negative_shift",
        "test_bitshift_right_int32_negative_shift",
        "test_spacetodepth_crd_mode_example",
        "test_depthtospace_crd_mode_example",
        "test_celu_float16",
        "test_swish",
        "test_softmax_axis_1",
        "test_gru_reverse",
        "test_lstm_reverse",
        "test_simple_rnn_reverse",
        "test_gru_seq_length",
    ] {
        assert!(
            passed_names.iter().any(|n| n == must),
            "{must} was not computed by the reference kernels"
        );
    }
    if cases.is_empty() {
        skip("the onnx package generated no node test cases");
        return;
    }
    // Every claimed op passes at least one case.
    let missing: Vec<&&str> = SUPPORTED_OPS
        .iter()
        .filter(|op| !passed.contains_key(**op))
        .collect();
    assert!(
        missing.is_empty(),
        "claimed ops without a passing case: {missing:?}"
    );
    // Declines are exotic types (float8, int4, ...) and undefined cases; the
    // rest must pass (352 of 467 cases with onnx 1.23).
    assert!(total >= 300, "only {total} of {} cases pass", cases.len());
}
