//! Realized precision against the request: for every ONNX node the precision passes
//! placed, the precision of the engine kernel(s) TensorRT fused it into.
//!
//! The request is read from the graph TensorRT parses (the strongly typed ONNX), since
//! that is what the precision passes wrote: a node computes in the type of its first
//! float input (a Cast before it is how an FP32 island is made); a Conv / MatMul / Gemm
//! whose data and weight both come from DequantizeLinear is an INT8 request; another op
//! fed by DequantizeLinear may run in INT8 or in float (Q/DQ leaves TensorRT the choice).
//! Casts, Q/DQ nodes and ops without float inputs (shape arithmetic) are not requests.
//!
//! The kernels come from the engine's layer table with their fused ONNX nodes (the
//! TensorRT-RTX build log). A node's kernel is the one named after it (`conv1/Conv_myl0_1`)
//! when there is one; else the kernels listing it that fuse no conversion node (a Cast,
//! Q or DQ: the kernel converting a Relu's input for the next convolution lists that
//! Relu too); else every kernel listing it. A kernel that fuses nodes of
//! different requested precisions (attention: MatMul in FP16, Softmax kept in FP32)
//! shows only its inputs' and outputs' types; for the nodes whose request differs from
//! them the realized precision is "not observable", neither a match nor a mismatch.

use std::collections::{HashMap, HashSet};

use infopt_ir::{DataType, Model, Node};
use infopt_passes::PrecisionMap;
use infopt_runtime::tensorrt::{EnginePrecision, LayerInfo};
use serde::Serialize;

/// One node's request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeRequest {
    pub node: String,
    pub op: String,
    /// The precisions that satisfy it (the first is the one asked for).
    pub allowed: Vec<EnginePrecision>,
    /// An explicit `--precision` / `precision:` override matched the node.
    pub overridden: bool,
    /// The Cast producing the node's float input, if one does: fused into the node's
    /// kernel, the kernel reads the type before the Cast and the node computes after it.
    #[serde(skip)]
    pub fed_by_cast: Option<String>,
}

impl NodeRequest {
    fn label(&self) -> String {
        self.allowed
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("|")
    }
}

/// Names of the conversion nodes (Cast, QuantizeLinear, DequantizeLinear) of the graph.
pub fn conversion_nodes(model: &Model) -> HashSet<String> {
    model
        .graph
        .nodes()
        .filter(|(_, n)| {
            ["Cast", "CastLike", "QuantizeLinear", "DequantizeLinear"]
                .iter()
                .any(|op| n.is(op))
        })
        .filter_map(|(_, n)| n.name.clone())
        .collect()
}

/// The requests of the top-level nodes of the graph TensorRT parses.
pub fn requests(model: &Model, map: Option<&PrecisionMap>) -> Vec<NodeRequest> {
    let g = &model.graph;
    let from_dq = |v: Option<infopt_ir::ValueId>| {
        v.and_then(|v| g.producer(v))
            .is_some_and(|p| p.is("DequantizeLinear"))
    };
    let mut out = Vec::new();
    for (_, node) in g.nodes() {
        let Some(name) = node.name.as_deref().filter(|n| !n.is_empty()) else {
            continue;
        };
        if is_not_a_request(node) {
            continue;
        }
        let float_input_value = node.inputs.iter().flatten().copied().find(|&v| {
            g.value_type(v)
                .and_then(|t| float_precision(t.dtype))
                .or_else(|| g.constant(v).and_then(|c| float_precision(c.dtype())))
                .is_some()
        });
        let float_input = float_input_value.and_then(|v| {
            g.value_type(v)
                .and_then(|t| float_precision(t.dtype))
                .or_else(|| g.constant(v).and_then(|c| float_precision(c.dtype())))
        });
        let fed_by_cast = float_input_value
            .and_then(|v| g.producer(v))
            .filter(|p| p.is("Cast"))
            .and_then(|p| p.name.clone());
        let weighted = ["Conv", "ConvTranspose", "MatMul", "Gemm"]
            .iter()
            .any(|op| node.is(op));
        let dq_inputs = node.inputs.iter().filter(|v| from_dq(**v)).count();
        let allowed = if weighted
            && node.inputs.len() >= 2
            && from_dq(node.inputs[0])
            && from_dq(node.inputs[1])
        {
            vec![EnginePrecision::Int8]
        } else if dq_inputs > 0 {
            let mut a = vec![EnginePrecision::Int8];
            a.extend(float_input);
            a
        } else {
            match float_input {
                Some(p) => vec![p],
                None => continue,
            }
        };
        out.push(NodeRequest {
            node: name.to_string(),
            op: node.op_type.clone(),
            allowed,
            overridden: map.is_some_and(|m| m.override_for(node).is_some()),
            fed_by_cast,
        });
    }
    out
}

fn is_not_a_request(node: &Node) -> bool {
    const SKIP: [&str; 9] = [
        "Cast",
        "CastLike",
        "QuantizeLinear",
        "DequantizeLinear",
        "Constant",
        "ConstantOfShape",
        "Shape",
        "Size",
        "Identity",
    ];
    node.domain().is_empty() && SKIP.iter().any(|op| node.is(op))
}

/// Whether Myelin named kernel `kernel` after `node`: `conv1/Conv_myl0_1`, or one part
/// of a horizontally fused `q/MatMul+k/MatMul+v/MatMul_myl0_1`.
fn named_after(kernel: &str, node: &str) -> bool {
    let base = match kernel.rfind("_myl") {
        Some(i) => &kernel[..i],
        None => kernel,
    };
    kernel == node || base.split('+').any(|part| part == node)
}

/// A precision a node can be asked to compute in.
fn computes_in(p: EnginePrecision) -> bool {
    use EnginePrecision as P;
    matches!(
        p,
        P::Fp32 | P::Fp16 | P::Bf16 | P::Fp8 | P::Fp4 | P::Int8 | P::Int4
    )
}

fn float_precision(dtype: DataType) -> Option<EnginePrecision> {
    match dtype {
        DataType::Float => Some(EnginePrecision::Fp32),
        DataType::Float16 => Some(EnginePrecision::Fp16),
        DataType::Bfloat16 => Some(EnginePrecision::Bf16),
        _ => None,
    }
}

/// How one node fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Match,
    Mismatch,
    NotObservable,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeResult {
    pub node: String,
    pub op: String,
    pub requested: String,
    /// The kernel precision(s) seen, "unknown" when none.
    pub realized: String,
    pub outcome: Outcome,
    /// The kernels it went into.
    pub kernels: Vec<String>,
    /// Why, for a mismatch or a precision that cannot be observed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub overridden: bool,
}

/// Counts for one requested precision.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PrecisionCount {
    pub requested: String,
    pub placed: usize,
    pub matched: usize,
    pub mismatched: usize,
    pub not_observable: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RealizedReport {
    pub placed: usize,
    pub matched: usize,
    pub mismatched: usize,
    pub not_observable: usize,
    pub per_precision: Vec<PrecisionCount>,
    /// Every node, with its outcome (mismatches first in the renderings).
    pub nodes: Vec<NodeResult>,
}

impl RealizedReport {
    /// matched / (matched + mismatched), 1.0 when nothing was observable.
    pub fn match_rate(&self) -> f64 {
        let seen = self.matched + self.mismatched;
        if seen == 0 {
            1.0
        } else {
            self.matched as f64 / seen as f64
        }
    }

    pub fn mismatches(&self) -> impl Iterator<Item = &NodeResult> {
        self.nodes.iter().filter(|n| n.outcome == Outcome::Mismatch)
    }
}

/// Compares the requests with the kernels of the engine.
pub fn compare(
    requests: &[NodeRequest],
    conversions: &HashSet<String>,
    layers: &[LayerInfo],
) -> RealizedReport {
    let mut kernels_of: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, l) in layers.iter().enumerate() {
        for n in &l.onnx_nodes {
            kernels_of.entry(n.as_str()).or_default().push(i);
        }
    }
    let mixed = mixed_kernels(requests, layers);
    let mut report = RealizedReport::default();
    for r in requests {
        let all = kernels_of.get(r.node.as_str()).cloned().unwrap_or_default();
        let chosen = computing_kernels(r, all, layers, conversions);
        let mut realized: Vec<EnginePrecision> = Vec::new();
        // Kernels that only move index or shape data (Int32, Int64, Bool) say nothing
        // about the precision a node computes in.
        for &i in &chosen {
            let p = layers[i].precision;
            if computes_in(p) && !realized.contains(&p) {
                realized.push(p);
            }
        }
        let kernels: Vec<String> = chosen.iter().map(|&i| layers[i].name.clone()).collect();
        let realized_label = if realized.is_empty() {
            "unknown".to_string()
        } else {
            realized
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("|")
        };
        let seen = Seen {
            chosen: &chosen,
            realized: &realized,
            label: &realized_label,
            kernels: &kernels,
        };
        let (outcome, reason) = judge(r, &seen, layers, &mixed);
        report.count(r.allowed[0].to_string(), outcome);
        report.nodes.push(NodeResult {
            node: r.node.clone(),
            op: r.op.clone(),
            requested: r.label(),
            realized: realized_label,
            outcome,
            kernels,
            reason,
            overridden: r.overridden,
        });
    }
    report
}

/// Per kernel: whether the requests of the nodes fused into it differ.
fn mixed_kernels(requests: &[NodeRequest], layers: &[LayerInfo]) -> Vec<bool> {
    let request_of: HashMap<&str, &NodeRequest> =
        requests.iter().map(|r| (r.node.as_str(), r)).collect();
    layers
        .iter()
        .map(|l| {
            let mut first: Option<&EnginePrecision> = None;
            l.onnx_nodes.iter().any(|n| {
                let Some(r) = request_of.get(n.as_str()) else {
                    return false;
                };
                let p = &r.allowed[0];
                match first {
                    None => {
                        first = Some(p);
                        false
                    }
                    Some(f) => f != p,
                }
            })
        })
        .collect()
}

/// Of the kernels that name a node (`all`), those that compute it: the one
/// named after it, else those without a conversion fused in; and of those,
/// the ones that read activations (a kernel with no activation input
/// prepares weights: dequantizes, transposes).
fn computing_kernels(
    r: &NodeRequest,
    all: Vec<usize>,
    layers: &[LayerInfo],
    conversions: &HashSet<String>,
) -> Vec<usize> {
    let named: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&i| named_after(&layers[i].name, &r.node))
        .collect();
    let pure: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&i| !layers[i].onnx_nodes.iter().any(|n| conversions.contains(n)))
        .collect();
    let chosen = if !named.is_empty() {
        named
    } else if !pure.is_empty() {
        pure
    } else {
        all
    };
    let reads_activations: Vec<usize> = chosen
        .iter()
        .copied()
        .filter(|&i| !layers[i].inputs.is_empty())
        .collect();
    if reads_activations.is_empty() || reads_activations.len() == chosen.len() {
        chosen
    } else {
        reads_activations
    }
}

/// What the engine shows of one node: its kernels and their precisions.
struct Seen<'a> {
    chosen: &'a [usize],
    realized: &'a [EnginePrecision],
    label: &'a str,
    kernels: &'a [String],
}

/// Whether a node got the precision it asked for, and why not.
fn judge(
    r: &NodeRequest,
    seen: &Seen<'_>,
    layers: &[LayerInfo],
    mixed: &[bool],
) -> (Outcome, Option<String>) {
    let (chosen, realized, realized_label) = (seen.chosen, seen.realized, seen.label);
    let fits = !realized.is_empty() && realized.iter().all(|p| r.allowed.contains(p));
    // The Cast into the requested type fused into the same kernel, which writes that
    // type: the node computes after the Cast, inside the kernel.
    let cast_fused = r.fed_by_cast.as_ref().filter(|c| {
        !chosen.is_empty()
            && chosen.iter().all(|&i| {
                layers[i].onnx_nodes.contains(c)
                    && layers[i]
                        .outputs
                        .iter()
                        .any(|t| r.allowed.contains(&t.datatype))
            })
    });
    if chosen.is_empty() {
        (
            Outcome::NotObservable,
            Some(
                "in no kernel's metadata (folded into a constant, a shape computation, or removed)"
                    .to_string(),
            ),
        )
    } else if realized.is_empty() {
        (
            Outcome::NotObservable,
            Some("its kernels do not name a datatype".to_string()),
        )
    } else if fits {
        (Outcome::Match, None)
    } else if let Some(cast) = cast_fused {
        (
            Outcome::Match,
            Some(format!(
                "computes after `{cast}`, the Cast to {} fused into the same kernel (which reads {realized_label})",
                r.label()
            )),
        )
    } else if chosen.iter().any(|&i| mixed[i]) {
        (
            Outcome::NotObservable,
            Some(format!(
                "fused into {} with nodes of other precisions; its internal precision is not in the log (the kernel reads and writes {realized_label})",
                seen.kernels.join(", ")
            )),
        )
    } else {
        (
            Outcome::Mismatch,
            Some(format!(
                "requested {}, kernel {} computes in {realized_label}",
                r.label(),
                seen.kernels.join(", ")
            )),
        )
    }
}

impl RealizedReport {
    /// Counts one placed node requested as `label`, in total and per precision.
    fn count(&mut self, label: String, outcome: Outcome) {
        self.placed += 1;
        let idx = match self.per_precision.iter().position(|c| c.requested == label) {
            Some(i) => i,
            None => {
                self.per_precision.push(PrecisionCount {
                    requested: label,
                    ..Default::default()
                });
                self.per_precision.len() - 1
            }
        };
        let count = &mut self.per_precision[idx];
        count.placed += 1;
        match outcome {
            Outcome::Match => {
                self.matched += 1;
                count.matched += 1;
            }
            Outcome::Mismatch => {
                self.mismatched += 1;
                count.mismatched += 1;
            }
            Outcome::NotObservable => {
                self.not_observable += 1;
                count.not_observable += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_runtime::tensorrt::TensorInfo;

    fn t(p: EnginePrecision, n: i64) -> TensorInfo {
        TensorInfo {
            name: "t".into(),
            dims: vec![n],
            datatype: p,
        }
    }

    fn kernel(name: &str, p: EnginePrecision, nodes: &[&str]) -> LayerInfo {
        LayerInfo {
            name: name.into(),
            layer_type: Some("kgen".into()),
            precision: p,
            inputs: vec![t(p, 8)],
            onnx_nodes: nodes.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn req(node: &str, op: &str, allowed: &[EnginePrecision]) -> NodeRequest {
        NodeRequest {
            node: node.into(),
            op: op.into(),
            allowed: allowed.to_vec(),
            overridden: false,
            fed_by_cast: None,
        }
    }

    use EnginePrecision::{Fp16, Fp32, Int8};

    #[test]
    fn matches_mismatches_and_unobservable_nodes_are_told_apart() {
        let layers = vec![
            // INT8 conv: its named kernel is Int8 even though a float epilogue also lists it.
            kernel(
                "conv1/Conv_myl0_1",
                Int8,
                &["conv1/Conv", "x_DequantizeLinear"],
            ),
            kernel(
                "__myl_MulAddRelu_myl0_2",
                Fp32,
                &["conv1/Conv", "relu1/Relu"],
            ),
            // Attention: MatMul in half, the Softmax kept in fp32 inside the same kernel.
            kernel(
                "__myl_Attn_myl0_3",
                Fp16,
                &["mm1/MatMul", "sm/Softmax", "mm2/MatMul"],
            ),
            // A float kernel where fp16 was asked.
            kernel("__myl_Add_myl0_4", Fp32, &["add/Add"]),
        ];
        let requests = vec![
            req("conv1/Conv", "Conv", &[Int8]),
            req("relu1/Relu", "Relu", &[Fp32]),
            req("mm1/MatMul", "MatMul", &[Fp16]),
            req("sm/Softmax", "Softmax", &[Fp32]),
            req("mm2/MatMul", "MatMul", &[Fp16]),
            req("add/Add", "Add", &[Fp16]),
            req("gone/Reshape", "Reshape", &[Fp16]),
        ];
        let r = compare(&requests, &HashSet::new(), &layers);
        let outcome = |n: &str| r.nodes.iter().find(|x| x.node == n).unwrap().outcome;
        assert_eq!(outcome("conv1/Conv"), Outcome::Match);
        assert_eq!(outcome("relu1/Relu"), Outcome::Match);
        assert_eq!(outcome("mm1/MatMul"), Outcome::Match);
        assert_eq!(outcome("sm/Softmax"), Outcome::NotObservable);
        assert_eq!(outcome("add/Add"), Outcome::Mismatch);
        assert_eq!(outcome("gone/Reshape"), Outcome::NotObservable);
        assert_eq!(
            (r.placed, r.matched, r.mismatched, r.not_observable),
            (7, 4, 1, 2)
        );
        let m: Vec<&str> = r.mismatches().map(|n| n.node.as_str()).collect();
        assert_eq!(m, vec!["add/Add"]);
        let add = r.nodes.iter().find(|x| x.node == "add/Add").unwrap();
        assert_eq!(
            add.reason.as_deref(),
            Some("requested fp16, kernel __myl_Add_myl0_4 computes in fp32")
        );
        let fp16 = r
            .per_precision
            .iter()
            .find(|c| c.requested == "fp16")
            .unwrap();
        assert_eq!(
            (
                fp16.placed,
                fp16.matched,
                fp16.mismatched,
                fp16.not_observable
            ),
            (4, 2, 1, 1)
        );
        assert!((r.match_rate() - 0.8).abs() < 1e-9);
    }

    #[test]
    fn a_node_computing_after_a_cast_fused_into_its_kernel_matches() {
        // pool_out.cast_fp32 -> GlobalAveragePool (fp32 override): one kernel, Half in, Float out.
        let mut k = kernel(
            "__myl_CastMean_myl0_7",
            Fp16,
            &["pool_out.cast_fp32", "gap/GlobalAveragePool"],
        );
        k.outputs = vec![t(Fp32, 8)];
        let mut r = req("gap/GlobalAveragePool", "GlobalAveragePool", &[Fp32]);
        let cases = [
            (None, Outcome::Mismatch),
            (Some("pool_out.cast_fp32"), Outcome::Match),
        ];
        for (cast, want) in cases {
            r.fed_by_cast = cast.map(str::to_string);
            let got = compare(
                std::slice::from_ref(&r),
                &HashSet::new(),
                std::slice::from_ref(&k),
            );
            assert_eq!(got.nodes[0].outcome, want, "{cast:?}: {:?}", got.nodes[0]);
        }
        // A Cast fused in, but a kernel that never writes the requested type: still a mismatch.
        k.outputs = vec![t(Fp16, 8)];
        r.fed_by_cast = Some("pool_out.cast_fp32".into());
        let got = compare(&[r], &HashSet::new(), &[k]);
        assert_eq!(got.nodes[0].outcome, Outcome::Mismatch);
    }

    #[test]
    fn kernels_are_named_after_nodes_also_when_fused_side_by_side() {
        assert!(named_after("conv1/Conv_myl0_1", "conv1/Conv"));
        assert!(named_after("q/MatMul+k/MatMul+v/MatMul_myl0_1", "k/MatMul"));
        assert!(!named_after("q/MatMul+k/MatMul_myl0_1", "q/Mat"));
        assert!(!named_after("__myl_CastMulFc_myl0_3", "fc"));
    }

    #[test]
    fn a_weight_preparing_kernel_does_not_decide() {
        // Weight dequantized into Float by one kernel, the GEMM in the next one in Float.
        let mut prep = kernel(
            "__myl_CastMulCast_myl0_2",
            Int8,
            &["w_DequantizeLinear", "mm/MatMul"],
        );
        prep.inputs.clear();
        let gemm = kernel(
            "__myl_CastMulFc_myl0_3",
            Fp32,
            &["mm/MatMul", "x_DequantizeLinear"],
        );
        let r = compare(
            &[req("mm/MatMul", "MatMul", &[Int8])],
            &HashSet::new(),
            &[prep, gemm],
        );
        assert_eq!(r.nodes[0].outcome, Outcome::Mismatch);
        assert_eq!(r.nodes[0].realized, "fp32");
        assert_eq!(r.nodes[0].kernels, vec!["__myl_CastMulFc_myl0_3"]);
    }

    #[test]
    fn index_moving_kernels_do_not_decide_a_nodes_precision() {
        let layers = vec![
            kernel(
                "__myl_Move_myl0_69",
                EnginePrecision::Int32,
                &["gap/GlobalAveragePool"],
            ),
            kernel("__myl_Mean_myl0_70", Fp32, &["gap/GlobalAveragePool"]),
        ];
        let r = compare(
            &[req("gap/GlobalAveragePool", "GlobalAveragePool", &[Fp32])],
            &HashSet::new(),
            &layers,
        );
        assert_eq!(
            (r.nodes[0].outcome, r.nodes[0].realized.as_str()),
            (Outcome::Match, "fp32")
        );
    }

    #[test]
    fn a_q_dq_fed_elementwise_op_may_run_in_int8_or_float() {
        let layers = vec![kernel("__myl_Pool_myl0_0", Int8, &["pool/MaxPool"])];
        let r = compare(
            &[req("pool/MaxPool", "MaxPool", &[Int8, Fp32])],
            &HashSet::new(),
            &layers,
        );
        assert_eq!(r.nodes[0].outcome, Outcome::Match);
        assert_eq!(r.nodes[0].requested, "int8|fp32");
    }

    #[test]
    fn a_kernel_that_converts_for_the_next_one_does_not_decide() {
        // Myelin lists relu1 in the kernel casting the input for conv1 (Float in).
        let layers = vec![
            kernel(
                "__myl_CastReplConc_myl0_1",
                Fp32,
                &["input.cast_fp16", "conv1/Conv", "relu1/Relu"],
            ),
            kernel("conv1/Conv_myl0_2", Fp16, &["conv1/Conv", "relu1/Relu"]),
        ];
        let conversions: HashSet<String> = ["input.cast_fp16".to_string()].into();
        let requests = [req("relu1/Relu", "Relu", &[Fp16])];
        let r = compare(&requests, &conversions, &layers);
        assert_eq!(r.nodes[0].outcome, Outcome::Match, "{:?}", r.nodes[0]);
        assert_eq!(r.nodes[0].kernels, vec!["conv1/Conv_myl0_2"]);
        // Without knowing the Cast, both kernels count and the types disagree.
        let r = compare(&requests, &HashSet::new(), &layers);
        assert_eq!(r.nodes[0].outcome, Outcome::Mismatch);
    }
}
