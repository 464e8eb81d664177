//! Which ops convert, which of their inputs follow the new type, and which
//! stay in float32 for numerical reasons.

use std::collections::{HashMap, HashSet, VecDeque};

use infopt_ir::{DataType, Graph, Node, NodeId, Slot};

use super::half_type::Half;

/// What a converted node expects on one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The node's float type `T`: converted with the node.
    Half,
    /// Keeps its own type (shape, index, scales, exponent inputs).
    Keep,
}

/// Which inputs carry `T`.
#[derive(Clone, Copy)]
enum Slots {
    All,
    First,
    /// Pad (data, constant_value), Where (both branches).
    Listed(&'static [usize]),
}

/// The allow-list: op, first opset whose `T` admits float16, the same for
/// bfloat16 (from the ONNX operator schemas), and the inputs that are `T`.
/// Everything else stays float32 with Casts around it.
const TABLE: &[(&str, i64, i64, Slots)] = &[
    ("Relu", 6, 13, Slots::All),
    ("LeakyRelu", 6, 16, Slots::All),
    ("PRelu", 7, 16, Slots::All),
    ("Sigmoid", 6, 13, Slots::All),
    ("HardSigmoid", 6, 22, Slots::All),
    ("HardSwish", 14, 22, Slots::All),
    ("Tanh", 6, 13, Slots::All),
    ("Erf", 9, 13, Slots::All),
    ("Gelu", 20, 20, Slots::All),
    ("Elu", 6, 22, Slots::All),
    ("Selu", 6, 22, Slots::All),
    ("Softplus", 1, 22, Slots::All),
    ("Softsign", 1, 22, Slots::All),
    ("Abs", 6, 13, Slots::All),
    ("Neg", 6, 13, Slots::All),
    ("Floor", 6, 13, Slots::All),
    ("Ceil", 6, 13, Slots::All),
    ("Round", 11, 22, Slots::All),
    ("Sign", 9, 13, Slots::All),
    ("Reciprocal", 6, 13, Slots::All),
    ("Sqrt", 6, 13, Slots::All),
    ("Exp", 6, 13, Slots::All),
    ("Log", 6, 13, Slots::All),
    // Both operands follow (TensorRT and tract want one type); an integer
    // exponent keeps its type (see the plan).
    ("Pow", 7, 13, Slots::All),
    ("Sin", 7, 22, Slots::All),
    ("Cos", 7, 22, Slots::All),
    ("Identity", 1, 13, Slots::All),
    ("Dropout", 7, 13, Slots::First),
    ("Add", 7, 13, Slots::All),
    ("Sub", 7, 13, Slots::All),
    ("Mul", 7, 13, Slots::All),
    ("Div", 7, 13, Slots::All),
    ("Max", 8, 13, Slots::All),
    ("Min", 8, 13, Slots::All),
    ("Sum", 8, 13, Slots::All),
    ("Mean", 8, 13, Slots::All),
    ("MatMul", 1, 13, Slots::All),
    ("Gemm", 7, 13, Slots::All),
    ("Einsum", 12, i64::MAX, Slots::All),
    ("Conv", 1, 22, Slots::All),
    ("ConvTranspose", 1, 22, Slots::All),
    ("BatchNormalization", 7, 14, Slots::All),
    ("LayerNormalization", 17, 17, Slots::All),
    ("InstanceNormalization", 6, 22, Slots::All),
    ("MaxPool", 1, 22, Slots::First),
    ("AveragePool", 7, 22, Slots::First),
    ("GlobalAveragePool", 1, 22, Slots::First),
    ("GlobalMaxPool", 1, 22, Slots::First),
    ("ReduceMean", 1, 13, Slots::First),
    ("ReduceMax", 1, 13, Slots::First),
    ("ReduceMin", 1, 13, Slots::First),
    ("ReduceSum", 1, 13, Slots::First),
    ("ReduceSumSquare", 1, 13, Slots::First),
    ("ReduceL1", 1, 13, Slots::First),
    ("ReduceL2", 1, 13, Slots::First),
    ("ReduceLogSum", 1, 13, Slots::First),
    ("ReduceLogSumExp", 1, 13, Slots::First),
    ("ReduceProd", 1, 13, Slots::First),
    ("Softmax", 1, 13, Slots::First),
    ("LogSoftmax", 1, 13, Slots::First),
    ("Concat", 4, 13, Slots::All),
    ("Split", 2, 13, Slots::First),
    ("Slice", 1, 13, Slots::First),
    ("Gather", 1, 13, Slots::First),
    ("GatherElements", 11, 13, Slots::First),
    ("Transpose", 1, 13, Slots::First),
    ("Reshape", 5, 13, Slots::First),
    ("Flatten", 1, 13, Slots::First),
    ("Squeeze", 1, 13, Slots::First),
    ("Unsqueeze", 1, 13, Slots::First),
    ("Expand", 8, 13, Slots::First),
    ("Tile", 6, 13, Slots::First),
    ("DepthToSpace", 1, 13, Slots::First),
    ("SpaceToDepth", 1, 13, Slots::First),
    // opset >= 11: data and constant_value are T; pads/axes are int64.
    ("Pad", 2, 13, Slots::Listed(&[0, 2])),
    // opset >= 11: min and max are inputs of type T.
    ("Clip", 6, 13, Slots::All),
    // roi and scales are float32 whatever X is; sizes is int64.
    ("Resize", 10, 13, Slots::First),
    ("Where", 9, 16, Slots::Listed(&[1, 2])),
    ("CumSum", 14, 14, Slots::First),
    // Recurrent layers: X, W, R, B, the initial states (and LSTM's
    // peepholes) are T; sequence_lens (4) is int32. float16 since opset 1,
    // bfloat16 from 22. ONNX Runtime's CPU provider runs them through Casts
    // it inserts (float32 kernels only); GPUs run them in half.
    ("LSTM", 1, 22, Slots::Listed(&[0, 1, 2, 3, 5, 6, 7])),
    ("GRU", 1, 22, Slots::Listed(&[0, 1, 2, 3, 5])),
    ("RNN", 1, 22, Slots::Listed(&[0, 1, 2, 3, 5])),
];

/// `com.microsoft` ops with float16 kernels in ONNX Runtime's CUDA provider
/// (its CPU provider has float32 ones only for most), and the inputs that
/// are `T`: converted only with the pass's `contrib_ops` option. Attention's
/// mask (3) and past length (6) are int32; EmbedLayerNormalization is left
/// out (its type inference is not ours).
const MS_TABLE: &[(&str, Slots)] = &[
    ("Attention", Slots::Listed(&[0, 1, 2, 4, 5])),
    ("SkipLayerNormalization", Slots::All),
    ("BiasGelu", Slots::All),
    ("FastGelu", Slots::All),
    ("Gelu", Slots::All),
    // SiLU (x * Sigmoid(x)) fused by fuse-activation-patterns: in every block of
    // EfficientNet / YOLO, where a float32 island costs two Casts per block.
    ("QuickGelu", Slots::All),
];

/// Input roles of `node` once converted to `to`, or `None` when the op has
/// no `to` form at this opset (or is not on the allow-list). `contrib`:
/// [`MS_TABLE`]'s ops convert too (float16 only).
pub fn signature(node: &Node, opset: i64, to: Half, contrib: bool) -> Option<Vec<Role>> {
    let slots = if node.domain().is_empty() {
        let &(_, f16, bf16, slots) = TABLE.iter().find(|(op, ..)| *op == node.op_type)?;
        let min = match to {
            Half::F16 => f16,
            Half::Bf16 => bf16,
        };
        if opset < min {
            return None;
        }
        slots
    } else if contrib && to == Half::F16 && node.domain() == "com.microsoft" {
        MS_TABLE.iter().find(|(op, _)| *op == node.op_type)?.1
    } else {
        return None;
    };
    let mut slots = slots;
    // Older forms read these from attributes, or need one type throughout.
    match node.op_type.as_str() {
        "Pad" | "Clip" if opset < 11 => slots = Slots::First,
        _ => {}
    }
    let n = node.inputs.len();
    let roles = (0..n)
        .map(|i| {
            let half = match slots {
                Slots::All => true,
                Slots::First => i == 0,
                Slots::Listed(l) => l.contains(&i),
            };
            if half { Role::Half } else { Role::Keep }
        })
        .collect();
    Some(roles)
}

/// True for ops that read their (float) input whatever its float type, so a
/// converted value reaches them without a Cast.
pub fn reads_any_float(node: &Node, slot: u32) -> bool {
    node.domain().is_empty()
        && slot == 0
        && matches!(node.op_type.as_str(), "Shape" | "Size" | "Cast")
}

/// Reductions whose sum can leave float16's range or lose its precision,
/// and the running sum (a vocoder's phase, `cumsum(f0 / sr)`, passes 2048
/// within a fraction of a second, where float16 no longer holds a cycle).
const SUMMING: &[&str] = &[
    "CumSum",
    "ReduceSum",
    "ReduceSumSquare",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceProd",
];

/// Reductions that can compute normalization statistics.
const STATS: &[&str] = &["ReduceMean", "ReduceSum", "ReduceSumSquare", "ReduceL2"];

/// Elementwise ops of decomposed normalizations (and softmax).
const CHAIN: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Sqrt",
    "Reciprocal",
    "Pow",
    "Exp",
    "Log",
    "ReduceMean",
    "ReduceSum",
    "ReduceSumSquare",
    "ReduceL2",
];

const CHAIN_DEPTH: usize = 6;

/// Largest float tensor (elements, rank <= 1) treated as shape arithmetic.
const SHAPE_ELEMS: i64 = 64;

/// Nodes kept in float32 for numerical reasons, with the reason.
pub fn sensitive(g: &Graph, dtype: &HashMap<infopt_ir::ValueId, DataType>) -> HashMap<NodeId, String> {
    let mut out: HashMap<NodeId, String> = HashMap::new();
    let order = g.topological_order().unwrap_or_else(|_| g.node_ids());
    let is_float = |v| dtype.get(&v) == Some(&DataType::Float);

    for &id in &order {
        let n = g.node(id);
        if !n.domain().is_empty() {
            continue;
        }
        let op = n.op_type.as_str();
        let reason = if matches!(op, "Softmax" | "LogSoftmax") {
            Some("Softmax: exp and normalizing sum over half-precision inputs lose small probabilities (scores keep float32)")
        } else if SUMMING.contains(&op) {
            Some("summing reduction: the sum can exceed float16's range (65504) or lose its precision")
        } else if op == "InstanceNormalization" {
            Some("normalization statistics (mean and variance) need float32")
        } else {
            None
        };
        if let Some(r) = reason {
            out.insert(id, r.to_string());
        }
    }

    // Decomposed LayerNorm / RMSNorm / softmax: a reduction whose result
    // reaches a square root, a reciprocal or a divisor is a statistic; the
    // reduction, what squares its input, and the chain from it to the
    // normalizing Div/Mul stay float32 (x^2 overflows float16 above 256 and
    // eps such as 1e-12 flushes to zero).
    for &id in &order {
        let n = g.node(id);
        if !n.domain().is_empty() || !STATS.contains(&n.op_type.as_str()) || !is_statistic(g, id) {
            continue;
        }
        out.entry(id).or_insert_with(|| {
            "statistic of a decomposed normalization (LayerNorm/RMSNorm): the sum and eps need float32".into()
        });
        if let Some(x) = n.inputs.first().copied().flatten()
            && let Some((p, _)) = g.value(x).producer
        {
            let pn = g.node(p);
            let squares = pn.is("Pow")
                || pn.is("Exp")
                || (pn.is("Mul") && pn.inputs.first() == pn.inputs.get(1));
            if squares {
                out.entry(p).or_insert_with(|| {
                    "squares or exponentiates the input of normalization statistics (overflows float16)".into()
                });
            }
        }
        let mut queue: VecDeque<(NodeId, usize)> = VecDeque::from([(id, 0)]);
        let mut seen: HashSet<NodeId> = HashSet::from([id]);
        while let Some((at, depth)) = queue.pop_front() {
            if depth >= CHAIN_DEPTH {
                continue;
            }
            for v in g.node(at).outputs.iter().flatten() {
                for u in &g.value(*v).uses {
                    let c = g.node(u.node);
                    if !c.domain().is_empty()
                        || !CHAIN.contains(&c.op_type.as_str())
                        || !seen.insert(u.node)
                    {
                        continue;
                    }
                    out.entry(u.node).or_insert_with(|| {
                        "part of a decomposed normalization after its statistics (eps and 1/sqrt need float32)".into()
                    });
                    // The normalizing Div/Mul ends the chain.
                    if !(c.is("Div") || c.is("Mul")) {
                        queue.push_back((u.node, depth + 1));
                    }
                }
            }
        }
    }

    // Shape arithmetic: small float tensors computing Resize scales, Range
    // bounds or sizes cast to integers (float16 is exact only up to 2048).
    let small = |v| {
        is_float(v)
            && g.value_type(v)
                .and_then(|t| t.known_dims())
                .is_some_and(|d| d.len() <= 1 && d.iter().product::<i64>() <= SHAPE_ELEMS)
    };
    let mut shape_nodes: HashSet<NodeId> = HashSet::new();
    for &id in order.iter().rev() {
        let n = g.node(id);
        let feeds_shape = n.outputs.iter().flatten().any(|&v| {
            small(v)
                && g.value(v).uses.iter().any(|u| {
                    let Slot::Input(slot) = u.slot else {
                        return false;
                    };
                    let c = g.node(u.node);
                    shape_nodes.contains(&u.node)
                        || (c.is("Cast") && c.attr_int("to").ok().flatten().is_some_and(|t| !DataType::from_code(t as i32).is_float()))
                        || ((c.is("Resize") || c.is("Upsample")) && slot >= 1)
                        || c.is("Range")
                        || c.is("ConstantOfShape")
                })
        });
        if feeds_shape {
            shape_nodes.insert(id);
            out.entry(id).or_insert_with(|| {
                "shape arithmetic: a small float tensor computing Resize scales, Range bounds or an integer size".into()
            });
        }
    }
    out
}

/// True when the output of reduction `id` reaches, within a few elementwise
/// steps, a Sqrt, a Reciprocal or the divisor of a Div.
fn is_statistic(g: &Graph, id: NodeId) -> bool {
    let mut queue: VecDeque<(NodeId, usize)> = VecDeque::from([(id, 0)]);
    let mut seen: HashSet<NodeId> = HashSet::from([id]);
    while let Some((at, depth)) = queue.pop_front() {
        if depth >= CHAIN_DEPTH {
            continue;
        }
        for v in g.node(at).outputs.iter().flatten() {
            for u in &g.value(*v).uses {
                let c = g.node(u.node);
                if !c.domain().is_empty() {
                    continue;
                }
                if c.is("Sqrt") || c.is("Reciprocal") || (c.is("Div") && u.slot == Slot::Input(1)) {
                    return true;
                }
                if (CHAIN.contains(&c.op_type.as_str()) || c.is("Cast")) && seen.insert(u.node) {
                    queue.push_back((u.node, depth + 1));
                }
            }
        }
    }
    false
}
