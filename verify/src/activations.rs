//! The largest tensor a model computes at the sizes verification would run
//! it with, found by shape inference before any runtime sees the model. A
//! valid model may still size an activation from a number in the file — an
//! Expand to 10^12 elements, a Resize scale of 10^6, a ConvTranspose
//! `output_shape` of 100000 x 100000 — and a runtime asked to run it grows
//! until the kernel kills the process (tract aborts on the failed
//! allocation; some of its constant folding does so at load). Verification
//! refuses such sizes with a one-line error naming the node instead.
//!
//! Only dims inference proves count: a tensor whose size depends on data
//! the graph computes at run time is not estimated.

use infopt_ir::Model;
use infopt_ir::dtype::DataType;
use infopt_ir::graph::Node;
use infopt_ir::infer::{InferReport, Opsets, Scope, infer_graph};
use infopt_ir::shape::{Dim, TensorType};
use infopt_runtime::backend::{DimSpec, IoSpec, resolve_input_shapes};
use infopt_runtime::{DType, InputShapes};

/// The largest tensor one node makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Largest {
    /// The node's name (or op type when it has none) and op type.
    pub node: String,
    pub op: String,
    pub value: String,
    pub dims: Vec<i64>,
    pub dtype: DataType,
    pub bytes: u128,
}

/// The concrete input dims loading would give the model at `shapes` (the
/// runtimes' own resolution), or `None` when the declarations do not allow
/// them (the runtime will say why).
fn input_dims(model: &Model, shapes: &InputShapes) -> Option<Vec<(String, Vec<usize>)>> {
    let g = &model.graph;
    let mut specs = Vec::new();
    for io in &g.inputs {
        if g.constant(io.value).is_some() {
            continue;
        }
        let ty = g.value_type(io.value)?;
        specs.push(IoSpec {
            name: g.value(io.value).name.clone(),
            dtype: DType::from_onnx(ty.dtype.code())?,
            dims: ty.shape.map(|s| {
                s.iter()
                    .map(|d| match d {
                        Dim::Known(k) => {
                            usize::try_from(*k).map_or(DimSpec::Unknown, DimSpec::Known)
                        }
                        Dim::Sym(s) => DimSpec::Symbol(s.clone()),
                        Dim::Unknown => DimSpec::Unknown,
                    })
                    .collect()
            }),
        });
    }
    resolve_input_shapes(&specs, shapes)
        .ok()
        .map(|r| r.input_shapes)
}

/// The largest tensor of the main graph whose dims inference proves at
/// `shapes` (initializers left out: they are the model's weights, counted
/// elsewhere), or `None` when no dims are proved.
pub fn largest_activation(model: &Model, shapes: &InputShapes) -> Option<Largest> {
    largest_in(&infer_at(model, shapes)?)
}

/// The model's graph with its inputs made concrete at some sizes, and what
/// inference proves about every value there (subgraphs have theirs written
/// into their `value_info`).
pub struct Inferred {
    pub graph: infopt_ir::Graph,
    pub facts: infopt_ir::infer::GraphFacts,
    /// The concrete input dims, by input name.
    pub inputs: Vec<(String, Vec<usize>)>,
}

impl Inferred {
    /// `x [1,3,64,64], y [2]`: the sizes, for messages.
    pub fn sizes_text(&self) -> String {
        let sizes: Vec<String> = self
            .inputs
            .iter()
            .map(|(name, d)| {
                let d: Vec<String> = d.iter().map(usize::to_string).collect();
                format!("{name} [{}]", d.join(","))
            })
            .collect();
        sizes.join(", ")
    }
}

/// Inference of the model at `shapes`, or `None` when its declarations do
/// not allow them (the runtime will say why).
pub fn infer_at(model: &Model, shapes: &InputShapes) -> Option<Inferred> {
    let dims = input_dims(model, shapes)?;
    // Inference writes what it finds into the graph: a copy (tensor data is
    // shared, not copied) with the inputs made concrete.
    let mut g = model.graph.clone();
    for (name, d) in &dims {
        let Some(v) = g.find_value(name) else {
            continue;
        };
        let dtype = g.value_type(v).map_or(DataType::Float, |t| t.dtype);
        let ty = TensorType {
            dtype,
            shape: Some(d.iter().map(|&n| Dim::Known(n as i64)).collect()),
        };
        g.set_value_type(v, &ty);
    }
    let mut report = InferReport::default();
    let facts = infer_graph(&mut g, Opsets::of(model), &Scope::default(), &mut report);
    Some(Inferred {
        graph: g,
        facts,
        inputs: dims,
    })
}

/// The largest tensor `inferred` proves.
pub fn largest_in(inferred: &Inferred) -> Option<Largest> {
    let g = &inferred.graph;
    let facts = &inferred.facts;
    let mut best: Option<Largest> = None;
    for (_, node) in g.nodes() {
        if let Some(padded) = padded_input(inferred, node)
            && best.as_ref().is_none_or(|b| padded.bytes > b.bytes)
        {
            best = Some(padded);
        }
        for &out in node.outputs.iter().flatten() {
            let Some(fact) = facts.get(out) else { continue };
            let Some(shape) = fact.shape() else { continue };
            let mut known = Vec::with_capacity(shape.len());
            for d in shape {
                match d {
                    Dim::Known(n) if *n >= 0 => known.push(*n),
                    _ => break,
                }
            }
            if known.len() != shape.len() {
                continue;
            }
            let Some(bits) = fact.ty.dtype.bit_width() else {
                continue;
            };
            let elements = known
                .iter()
                .fold(1u128, |acc, &n| acc.saturating_mul(n as u128));
            let bytes = elements.saturating_mul(bits as u128).div_ceil(8);
            if best.as_ref().is_none_or(|b| bytes > b.bytes) {
                best = Some(Largest {
                    node: node.name_or_op().to_string(),
                    op: node.op_type.clone(),
                    value: g.value(out).name.clone(),
                    dims: known,
                    dtype: fact.ty.dtype,
                    bytes,
                });
            }
        }
    }
    best
}

/// The padded copy of a convolution's or pool's input that runtimes build
/// before sliding the window (tract does: fuzz seed 2468 case 908, a Conv
/// padded by 2^20 along its width, aborted asking for 9.3 GB), as a lower
/// bound: a dim inference leaves unknown counts as 1, the channels as the
/// weight implies them. `None` without padding or a known rank.
fn padded_input(inferred: &Inferred, node: &Node) -> Option<Largest> {
    let x = node.inputs.first().copied().flatten()?;
    let fact = inferred.facts.get(x)?;
    let shape = fact.shape()?;
    // Unknown dims count as 1 (a lower bound), except a convolution's input
    // channels, which its weight says.
    let known = |d: &Dim| match d {
        Dim::Known(n) if *n >= 0 => *n as u128,
        _ => 1,
    };
    let weight_channels = || {
        let w = node.inputs.get(1).copied().flatten()?;
        let wd = inferred.facts.get(w)?.shape()?;
        let group = node.attr_int_or("group", 1).ok()?.max(1) as u128;
        Some(known(wd.get(1)?).saturating_mul(group))
    };
    let base: Vec<u128> = shape
        .iter()
        .enumerate()
        .map(|(i, d)| match i {
            1 if node.op_type.starts_with("Conv") && !matches!(d, Dim::Known(_)) => {
                weight_channels().unwrap_or(1)
            }
            _ => known(d),
        })
        .collect();
    let padded = crate::padding::padded_dims(node, &base)?;
    let dims: Vec<i64> = padded
        .iter()
        .map(|&n| i64::try_from(n).unwrap_or(i64::MAX))
        .collect();
    let bits = fact.ty.dtype.bit_width()?;
    let elements = padded.iter().fold(1u128, |acc, &n| acc.saturating_mul(n));
    Some(Largest {
        node: node.name_or_op().to_string(),
        op: node.op_type.clone(),
        value: format!("{} padded", inferred.graph.value(x).name),
        dims,
        dtype: fact.ty.dtype,
        bytes: elements.saturating_mul(bits as u128).div_ceil(8),
    })
}

/// Why the model cannot run at `shapes` within `available` bytes: its
/// largest activation takes more than half of them.
pub fn refusal_given(model: &Model, shapes: &InputShapes, available: u64) -> Option<String> {
    refusal_in(&infer_at(model, shapes)?, available)
}

/// [`refusal_given`] for a model already inferred at its sizes.
pub fn refusal_in(inferred: &Inferred, available: u64) -> Option<String> {
    let big = largest_in(inferred)?;
    if big.bytes <= u128::from(available / 2) {
        return None;
    }
    let dims: Vec<String> = big.dims.iter().map(i64::to_string).collect();
    Some(format!(
        "node '{}' ({}) would make '{}' [{}] {} of {} at the verification sizes ({}), more than half of the {:.1} GiB available; give smaller sizes with --input-shape, or skip verification with --no-verify",
        big.node,
        big.op,
        big.value,
        dims.join(","),
        big.dtype.name(),
        bytes_text(big.bytes),
        inferred.sizes_text(),
        available as f64 / (1u64 << 30) as f64,
    ))
}

/// [`refusal_given`] with the memory this machine has available.
pub fn refusal(model: &Model, shapes: &InputShapes) -> Option<String> {
    refusal_given(model, shapes, crate::memory::available_bytes()?)
}

/// `12.3 GiB`, or `1.2e15 bytes` past what a GiB count reads well as.
fn bytes_text(bytes: u128) -> String {
    let gib = bytes as f64 / (1u64 << 30) as f64;
    if gib < 1e6 {
        format!("{gib:.1} GiB")
    } else {
        format!("{:.1e} bytes", bytes as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::builder::{GraphBuilder, dims};

    #[test]
    fn bytes_read_as_gib_until_they_are_astronomical() {
        assert_eq!(bytes_text(3 << 30), "3.0 GiB");
        assert_eq!(bytes_text(u128::MAX), "3.4e38 bytes");
    }

    /// `Expand(x, [n, 3, big, big])` for `x: [N, 3, 1, 1]`.
    fn expand_model(big: i64) -> Model {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["N", "3", "1", "1"]));
        let shape = b.i64("shape", &[4], &[1, 3, big, big]);
        let y = b.op("Expand", &[x, shape], vec![]);
        let r = b.op("Relu", &[y], vec![]);
        b.output(r, "out", DataType::Float, None);
        b.build(17)
    }

    #[test]
    fn the_largest_activation_is_found_at_the_verification_sizes() {
        let m = expand_model(1000);
        let at = |n: usize| largest_activation(&m, &InputShapes::new().with_symbol("N", n));
        let big = at(1).expect("inferred");
        assert_eq!(
            (big.op.as_str(), big.dims.clone()),
            ("Expand", vec![1, 3, 1000, 1000])
        );
        assert_eq!(big.bytes, 12_000_000);
        // The bound batch broadcasts with the shape's 1.
        assert_eq!(at(5).expect("inferred").dims, vec![5, 3, 1000, 1000]);
    }

    #[test]
    fn an_activation_past_half_the_memory_is_refused_naming_the_node() {
        let m = expand_model(1_000_000);
        let why = refusal_given(&m, &InputShapes::new(), 16 << 30).expect("refused");
        assert!(
            why.starts_with("node 'expand_1' (Expand) would make 'expand_1_out' ")
                && why.contains("[1,3,1000000,1000000] float32 of 11175.9 GiB at the verification sizes (x [1,3,1,1]), more than half of the 16.0 GiB available")
                && why.ends_with("--no-verify"),
            "{why}"
        );
        // 12 MB fits in 16 GiB; it would not in 16 MB.
        let small = expand_model(1000);
        assert_eq!(refusal_given(&small, &InputShapes::new(), 16 << 30), None);
        assert!(refusal_given(&small, &InputShapes::new(), 16 << 20).is_some());
    }
}
