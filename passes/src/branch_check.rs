//! Whether an `If` branch fails for every value it can receive.
//!
//! Fixing input shapes can turn a branch that worked for other shapes into
//! one that cannot run at all: silero-vad's 8 kHz branch, given the 512
//! samples of a 16 kHz frame, feeds a rank-5 tensor to its LSTM. The original
//! model raises at run time when it takes that branch; a model with the
//! shapes fixed is refused at load, because ONNX Runtime infers shapes
//! through the branch (after folding it the way `fold-constants` does) and
//! finds the violation. The check here re-infers a branch from the facts of
//! its enclosing graphs alone, ignoring the `value_info` inside it (exporters
//! annotate branches with the shapes of the run they traced, which need not
//! be this one), and looks for a node whose static constraints the inferred
//! shapes break.

use infopt_ir::infer::{GraphFacts, InferReport, Opsets, Scope, infer_graph};
use infopt_ir::{Dim, Graph, Node};

/// Why `branch` cannot run with the shapes in `scope`, or `None` when no
/// node provably fails (unknown ranks and dims never count as a failure).
pub fn static_failure(branch: &Graph, opsets: Opsets, scope: &Scope) -> Option<String> {
    let mut g = branch.clone();
    forget_declared_types(&mut g);
    let mut report = InferReport::default();
    let facts = infer_graph(&mut g, opsets, scope, &mut report);
    g.nodes().find_map(|(_, node)| {
        violation(node, &facts, opsets.onnx)
            .map(|why| format!("{} '{}' {why}", node.op_type, node.name_or_op()))
    })
}

/// Drops the declared types of every computed value (and of the branch
/// outputs), so that inference alone decides them.
fn forget_declared_types(g: &mut Graph) {
    let computed: Vec<_> = g
        .value_ids()
        .filter(|&v| g.value(v).producer.is_some())
        .collect();
    for v in computed {
        g.value_mut(v).info = None;
    }
    for io in &mut g.outputs {
        io.info.r#type = None;
    }
}

fn shape<'a>(node: &Node, slot: usize, facts: &'a GraphFacts) -> Option<&'a [Dim]> {
    facts
        .get(node.inputs.get(slot).copied().flatten()?)?
        .shape()
}

/// A constraint of `node` that the inferred input shapes break. Only
/// constraints ONNX shape inference itself enforces are checked: breaking
/// one makes a runtime refuse the model at load.
fn violation(node: &Node, facts: &GraphFacts, opset: i64) -> Option<String> {
    if !node.domain().is_empty() {
        return None;
    }
    match node.op_type.as_str() {
        "LSTM" | "GRU" | "RNN" => {
            let x = shape(node, 0, facts)?;
            (x.len() != 3).then(|| format!("reads an input of rank {}; it needs rank 3", x.len()))
        }
        "Gemm" => {
            for slot in 0..2 {
                let s = shape(node, slot, facts)?;
                if s.len() != 2 {
                    return Some(format!(
                        "input {slot} has rank {}; Gemm needs rank 2",
                        s.len()
                    ));
                }
            }
            None
        }
        "Conv" | "ConvTranspose" => {
            let x = shape(node, 0, facts)?;
            let w = shape(node, 1, facts)?;
            (x.len() != w.len()).then(|| {
                format!(
                    "reads an input of rank {} with a weight of rank {}",
                    x.len(),
                    w.len()
                )
            })
        }
        "Squeeze" => {
            let x = shape(node, 0, facts)?;
            let axes = if opset < 13 {
                node.attr_ints("axes").ok().flatten()?.to_vec()
            } else {
                let v = node.inputs.get(1).copied().flatten()?;
                facts.known_value(v)?.to_i64_vec().ok()?
            };
            axes.iter().find_map(|&a| {
                let k = if a < 0 { a + x.len() as i64 } else { a };
                match x.get(usize::try_from(k).ok()?) {
                    Some(Dim::Known(d)) if *d != 1 => {
                        Some(format!("squeezes axis {a}, which has size {d}"))
                    }
                    _ => None,
                }
            })
        }
        "Concat" => {
            let ranks: Vec<usize> = (0..node.inputs.len())
                .filter_map(|i| shape(node, i, facts).map(|s| s.len()))
                .collect();
            let first = *ranks.first()?;
            ranks
                .iter()
                .find(|&&r| r != first)
                .map(|r| format!("joins inputs of ranks {first} and {r}"))
        }
        _ => None,
    }
}
