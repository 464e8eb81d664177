//! A log spectrum's front end: `Log(x*x + eps)` (or `Log(re*re + im*im)`)
//! where `x` is computed from a graph input by a filter bank (an STFT/CQT as
//! Conv or MatMul over audio) and data movement only. Rounding the signal to
//! float16 (2^-11 relative, about -66 dB; bfloat16 -48 dB) adds a noise floor
//! across the whole bank, and the log scale shows that floor in every quiet
//! bin as if it were signal. basic-pitch's CQT in float16 moved its onset
//! map by up to 0.056 (64 of 4063 onsets crossed 0.5; lowest held-out cosine
//! 0.9987) although one clip judged it at 0.99999; kept float32, 0.9999996.
//! So the front end, from the graph input through the square to the Log,
//! stays float32: what the model learned after the log runs in half.
//!
//! The square may be a reduction (`ReduceSumSquare` over an STFT's real and
//! imaginary parts, `ReduceL2` for a magnitude), and reshapes, a transpose
//! or a normalizing division may stand between it and the Log; the signal
//! may be conditioned before its filter bank (DC removal, pre-emphasis,
//! edge padding by GatherElements/ScatterElements) and the bank may be an
//! STFT or DFT. onnx-asr's Kaldi fbank front end (its conditioning in
//! float16, its STFT float32) reached cosine 0.9979 on audio with a tone, a
//! pause and noise, with or without the audio as `--inputs` (the float32
//! island search cannot repair a signal rounded at the input's Cast); its
//! GigaAM one, an STFT as a Conv whose squares a `ReduceSumSquare` sums and
//! a Transpose hands to the mel bank, 0.9944.
//!
//! A path through a learned nonlinearity (Relu, Sigmoid, ...) is not a
//! front end: the rule then keeps nothing for that Log.

use std::collections::{HashMap, HashSet};

use infopt_ir::{DataType, Graph, NodeId, ValueId};

/// Ops of a filter-bank front end: linear maps, data movement, and the
/// elementwise and normalizing ops a CQT/STFT export computes with them.
const FRONT: &[&str] = &[
    "Conv",
    "MatMul",
    "Gemm",
    "Transpose",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Slice",
    "Split",
    "Pad",
    "Concat",
    "Gather",
    "Expand",
    "Identity",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Neg",
    "Abs",
    "Pow",
    "Sqrt",
    "ReduceSum",
    "ReduceMean",
    "AveragePool",
    "Max",
    "Clip",
    "STFT",
    "DFT",
    "GatherElements",
    "ScatterElements",
    "Where",
    "Tile",
];

/// Ops between the square and the Log: the sum of squares, the guard, a
/// mel filter bank (a MatMul, Gemm or Conv over the power spectrum), the
/// reshapes and transposes around it, and a normalization or square root.
const POWER: &[&str] = &[
    "Add",
    "Max",
    "Clip",
    "Mul",
    "Div",
    "Pow",
    "Abs",
    "Sqrt",
    "ReduceSum",
    "ReduceMean",
    "ReduceSumSquare",
    "ReduceL2",
    "MatMul",
    "Gemm",
    "Conv",
    "Transpose",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Identity",
];

/// Reductions that square what they read: a sum of squares, a magnitude.
const SQUARING: &[&str] = &["ReduceSumSquare", "ReduceL2"];

/// Steps from the Log back to its squares.
const POWER_DEPTH: usize = 7;

/// Largest front end kept (basic-pitch's CQT: 190 nodes).
const MAX_NODES: usize = 600;

/// Nodes kept in float32 as the front end of a log spectrum, with the reason.
pub fn front_ends(g: &Graph, dtype: &HashMap<ValueId, DataType>) -> HashMap<NodeId, String> {
    let mut out: HashMap<NodeId, String> = HashMap::new();
    for (id, n) in g.nodes() {
        if !n.domain().is_empty() || !n.is("Log") {
            continue;
        }
        let Some((chain, signals)) = power_of(g, id) else {
            continue;
        };
        let Some(front) = front_end(g, dtype, &signals) else {
            continue;
        };
        let why = "log spectrum front end: float16 rounding of the filter-bank signal adds a noise floor \
                   (-66 dB) that the log shows in every quiet bin; from the input to the Log stays float32";
        for n in chain.into_iter().chain(front) {
            out.entry(n).or_insert_with(|| why.to_string());
        }
    }
    out
}

/// The Log, the nodes between it and its squares, and the squared values,
/// when its argument is a power (a square within a few elementwise steps).
fn power_of(g: &Graph, log: NodeId) -> Option<(Vec<NodeId>, Vec<ValueId>)> {
    let mut chain = vec![log];
    let mut signals = Vec::new();
    infopt_ir::walk::walk_producers(g, log, POWER_DEPTH, |p| {
        let pn = g.node(p);
        if !pn.domain().is_empty() || !POWER.contains(&pn.op_type.as_str()) || chain.contains(&p) {
            return false;
        }
        let square = (pn.is("Mul") && pn.inputs.first() == pn.inputs.get(1))
            || (pn.is("Pow") && pn.inputs.get(1).copied().flatten().is_some_and(|e| is_two(g, e)))
            || SQUARING.contains(&pn.op_type.as_str());
        chain.push(p);
        if square {
            signals.extend(pn.inputs.first().copied().flatten());
        }
        // Not above a square: what it squares is the signal.
        !square
    });
    (!signals.is_empty()).then_some((chain, signals))
}

/// True when `v` is the constant 2.
fn is_two(g: &Graph, v: ValueId) -> bool {
    let t = match g.constant(v) {
        Some(t) => t.clone(),
        None => match g
            .producer(v)
            .filter(|p| p.is("Constant"))
            .and_then(infopt_ir::infer::constant_value)
        {
            Some(t) => t,
            None => return false,
        },
    };
    t.numel() == Some(1) && t.to_f64_vec().is_ok_and(|x| x == [2.0])
}

/// Every node computing `signals` from the graph's inputs, when all of them
/// are front-end ops and the float path reaches a graph input; `None` when a
/// learned nonlinearity or too many nodes stand between.
fn front_end(g: &Graph, dtype: &HashMap<ValueId, DataType>, signals: &[ValueId]) -> Option<Vec<NodeId>> {
    let mut seen: HashSet<NodeId> = HashSet::new();
    let mut stack: Vec<ValueId> = signals.to_vec();
    let mut reaches_input = false;
    while let Some(v) = stack.pop() {
        // Only float values carry the signal: shape and index arithmetic
        // (Shape, Cast to int64) is not the front end.
        if dtype.get(&v) != Some(&DataType::Float) || g.constant(v).is_some() {
            continue;
        }
        let Some((p, _)) = g.value(v).producer else {
            reaches_input |= g.is_graph_input(v);
            continue;
        };
        let pn = g.node(p);
        if pn.is("Constant") || !seen.insert(p) {
            continue;
        }
        if !pn.domain().is_empty() || !FRONT.contains(&pn.op_type.as_str()) || seen.len() > MAX_NODES {
            return None;
        }
        stack.extend(pn.inputs.iter().flatten().copied());
    }
    reaches_input.then(|| seen.into_iter().collect())
}
