//! A fold computed by infopt's own kernels (or the tract fallback) is put to
//! ONNX Runtime once per distinct op, input types and attributes in a run:
//! the node alone, on the folded inputs, at graph optimizations off, compared
//! at ONNX's conformance tolerances (rtol 1e-3, atol 1e-7, float16 and
//! bfloat16 one unit in the last place more, or 1e-5 of the output's largest
//! magnitude, how far runtimes' FFTs round near zero). A disagreement declines the
//! fold with the reason, and every later fold of the same kind; the model
//! keeps the node for the runtime to compute. A kernel that folded a reverse
//! GRU as a forward one, or dropped Celu's alpha in float16, was wrong the
//! same way on every node of its kind: one check per kind finds it.
//!
//! Where ONNX Runtime is absent, or cannot load or run the node (an opset it
//! does not know), the kernel's result stands, unchecked, as before.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use infopt_ir::kernels::{Evaluator, KernelError};
use infopt_ir::proto::{TensorShapeProto, TypeProto, ValueInfoProto, tensor_shape, type_proto};
use infopt_ir::{DataType, Graph, GraphIo, Model, Node, Tensor};
use infopt_runtime::ort_backend::{OptLevel, OrtBackend, OrtOptions};
use infopt_runtime::{Backend, HostTensor, InputShapes};

/// ONNX's backend node tests' tolerances.
pub const RTOL: f64 = 1e-3;
pub const ATOL: f64 = 1e-7;
/// Also within this fraction of the output's largest magnitude (see
/// `difference`); a wrong kernel is off by far more.
pub const SCALE_RTOL: f64 = 1e-5;

/// Inputs above this size are not sent to ONNX Runtime: the check is of the
/// kernel, and a smaller fold of the same kind decides it.
const MAX_INPUT_BYTES: usize = 64 << 20;

/// What ONNX Runtime said about one kind of fold.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Agrees,
    /// The reason, for every fold of this kind.
    Differs(String),
    /// ONNX Runtime could not run the node: the kernel stands.
    Unchecked,
}

/// Runs the single-node models: ONNX Runtime in its defaults, without
/// graph optimizations.
pub trait NodeRunner: Send + Sync {
    /// The node's outputs, or why it could not run.
    fn run(&self, model: &[u8]) -> Result<Vec<HostTensor>, String>;
}

struct OrtRunner(OrtBackend);

impl NodeRunner for OrtRunner {
    fn run(&self, model: &[u8]) -> Result<Vec<HostTensor>, String> {
        let loaded = self
            .0
            .load(model, None, &InputShapes::new())
            .map_err(|e| e.to_string())?;
        loaded.run(&[]).map_err(|e| e.to_string())
    }
}

/// ONNX Runtime, found once per process; `None` when it is not installed.
fn ort() -> Option<&'static dyn NodeRunner> {
    static ORT: OnceLock<Option<OrtRunner>> = OnceLock::new();
    ORT.get_or_init(|| {
        let options = OrtOptions {
            intra_threads: Some(1),
            opt_level: OptLevel::Disable,
            ..Default::default()
        };
        OrtBackend::new(options).ok().map(OrtRunner)
    })
    .as_ref()
    .map(|r| r as &dyn NodeRunner)
}

/// Verdicts of this run (the process), by kind of fold.
fn verdicts() -> &'static Mutex<HashMap<String, Verdict>> {
    static V: OnceLock<Mutex<HashMap<String, Verdict>>> = OnceLock::new();
    V.get_or_init(|| Mutex::new(HashMap::new()))
}

/// ONNX Runtime, looked for at the first check (a run that folds nothing
/// never loads it).
struct LazyOrt;

impl NodeRunner for LazyOrt {
    fn run(&self, model: &[u8]) -> Result<Vec<HostTensor>, String> {
        match ort() {
            Some(r) => r.run(model),
            None => Err("ONNX Runtime is not installed".into()),
        }
    }
}

/// `inner`, with each kind of fold it computes checked against ONNX Runtime
/// (when it is installed). The CLI wraps fold-constants' evaluator in it.
pub fn checked(inner: Box<dyn Evaluator>) -> Box<dyn Evaluator> {
    static LAZY: LazyOrt = LazyOrt;
    // Test hook (debug builds only): INFOPT_TEST_WRONG_FOLD=Op makes the
    // kernels' float32 results of `Op` wrong by one, for the end-to-end test
    // that the check catches them.
    #[cfg(debug_assertions)]
    let inner: Box<dyn Evaluator> = match std::env::var("INFOPT_TEST_WRONG_FOLD") {
        Ok(op) => Box::new(WrongFor { op, inner }),
        Err(_) => inner,
    };
    Box::new(Checked {
        inner,
        runner: &LAZY,
        verdicts: verdicts(),
    })
}

/// The test hook's evaluator: `inner`, with 1 added to the float32 results
/// of `op`.
#[cfg(debug_assertions)]
struct WrongFor {
    op: String,
    inner: Box<dyn Evaluator>,
}

#[cfg(debug_assertions)]
impl Evaluator for WrongFor {
    fn eval(
        &self,
        node: &Node,
        inputs: &[Option<&Tensor>],
        opset: i64,
    ) -> Result<Option<Vec<Tensor>>, KernelError> {
        let out = self.inner.eval(node, inputs, opset)?;
        if node.op_type != self.op {
            return Ok(out);
        }
        Ok(out.map(|ts| {
            ts.iter()
                .map(|t| match t.to_f64_vec() {
                    Ok(v) if t.dtype() == DataType::Float => {
                        let v: Vec<f32> = v.iter().map(|x| *x as f32 + 1.0).collect();
                        Tensor::from_f32(t.dims().to_vec(), &v)
                    }
                    _ => t.clone(),
                })
                .collect()
        }))
    }
}

/// An evaluator whose results are checked by `runner`, once per kind, with
/// the verdicts kept in `verdicts`.
pub struct Checked<'a> {
    /// The evaluator whose results are checked.
    pub inner: Box<dyn Evaluator>,
    pub runner: &'a dyn NodeRunner,
    pub verdicts: &'a Mutex<HashMap<String, Verdict>>,
}

impl Checked<'_> {
    /// A private verdict table, for a test's injected evaluator and runner.
    pub fn table() -> Mutex<HashMap<String, Verdict>> {
        Mutex::new(HashMap::new())
    }
}

impl Evaluator for Checked<'_> {
    fn eval(
        &self,
        node: &Node,
        inputs: &[Option<&Tensor>],
        opset: i64,
    ) -> Result<Option<Vec<Tensor>>, KernelError> {
        let key = kind(node, inputs, opset);
        let known = self
            .verdicts
            .lock()
            .ok()
            .and_then(|v| key.as_ref().and_then(|k| v.get(k).cloned()));
        if let Some(Verdict::Differs(why)) = &known {
            return Err(KernelError::Unsupported(why.clone()));
        }
        let Some(out) = self.inner.eval(node, inputs, opset)? else {
            return Ok(None);
        };
        let (Some(key), None) = (key, known) else {
            return Ok(Some(out));
        };
        // The kernel's results are aligned with the node's output slots;
        // those the node omits are not asked for.
        let present: Vec<usize> = (0..out.len())
            .filter(|&i| !matches!(node.outputs.get(i), Some(None)))
            .collect();
        let ours: Vec<Tensor> = present.iter().map(|&i| out[i].clone()).collect();
        let verdict = match single_node_model(node, inputs, &present, &ours, opset) {
            None => Verdict::Unchecked,
            Some(bytes) => match self.runner.run(&bytes) {
                Err(_) => Verdict::Unchecked,
                Ok(expected) => match difference(&ours, &expected) {
                    None => Verdict::Agrees,
                    Some(d) => Verdict::Differs(format!(
                        "{key}: infopt's kernel and ONNX Runtime differ ({d}); not folded"
                    )),
                },
            },
        };
        if let Ok(mut v) = self.verdicts.lock() {
            v.insert(key, verdict.clone());
        }
        match verdict {
            Verdict::Differs(why) => Err(KernelError::Unsupported(why)),
            _ => Ok(Some(out)),
        }
    }
}

/// `Op(float16, int64){alpha=0.5}` at opset N: what one check decides.
/// `None` for what is not checked: other domains, subgraphs, no inputs
/// (Constant), string tensors, inputs too large.
fn kind(node: &Node, inputs: &[Option<&Tensor>], opset: i64) -> Option<String> {
    if !node.domain().is_empty() || node.has_subgraphs() || inputs.iter().flatten().count() == 0 {
        return None;
    }
    if inputs
        .iter()
        .flatten()
        .any(|t| t.dtype() == DataType::String || t.payload_bytes() > MAX_INPUT_BYTES)
    {
        return None;
    }
    let types: Vec<String> = inputs
        .iter()
        .map(|t| t.map_or("-".to_string(), |t| t.dtype().to_string()))
        .collect();
    let mut attrs: Vec<String> = node
        .attributes
        .iter()
        .map(|a| format!("{}={}", a.name(), attribute_text(&a.proto)))
        .collect();
    attrs.sort();
    Some(format!(
        "{}({}){{{}}} at opset {opset}",
        node.op_type,
        types.join(", "),
        attrs.join(", ")
    ))
}

/// An attribute's value, short: `2`, `0.5`, `[0, 2, 1]`, `"CRD"`; a tensor
/// by its type, dims and bytes (two fills of different values differ).
fn attribute_text(a: &infopt_ir::proto::AttributeProto) -> String {
    if let Some(f) = a.f {
        return f.to_string();
    }
    if let Some(i) = a.i {
        return i.to_string();
    }
    if let Some(s) = &a.s {
        return format!("{:?}", String::from_utf8_lossy(s));
    }
    if let Some(t) = &a.t {
        return format!("tensor({:?}, {:?}, {:?})", t.data_type, t.dims, t);
    }
    if !a.ints.is_empty() {
        return format!("{:?}", a.ints);
    }
    if !a.floats.is_empty() {
        return format!("{:?}", a.floats);
    }
    format!("{a:?}")
}

/// The node alone, its inputs as initializers and its outputs typed as the
/// kernel computed them.
fn single_node_model(
    node: &Node,
    inputs: &[Option<&Tensor>],
    present: &[usize],
    outputs: &[Tensor],
    opset: i64,
) -> Option<Vec<u8>> {
    let mut g = Graph::new("fold_check");
    let mut one = Node {
        op_type: node.op_type.clone(),
        attributes: node.attributes.clone(),
        ..Default::default()
    };
    for (i, t) in inputs.iter().enumerate() {
        one.inputs
            .push(t.map(|t| g.add_initializer(&format!("in{i}"), t.clone())));
    }
    // Slots up to the last one asked for; the others stay omitted.
    let last = present.last().map_or(0, |&i| i + 1);
    let names: Vec<String> = (0..last)
        .map(|i| {
            if present.contains(&i) {
                format!("out{i}")
            } else {
                String::new()
            }
        })
        .collect();
    let refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    let id = g.add_node(one, &refs);
    let produced: Vec<_> = g.node(id).outputs.clone();
    for (k, &slot) in present.iter().enumerate() {
        let v = produced.get(slot).copied().flatten()?;
        g.outputs.push(GraphIo {
            value: v,
            info: value_info(&names[slot], outputs.get(k)?),
        });
    }
    let mut model = Model::new(g, opset);
    // Initializers that are not graph inputs need IR 4.
    model.meta.ir_version = Some(infopt_ir::model::min_ir_version(opset).max(4));
    model.to_bytes().ok()
}

fn value_info(name: &str, t: &Tensor) -> ValueInfoProto {
    let dims = t
        .dims()
        .iter()
        .map(|&d| tensor_shape::Dimension {
            value: Some(tensor_shape::DimValue::DimValue(d)),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(t.dtype().code()),
                shape: Some(TensorShapeProto { dim: dims }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// How the kernel's outputs differ from ONNX Runtime's, or `None` when they
/// agree within the tolerances.
fn difference(ours: &[Tensor], theirs: &[HostTensor]) -> Option<String> {
    if ours.len() != theirs.len() {
        return Some(format!(
            "{} outputs, ONNX Runtime gives {}",
            ours.len(),
            theirs.len()
        ));
    }
    for (k, (a, b)) in ours.iter().zip(theirs).enumerate() {
        let dims: Vec<usize> = a.dims().iter().map(|&d| d as usize).collect();
        if dims != b.shape() {
            return Some(format!(
                "output {k} has shape {dims:?}, ONNX Runtime's {:?}",
                b.shape()
            ));
        }
        if a.dtype().code() != b.dtype().onnx_code() {
            return Some(format!(
                "output {k} is {}, ONNX Runtime's {}",
                a.dtype(),
                b.dtype()
            ));
        }
        let exact = !a.dtype().is_float();
        if exact {
            // Integers and booleans: the same bytes (uint64 past 2^53
            // included, which float64 would round).
            let (Ok(ours), Some(theirs)) = (a.raw_bytes(), exact_bytes(b)) else {
                return Some(format!("output {k} cannot be read"));
            };
            if ours.as_ref() != theirs.as_slice() {
                let width = (ours.len() / b.len().max(1)).max(1);
                let i = ours
                    .iter()
                    .zip(&theirs)
                    .position(|(x, y)| x != y)
                    .unwrap_or(0)
                    / width;
                return Some(format!("output {k} element {i} differs"));
            }
            continue;
        }
        let Ok(va) = a.to_f64_vec() else {
            return Some(format!("output {k} cannot be read"));
        };
        let vb = b.to_f64_vec();
        let ulp = match a.dtype() {
            DataType::Float16 => Some(10),
            DataType::Bfloat16 => Some(7),
            _ => None,
        };
        // Runtimes' FFTs and long sums round near zero at the scale of the
        // output (ONNX Runtime's DFT misses the exact 0 by 3e-4 in outputs
        // up to 540): that much is theirs, not a wrong kernel.
        let scale = vb
            .iter()
            .filter(|y| y.is_finite())
            .fold(0.0f64, |m, y| m.max(y.abs()));
        for (i, (&x, &y)) in va.iter().zip(&vb).enumerate() {
            if agree(x, y, false, ulp) || (x - y).abs() <= SCALE_RTOL * scale {
                continue;
            }
            return Some(format!(
                "output {k} element {i}: {x} where ONNX Runtime computes {y}"
            ));
        }
    }
    None
}

/// The little-endian bytes of an integer or boolean host tensor, as ONNX
/// stores them raw; `None` for floats.
fn exact_bytes(t: &HostTensor) -> Option<Vec<u8>> {
    use infopt_runtime::TensorData as D;
    Some(match t.data() {
        D::I8(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::U8(v) => v.clone(),
        D::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::U64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        D::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
        _ => return None,
    })
}

/// `x` (ours) agrees with `y` (ONNX Runtime's): equal for integers and
/// booleans; for floats within `ATOL + RTOL * |y|`, plus one unit in the
/// last place of a `mantissa`-bit type; NaN with NaN, infinities equal.
fn agree(x: f64, y: f64, exact: bool, mantissa: Option<i32>) -> bool {
    if x == y || (x.is_nan() && y.is_nan()) {
        return true;
    }
    if exact || x.is_nan() || y.is_nan() || x.is_infinite() || y.is_infinite() {
        return false;
    }
    let ulp = mantissa.map_or(0.0, |m| {
        let e = if y == 0.0 {
            -14
        } else {
            y.abs().log2().floor() as i32
        };
        2f64.powi(e.max(-14) - m)
    });
    (x - y).abs() <= ATOL + RTOL * y.abs() + ulp
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::kernels::ReferenceKernels;
    use infopt_runtime::TensorData;

    /// Adds 1 to every float result: a deliberately wrong kernel.
    struct OffByOne;

    impl Evaluator for OffByOne {
        fn eval(
            &self,
            node: &Node,
            inputs: &[Option<&Tensor>],
            opset: i64,
        ) -> Result<Option<Vec<Tensor>>, KernelError> {
            let Some(out) = ReferenceKernels::new().eval(node, inputs, opset)? else {
                return Ok(None);
            };
            Ok(Some(
                out.iter()
                    .map(|t| match t.to_f64_vec() {
                        Ok(v) if t.dtype() == DataType::Float => {
                            let v: Vec<f32> = v.iter().map(|x| *x as f32 + 1.0).collect();
                            Tensor::from_f32(t.dims().to_vec(), &v)
                        }
                        _ => t.clone(),
                    })
                    .collect(),
            ))
        }
    }

    /// ONNX Runtime as a fake that knows `Add` of two float32 tensors, and
    /// counts its calls.
    struct FakeOrt(std::sync::atomic::AtomicUsize);

    impl NodeRunner for FakeOrt {
        fn run(&self, model: &[u8]) -> Result<Vec<HostTensor>, String> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let m = infopt_ir::load::model_from_bytes(
                bytes::Bytes::copy_from_slice(model),
                std::path::Path::new("."),
                std::path::Path::new("check.onnx"),
            )
            .map_err(|e| e.to_string())?;
            let (_, node) = m.graph.nodes().next().ok_or("no node")?;
            if node.op_type != "Add" {
                return Err(format!("{} is not implemented", node.op_type));
            }
            let value = |slot: usize| {
                let v = node.inputs[slot].ok_or("omitted")?;
                m.graph
                    .constant(v)
                    .ok_or("not a constant")?
                    .to_f64_vec()
                    .map_err(|e| e.to_string())
            };
            let (a, b) = (value(0)?, value(1)?);
            let sum: Vec<f32> = a.iter().zip(&b).map(|(x, y)| (x + y) as f32).collect();
            HostTensor::new(None, vec![sum.len()], TensorData::F32(sum))
                .map(|t| vec![t])
                .map_err(|e| e.to_string())
        }
    }

    fn add(alpha: Option<f32>) -> Node {
        let mut n = Node::new("Add");
        if let Some(a) = alpha {
            n.set_attr(infopt_ir::Attribute::float("unused", a));
        }
        n
    }

    #[test]
    fn a_wrong_kernel_result_is_caught_and_every_later_fold_of_its_kind_declined() {
        let fake = FakeOrt(Default::default());
        let table = Checked::table();
        let checked = Checked {
            inner: Box::new(OffByOne),
            runner: &fake,
            verdicts: &table,
        };
        let a = Tensor::from_f32(vec![3], &[1.0, 2.0, 3.0]);
        let b = Tensor::from_f32(vec![3], &[0.5, 0.5, 0.5]);
        let node = add(None);
        let e = checked.eval(&node, &[Some(&a), Some(&b)], 17).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unsupported: Add(float32, float32){} at opset 17: infopt's kernel and ONNX Runtime differ (output 0 element 0: 2.5 where ONNX Runtime computes 1.5); not folded"
        );
        // The same kind again: declined without asking ONNX Runtime.
        let c = Tensor::from_f32(vec![3], &[7.0, 8.0, 9.0]);
        assert!(checked.eval(&node, &[Some(&c), Some(&b)], 17).is_err());
        assert_eq!(fake.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn a_right_kernel_result_is_checked_once_per_kind_and_kept() {
        let fake = FakeOrt(Default::default());
        let table = Checked::table();
        let checked = Checked {
            inner: Box::new(ReferenceKernels::new()),
            runner: &fake,
            verdicts: &table,
        };
        let a = Tensor::from_f32(vec![3], &[1.0, 2.0, 3.0]);
        let b = Tensor::from_f32(vec![3], &[0.5, 0.5, 0.5]);
        for _ in 0..3 {
            let out = checked
                .eval(&add(None), &[Some(&a), Some(&b)], 17)
                .unwrap()
                .unwrap();
            assert_eq!(out[0].to_f64_vec().unwrap(), vec![1.5, 2.5, 3.5]);
        }
        // Another attribute set is another kind.
        checked
            .eval(&add(Some(2.0)), &[Some(&a), Some(&b)], 17)
            .unwrap()
            .unwrap();
        assert_eq!(fake.0.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[test]
    fn what_onnx_runtime_cannot_run_keeps_the_kernel_result() {
        let fake = FakeOrt(Default::default());
        let table = Checked::table();
        let checked = Checked {
            inner: Box::new(ReferenceKernels::new()),
            runner: &fake,
            verdicts: &table,
        };
        let a = Tensor::from_f32(vec![2], &[1.0, 4.0]);
        let sqrt = Node::new("Sqrt");
        let out = checked.eval(&sqrt, &[Some(&a)], 17).unwrap().unwrap();
        assert_eq!(out[0].to_f64_vec().unwrap(), vec![1.0, 2.0]);
    }

    /// In ONNX Runtime itself (skipped where it is not installed): a Celu
    /// that drops its alpha (issue 30's float16 bug) is caught, the right
    /// one kept.
    #[test]
    fn onnx_runtime_catches_a_celu_without_its_alpha() {
        if ort().is_none() {
            return;
        }
        let x = Tensor::from_f32(vec![3], &[-1.0, 0.0, 2.0]);
        let mut celu = Node::new("Celu");
        celu.set_attr(infopt_ir::Attribute::float("alpha", 2.0));
        let table = Checked::table();
        let right = Checked {
            inner: Box::new(ReferenceKernels::new()),
            runner: &LazyOrt,
            verdicts: &table,
        };
        assert!(right.eval(&celu, &[Some(&x)], 17).unwrap().is_some());
        struct AlphaOne;
        impl Evaluator for AlphaOne {
            fn eval(
                &self,
                node: &Node,
                inputs: &[Option<&Tensor>],
                opset: i64,
            ) -> Result<Option<Vec<Tensor>>, KernelError> {
                let mut n = node.clone();
                n.set_attr(infopt_ir::Attribute::float("alpha", 1.0));
                ReferenceKernels::new().eval(&n, inputs, opset)
            }
        }
        let table = Checked::table();
        let wrong = Checked {
            inner: Box::new(AlphaOne),
            runner: &LazyOrt,
            verdicts: &table,
        };
        let e = wrong.eval(&celu, &[Some(&x)], 17).unwrap_err().to_string();
        assert!(
            e.contains("Celu(float32){alpha=") && e.contains("element 0: -0.63"),
            "{e}"
        );
    }

    /// uint64 past 2^53 is compared exactly, by its bytes.
    #[test]
    fn large_unsigned_integers_are_compared_by_their_bytes() {
        let big = u64::MAX - 1;
        let ours = Tensor::from_raw(
            DataType::Uint64,
            vec![1],
            bytes::Bytes::from(big.to_le_bytes().to_vec()),
        );
        let same = HostTensor::new(None, vec![1], TensorData::U64(vec![big])).unwrap();
        assert_eq!(difference(std::slice::from_ref(&ours), &[same]), None);
        let other = HostTensor::new(None, vec![1], TensorData::U64(vec![big - 1])).unwrap();
        assert_eq!(
            difference(&[ours], &[other]).as_deref(),
            Some("output 0 element 0 differs")
        );
    }

    #[test]
    fn float16_agrees_within_one_ulp_and_integers_exactly() {
        assert!(agree(1.0 + 1.0 / 1024.0, 1.0, false, Some(10)));
        assert!(!agree(1.0 + 4.0 / 1024.0, 1.0, false, Some(10)));
        assert!(agree(f64::NAN, f64::NAN, false, None));
        assert!(!agree(3.0, 4.0, true, None));
        assert!(agree(1.0005, 1.0, false, None));
        assert!(!agree(1.002, 1.0, false, None));
    }
}
