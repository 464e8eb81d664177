//! Ranges for tensors a range table cannot name: the table was computed on
//! the model as given (`infopt calibrate MODEL`, merged shards, a TensorRT
//! cache), and `optimize --int8 --ranges` quantizes the model as its passes
//! left it, where a rewrite may have made new tensors. `fuse-conv-bn` turns
//! PP-LCNet's learnable affine block before a padded Conv, `Conv(x·s + t)`,
//! into `Conv'(x + t/s)`: the sum is a new tensor, and PP-OCRv4 det kept 10
//! of its 64 Convs in float, each "no range for input".
//!
//! Such a tensor's range is bounded through the op that computes it from
//! tensors that have one: `|x + c| <= amax(x) + max|c|`, a Relu or a
//! reshape passes `amax(x)` on, a Sigmoid is within 1. A bound can be wider
//! than what calibration would have measured (a coarser INT8 step on that
//! tensor), never narrower (no clipping the table did not choose). Ops
//! without such a bound (a product of two tensors, a Softmax input) leave
//! the tensor without a range, as before: its readers stay float.

use infopt_ir::{DataType, Graph, Node, NodeId, ValueId};

use crate::Amax;

/// A range derived for `tensor` through its producer `op` from `from`.
#[derive(Clone, Debug, PartialEq)]
pub struct Derived {
    pub tensor: String,
    pub op: String,
    pub from: String,
    pub amax: f32,
}

/// Derives, in graph order, a range for every float tensor that has none in
/// `amax` and that `wanted` names (the ones the passes made), where its
/// producer bounds it from its inputs' ranges and constants. Returns what
/// was added.
pub fn derive_missing(g: &Graph, amax: &mut Amax, wanted: &dyn Fn(&str) -> bool) -> Vec<Derived> {
    let Ok(order) = g.topological_order() else {
        return Vec::new();
    };
    let mut added = Vec::new();
    for id in order {
        let node = g.node(id);
        for &out in node.outputs.iter().flatten() {
            let name = &g.value(out).name;
            if name.is_empty()
                || !is_float(g, out)
                || usable(amax.get(name)).is_some()
                || !wanted(name)
            {
                continue;
            }
            if let Some((bound, from)) = bound_of(g, id, amax) {
                amax.insert(name.clone(), bound);
                added.push(Derived {
                    tensor: name.clone(),
                    op: node.op_type.clone(),
                    from,
                    amax: bound,
                });
            }
        }
    }
    added
}

fn is_float(g: &Graph, v: ValueId) -> bool {
    g.value_type(v).is_none_or(|t| t.dtype == DataType::Float)
}

fn usable(a: Option<f32>) -> Option<f32> {
    a.filter(|a| a.is_finite() && *a > 0.0)
}

/// The values of a constant input: an initializer or a Constant node's.
fn constant_values(g: &Graph, v: ValueId) -> Option<Vec<f64>> {
    if let Some(t) = g.constant(v) {
        return t.to_f64_vec().ok();
    }
    let p = g.producer(v)?;
    if !p.is("Constant") {
        return None;
    }
    p.attr_tensor("value").ok()??.to_f64_vec().ok()
}

/// Largest magnitude among `values` (None when empty or not finite).
fn largest(values: &[f64]) -> Option<f64> {
    let m = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    (!values.is_empty() && m.is_finite()).then_some(m)
}

/// Ops whose output lies within their first input's range: they move,
/// select, average or clamp at zero its elements.
const WITHIN_INPUT: &[&str] = &[
    "Identity",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Transpose",
    "Slice",
    "Gather",
    "Expand",
    "Tile",
    "Split",
    "DepthToSpace",
    "SpaceToDepth",
    "MaxPool",
    "GlobalMaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "Relu",
];

/// Ops whose output lies in [-1, 1] whatever their input.
const WITHIN_ONE: &[&str] = &["Sigmoid", "HardSigmoid", "Tanh", "Softsign"];

/// A bound on node `id`'s output and the tensor it came from.
fn bound_of(g: &Graph, id: NodeId, amax: &Amax) -> Option<(f32, String)> {
    let node = g.node(id);
    let op = node.op_type.as_str();
    if !node.domain().is_empty() {
        return None;
    }
    if WITHIN_ONE.contains(&op) {
        let from = input_name(g, node, 0)?;
        return Some((1.0, from));
    }
    let ranged = |slot: usize| -> Option<(f64, String)> {
        let v = (*node.inputs.get(slot)?)?;
        let name = g.value(v).name.clone();
        usable(amax.get(&name)).map(|a| (f64::from(a), name))
    };
    let bound = if WITHIN_INPUT.contains(&op) {
        ranged(0)
    } else {
        match op {
            "Resize" | "Upsample" => resize_bound(node, ranged(0)),
            "Pad" => pad_bound(g, node, ranged(0)),
            "Clip" => clip_bound(g, node, ranged(0)),
            "LeakyRelu" => {
                let alpha = f64::from(node.attr_float_or("alpha", 0.01).ok()?);
                ranged(0).map(|(a, n)| (a * alpha.abs().max(1.0), n))
            }
            "HardSwish" => ranged(0).map(|(a, n)| (a.max(0.375), n)),
            "Concat" => concat_bound(g, node, &ranged),
            "Add" | "Sub" | "Mul" | "Div" => with_constant(g, node, op, &ranged),
            _ => None,
        }
    }?;
    let (a, from) = bound;
    let a = a as f32;
    (a.is_finite() && a > 0.0).then_some((a, from))
}

fn input_name(g: &Graph, node: &Node, slot: usize) -> Option<String> {
    let v = (*node.inputs.get(slot)?)?;
    Some(g.value(v).name.clone())
}

type Ranged = Option<(f64, String)>;

/// Nearest and linear interpolation stay within their input's range; cubic
/// overshoots it.
fn resize_bound(node: &Node, x: Ranged) -> Ranged {
    let mode = node.attr_string("mode").ok().flatten();
    match mode.as_deref() {
        None | Some("nearest") | Some("linear") | Some("bilinear") => x,
        _ => None,
    }
}

/// Constant padding adds its value (zero unless given); edge and reflect
/// repeat the input's elements.
fn pad_bound(g: &Graph, node: &Node, x: Ranged) -> Ranged {
    let (a, from) = x?;
    let value = match node.inputs.get(2).copied().flatten() {
        Some(v) => largest(&constant_values(g, v)?)?,
        None => f64::from(node.attr_float_or("value", 0.0).ok()?).abs(),
    };
    Some((a.max(value), from))
}

/// A clamp to [lo, hi] bounds by the larger of |lo| and |hi| when both
/// are given.
fn clip_bound(g: &Graph, node: &Node, x: Ranged) -> Ranged {
    let (a, from) = x?;
    let limit = |slot: usize, attr: &str| -> Option<f64> {
        match node.inputs.get(slot).copied().flatten() {
            Some(v) => largest(&constant_values(g, v)?),
            None => node
                .attr_float(attr)
                .ok()
                .flatten()
                .map(|f| f64::from(f).abs()),
        }
    };
    match (limit(1, "min"), limit(2, "max")) {
        (Some(lo), Some(hi)) => Some((a.min(lo.max(hi)), from)),
        _ => Some((a, from)),
    }
}

/// Every input ranged or constant: the largest of them.
fn concat_bound(g: &Graph, node: &Node, ranged: &dyn Fn(usize) -> Ranged) -> Ranged {
    let mut best: Option<(f64, String)> = None;
    for (slot, v) in node.inputs.iter().enumerate() {
        let v = (*v)?;
        let (a, from) = match constant_values(g, v) {
            Some(c) => (largest(&c)?, String::new()),
            None => ranged(slot)?,
        };
        if best.as_ref().is_none_or(|(b, _)| a > *b) {
            best = Some((a, from));
        }
    }
    best.filter(|(_, from)| !from.is_empty())
}

/// `x op c` (or `c op x` for Add and Mul) with `c` constant.
fn with_constant(g: &Graph, node: &Node, op: &str, ranged: &dyn Fn(usize) -> Ranged) -> Ranged {
    let a = (*node.inputs.first()?)?;
    let b = (*node.inputs.get(1)?)?;
    let (x_slot, c) = match (constant_values(g, a), constant_values(g, b)) {
        (None, Some(c)) => (0, c),
        (Some(c), None) if matches!(op, "Add" | "Mul") => (1, c),
        _ => return None,
    };
    let (x, from) = ranged(x_slot)?;
    let bound = match op {
        "Add" | "Sub" => x + largest(&c)?,
        "Mul" => x * largest(&c)?,
        _ => {
            let smallest = c.iter().fold(f64::INFINITY, |m, v| m.min(v.abs()));
            if smallest <= 0.0 || !smallest.is_finite() {
                return None;
            }
            x / smallest
        }
    };
    Some((bound, from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::{Graph, Node, Tensor};

    fn node(op: &str, inputs: &[ValueId]) -> Node {
        let mut n = Node::new(op);
        n.inputs = inputs.iter().map(|&v| Some(v)).collect();
        n
    }

    /// x -> Add(x, [0.5, -0.8]) -> Relu -> Mul(a, b) (two tensors) -> out.
    fn graph() -> Graph {
        let mut g = Graph::new("g");
        let x = g.add_value(infopt_ir::Value::named("x"));
        let c = g.add_initializer("shift", Tensor::from_f32(vec![2], &[0.5, -0.8]));
        let add = g.add_node(node("Add", &[x, c]), &["moved"]);
        let moved = g.node(add).outputs[0].unwrap();
        let relu = g.add_node(node("Relu", &[moved]), &["relu"]);
        let r = g.node(relu).outputs[0].unwrap();
        g.add_node(node("Mul", &[r, x]), &["product"]);
        g
    }

    #[test]
    fn a_shifted_tensor_is_bounded_by_its_input_and_the_shift() {
        let g = graph();
        let mut amax = Amax::default();
        amax.insert("x", 2.0);
        let added = derive_missing(&g, &mut amax, &|n| n != "x");
        // |x + c| <= 2 + 0.8; the Relu passes it on; a product of two
        // tensors has no bound here and stays without a range.
        assert_eq!(
            added
                .iter()
                .map(|d| (d.tensor.as_str(), d.op.as_str(), d.from.as_str()))
                .collect::<Vec<_>>(),
            [("moved", "Add", "x"), ("relu", "Relu", "moved")]
        );
        assert!((amax.get("moved").unwrap() - 2.8).abs() < 1e-6);
        assert!((amax.get("relu").unwrap() - 2.8).abs() < 1e-6);
        assert_eq!(amax.get("product"), None);
    }

    #[test]
    fn only_the_wanted_tensors_without_a_range_are_derived() {
        let g = graph();
        let mut amax = Amax::default();
        amax.insert("x", 2.0);
        amax.insert("relu", 1.5);
        // A tensor the table names keeps its range; one not wanted (a
        // tensor of the model the table was computed on) gets none.
        let added = derive_missing(&g, &mut amax, &|n| n == "relu");
        assert!(added.is_empty());
        assert_eq!(amax.get("relu"), Some(1.5));
        assert_eq!(amax.get("moved"), None);
        // Without a range for the input nothing can be bounded.
        let mut none = Amax::default();
        assert!(derive_missing(&g, &mut none, &|_| true).is_empty());
    }
}
