//! The arithmetic a model does at the sizes verification would run it with,
//! estimated from inferred shapes before any runtime sees the model. Bytes
//! are bounded by [`crate::activations`]; work is not bounded by them: a
//! depthwise Conv given `pads` of 100000 makes a feature map that fits in
//! memory, and every layer after it then runs over a map thousands of times
//! the size it was exported for, for minutes. Verification refuses sizes
//! whose estimate is past [`WORK_BUDGET`] with a one-line error naming the
//! heaviest node.
//!
//! The unit is a multiply-add. A node costs the products it computes from
//! its inferred shapes (Conv, ConvTranspose, MatMul, Gemm, Einsum, pools,
//! Resize, recurrences, attention; reductions one per element read) plus
//! [`ELEMENT_COST`] for each element it writes: a depthwise Conv or an
//! activation function does few products per element and still takes the
//! time of moving it. Loop bodies count once per iteration when the file
//! fixes the count ([`crate::loop_work`]), Scan bodies once per step, and
//! of an If's branches the heavier one. What inference does not prove (a
//! data-dependent shape) counts nothing.

use infopt_ir::infer::GraphFacts;
use infopt_ir::{Dim, Graph, Model, Node, ValueId};
use infopt_runtime::InputShapes;

use crate::activations::{Inferred, infer_at};

/// What writing one element costs, in multiply-adds. Fitted to ONNX
/// Runtime on one core (bench/results/fuzz.md, session 7): ResNet-50 and
/// BERT-base do 50-100 products per element they write and run at about
/// 2*10^10 products a second; PP-OCR's mobile classifier does 6 and
/// EfficientNet-B0 14, and run no faster per element written. Times of the
/// five models fit `products + 40 x elements` within a factor of 2.
pub const ELEMENT_COST: u128 = 40;

/// The most verification runs a model for at one size: 10^11, about 5 s
/// of one core in ONNX Runtime and several times that in tract, for each
/// of the two or more runs verification makes (original, optimized), on a
/// machine a fuzz campaign or a CI job may share. Real models at the sizes
/// verification chooses stay below it: ResNet-50 at 2x3x224x224 costs
/// 1.1*10^10, PP-OCRv4 det at 640x640 6.9*10^9, PP-OCRv4 rec at its largest
/// candidate 4.8*10^10. BERT-base's first choice, 2x512, costs 1.3*10^11:
/// it verifies at its second, 1x512 (6.4*10^10).
pub const WORK_BUDGET: u128 = 100_000_000_000;

/// The estimate at one set of sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Work {
    /// The whole graph's multiply-adds.
    pub total: u128,
    /// Elements the main graph's nodes write.
    pub elements: u128,
    /// The node of the main graph with the most (its bodies included).
    pub heaviest: Option<Heaviest>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heaviest {
    pub node: String,
    pub op: String,
    pub work: u128,
}

/// The estimate for a model already inferred at its sizes.
pub fn work_in(inferred: &Inferred) -> Work {
    let shapes = Shapes {
        graph: &inferred.graph,
        facts: Some(&inferred.facts),
    };
    let mut total = 0u128;
    let mut elements = 0u128;
    let mut heaviest: Option<Heaviest> = None;
    for (_, node) in inferred.graph.nodes() {
        elements = elements.saturating_add(shapes.output_elements(node));
        let w = node_work(&shapes, node);
        total = total.saturating_add(w);
        if heaviest.as_ref().is_none_or(|h| w > h.work) {
            heaviest = Some(Heaviest {
                node: node.name_or_op().to_string(),
                op: node.op_type.clone(),
                work: w,
            });
        }
    }
    Work {
        total,
        elements,
        heaviest,
    }
}

/// The estimate for `model` at `shapes`, or `None` when its declarations do
/// not allow them.
pub fn work_at(model: &Model, shapes: &InputShapes) -> Option<Work> {
    Some(work_in(&infer_at(model, shapes)?))
}

/// The most verification runs a model for at sizes the model or the caller
/// fixes (no dim left for verification to choose), where no node takes
/// more than [`WORK_BUDGET`]: the model's own cost, which its author chose
/// and its users pay on every input. imgly's ISNet (background removal,
/// 1x3x1024x1024, 88 MB): 2.0e11 over 119 Convs, the heaviest 2.1e10; ONNX
/// Runtime runs it in 1.9 s on one core. A hostile file's blow-up sits in
/// one node (a Conv padded by 100000 rows: 2.7e11 of the model's 2.9e11;
/// an Einsum of three vectors to a scalar: 1.0e12), and is refused by
/// that node's cost.
pub const FIXED_SIZES_WORK_BUDGET: u128 = 1_000_000_000_000;

/// What verification runs a model for: the whole model's multiply-adds at
/// most, and where set, each node's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub model: u128,
    pub node: Option<u128>,
}

impl Budget {
    /// The budget for sizes fixed or chosen. A debug build reads
    /// `INFOPT_TEST_WORK_BUDGET` in place of [`WORK_BUDGET`] (a fixed size's
    /// model budget stays ten times it): the CLI tests reach both budgets
    /// with models that run in milliseconds. A release build never reads it.
    pub fn for_sizes(fixed: bool) -> Budget {
        let base = test_work_budget().unwrap_or(WORK_BUDGET);
        let scale = FIXED_SIZES_WORK_BUDGET / WORK_BUDGET;
        match fixed {
            true => Budget {
                model: base.saturating_mul(scale),
                node: Some(base),
            },
            false => Budget {
                model: base,
                node: None,
            },
        }
    }
}

fn test_work_budget() -> Option<u128> {
    #[cfg(debug_assertions)]
    if let Some(b) = std::env::var("INFOPT_TEST_WORK_BUDGET")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return Some(b);
    }
    None
}

/// Why verification cannot run the model inferred at its sizes within
/// `budget`.
pub fn refusal_in(inferred: &Inferred, budget: Budget) -> Option<String> {
    let work = work_in(inferred);
    let heaviest = work.heaviest?;
    let node_over = budget.node.is_some_and(|n| heaviest.work > n);
    if work.total <= budget.model && !node_over {
        return None;
    }
    let what = match (node_over, budget.node) {
        (true, Some(n)) => format!(
            "more than the {} verification runs one node for",
            count_text(n)
        ),
        _ if budget.node.is_some() => format!(
            "more than the {} verification runs a model for at the sizes it fixes",
            count_text(budget.model)
        ),
        _ => format!(
            "more than the {} verification runs a model for",
            count_text(budget.model)
        ),
    };
    Some(format!(
        "node '{}' ({}) costs {} at the verification sizes ({}), the whole model {}, {what} (multiply-adds, and {ELEMENT_COST} for each element a node writes); give smaller sizes with --input-shape, or skip verification with --no-verify",
        heaviest.node,
        heaviest.op,
        count_text(heaviest.work),
        inferred.sizes_text(),
        count_text(work.total),
    ))
}

/// [`refusal_in`] with the budget for chosen sizes, inferring the model at
/// `shapes`.
pub fn refusal(model: &Model, shapes: &InputShapes) -> Option<String> {
    refusal_in(&infer_at(model, shapes)?, Budget::for_sizes(false))
}

/// `2.0e11`: counts this large read best in scientific notation.
fn count_text(n: u128) -> String {
    if n < 1_000_000 {
        n.to_string()
    } else {
        format!("{:.1e}", n as f64)
    }
}

/// Where the dims of a graph's values come from: inference's facts for the
/// main graph, the `value_info` inference wrote for a subgraph.
struct Shapes<'a> {
    graph: &'a Graph,
    facts: Option<&'a GraphFacts>,
}

impl Shapes<'_> {
    /// Dims of `v` when its rank is known, a dim inference leaves unknown
    /// counting as 1: costs are products of dims, so the estimate stays a
    /// lower bound and a node it prices over the budget is over it at any
    /// value of that dim. (Fuzz seed 2468 case 908: a batch inference lost
    /// upstream left a Conv padded by 2^20 unpriced, and tract's padding of
    /// its input asked for 9.3 GB and aborted.) A negative dim prices
    /// nothing.
    fn dims(&self, v: ValueId) -> Option<Vec<u128>> {
        let owned;
        let dims: &[Dim] = match self.facts.and_then(|f| f.get(v)) {
            Some(fact) => fact.shape()?,
            None => {
                owned = self.graph.value_type(v)?.shape?;
                &owned
            }
        };
        dims.iter()
            .map(|d| match d {
                Dim::Known(n) => u128::try_from(*n).ok(),
                _ => Some(1),
            })
            .collect()
    }

    fn input(&self, node: &Node, i: usize) -> Option<Vec<u128>> {
        self.dims(node.inputs.get(i).copied().flatten()?)
    }

    fn output(&self, node: &Node, i: usize) -> Option<Vec<u128>> {
        self.dims(node.outputs.get(i).copied().flatten()?)
    }

    fn input_elements(&self, node: &Node, i: usize) -> u128 {
        self.input(node, i).map_or(0, |d| product(&d))
    }

    /// Elements of every output inference proves.
    fn output_elements(&self, node: &Node) -> u128 {
        node.outputs
            .iter()
            .flatten()
            .filter_map(|&v| self.dims(v))
            .fold(0u128, |acc, d| acc.saturating_add(product(&d)))
    }
}

fn product(dims: &[u128]) -> u128 {
    dims.iter().fold(1u128, |acc, &d| acc.saturating_mul(d))
}

/// The cost of one node of `shapes.graph`: its products, its bodies', and
/// [`ELEMENT_COST`] for each element it writes.
fn node_work(shapes: &Shapes, node: &Node) -> u128 {
    let written = shapes
        .output_elements(node)
        .saturating_add(padded_input_elements(shapes, node));
    products(shapes, node).saturating_add(written.saturating_mul(ELEMENT_COST))
}

/// A convolution's or pool's padded input, which runtimes build before
/// sliding the window over it (tract does: fuzz seed 2468 case 908, a Conv
/// padded by 2^20 along its width, asked for 9.3 GB there), and 0 for any
/// other node or no padding. A dim inference leaves unknown counts as 1.
fn padded_input_elements(shapes: &Shapes, node: &Node) -> u128 {
    shapes
        .input(node, 0)
        .and_then(|dims| crate::padding::padded_dims(node, &dims))
        .map_or(0, |padded| product(&padded))
}

/// The multiply-adds of one node (its bodies' whole cost included).
fn products(shapes: &Shapes, node: &Node) -> u128 {
    let first_output = || shapes.output(node, 0).map_or(0, |d| product(&d));
    // Per output element, the product of a weight's dims past the first
    // (input channels per group times the kernel).
    let per_output_of_weight = |w: usize| {
        shapes
            .input(node, w)
            .map_or(1, |d| product(d.get(1..).unwrap_or(&[])))
    };
    let kernel = || {
        node.attr_ints("kernel_shape")
            .ok()
            .flatten()
            .map_or(1, |k| {
                k.iter().fold(1u128, |acc, &d| {
                    acc.saturating_mul(u128::try_from(d).unwrap_or(1))
                })
            })
    };
    let domain = node.domain();
    let ms = domain == "com.microsoft";
    if !(domain.is_empty() || ms) {
        return 0;
    }
    match node.op_type.as_str() {
        "Conv" | "ConvInteger" | "FusedConv" | "NhwcConv" => {
            first_output().saturating_mul(per_output_of_weight(1))
        }
        "QLinearConv" => first_output().saturating_mul(per_output_of_weight(3)),
        // Each input element meets a whole kernel slice of the weight.
        "ConvTranspose" => shapes
            .input_elements(node, 0)
            .saturating_mul(per_output_of_weight(1)),
        "MatMul"
        | "MatMulInteger"
        | "FusedMatMul"
        | "QLinearMatMul"
        | "MatMulIntegerToFloat"
        | "DynamicQuantizeMatMul" => {
            let depth = shapes
                .input(node, 0)
                .and_then(|a| a.last().copied())
                .unwrap_or(1);
            first_output().saturating_mul(depth)
        }
        "Gemm" => {
            let trans_a = node.attr_int_or("transA", 0).unwrap_or(0) != 0;
            let depth = shapes
                .input(node, 0)
                .and_then(|a| if trans_a { a.first() } else { a.get(1) }.copied())
                .unwrap_or(1);
            first_output().saturating_mul(depth)
        }
        "MaxPool" | "AveragePool" | "LpPool" | "QLinearAveragePool" => {
            first_output().saturating_mul(kernel())
        }
        "Resize" | "Upsample" => {
            let mode = node.attr_string("mode").ok().flatten().unwrap_or_default();
            let reads = match mode.as_str() {
                "cubic" => 16,
                "linear" | "bilinear" => 4,
                _ => 1,
            };
            first_output().saturating_mul(reads)
        }
        "Einsum" => einsum_work(shapes, node).unwrap_or(0),
        "LSTM" | "GRU" | "RNN" | "DynamicQuantizeLSTM" => {
            // Every step of every sequence multiplies the input and the
            // hidden state by all gate weights of all directions.
            let steps = shapes.input(node, 0).map_or(0, |x| {
                product(x.get(..x.len().saturating_sub(1)).unwrap_or(&[]))
            });
            let weights = shapes
                .input_elements(node, 1)
                .saturating_add(shapes.input_elements(node, 2));
            steps.saturating_mul(weights)
        }
        "Attention" if ms => {
            // Projection of [B, S, hidden] by [hidden, 3 * hidden], then
            // scores and their product with V: 2 * B * S * S * hidden.
            let Some(x) = shapes.input(node, 0) else {
                return 0;
            };
            let rows = product(x.get(..x.len().saturating_sub(1)).unwrap_or(&[]));
            let hidden = x.last().copied().unwrap_or(1);
            let seq = x.get(1).copied().unwrap_or(1);
            let out_width = shapes
                .input(node, 1)
                .and_then(|w| w.last().copied())
                .unwrap_or(1);
            let projection = rows.saturating_mul(hidden).saturating_mul(out_width);
            let scores = rows
                .saturating_mul(seq)
                .saturating_mul(hidden)
                .saturating_mul(2);
            projection.saturating_add(scores)
        }
        "Attention" | "MultiHeadAttention" | "GroupQueryAttention" => {
            // Q times K and the scores times V: 2 * (Q's elements) * keys.
            let q = shapes.input_elements(node, 0);
            let keys = shapes
                .input(node, 1)
                .and_then(|k| k.len().checked_sub(2).and_then(|i| k.get(i)).copied())
                .unwrap_or(1);
            q.saturating_mul(keys).saturating_mul(2)
        }
        "Loop" => {
            let body = bodies_work(node, |a, b| a.max(b));
            let iterations = crate::loop_work::fixed_iterations(shapes.graph, node)
                .and_then(|n| u128::try_from(n).ok())
                .unwrap_or(1);
            body.saturating_mul(iterations)
        }
        "Scan" => {
            let scanned = node.attr_int_or("num_scan_inputs", 1).unwrap_or(1);
            let steps = usize::try_from(scanned)
                .ok()
                .and_then(|n| node.inputs.len().checked_sub(n))
                .and_then(|first| shapes.input(node, first))
                .and_then(|d| d.first().copied())
                .unwrap_or(1);
            bodies_work(node, |a, b| a.max(b)).saturating_mul(steps)
        }
        "If" => bodies_work(node, |a, b| a.max(b)),
        op if op.starts_with("Reduce")
            || op.starts_with("Global")
            || matches!(
                op,
                "ArgMax" | "ArgMin" | "TopK" | "NonZero" | "Softmax" | "LogSoftmax" | "Hardmax"
            ) =>
        {
            shapes.input_elements(node, 0)
        }
        _ => 0,
    }
}

/// The work of a node's bodies, combined with `join`.
fn bodies_work(node: &Node, join: fn(u128, u128) -> u128) -> u128 {
    node.subgraphs()
        .map(|body| {
            let inner = Shapes {
                graph: body,
                facts: None,
            };
            body.nodes().fold(0u128, |acc, (_, n)| {
                acc.saturating_add(node_work(&inner, n))
            })
        })
        .fold(0, join)
}

/// Multiply-adds of an Einsum: the product of the sizes of every letter of
/// its equation (each combination of them is one product), times the
/// broadcast dims an ellipsis stands for.
fn einsum_work(shapes: &Shapes, node: &Node) -> Option<u128> {
    let equation = node.attr_string("equation").ok().flatten()?;
    let inputs = equation.split("->").next()?;
    let mut sizes: std::collections::BTreeMap<char, u128> = Default::default();
    // The ellipsis dims, aligned from the right as they broadcast.
    let mut ellipsis: Vec<u128> = Vec::new();
    for (i, term) in inputs.split(',').enumerate() {
        let dims = shapes.input(node, i)?;
        let term = term.trim();
        let letters = term.chars().filter(char::is_ascii_alphabetic).count();
        let spanned = dims.len().checked_sub(letters)?;
        let mut axis = 0;
        let mut rest = term;
        while let Some(c) = rest.chars().next() {
            if rest.starts_with("...") {
                let span = dims.get(axis..axis + spanned)?;
                if ellipsis.len() < span.len() {
                    let mut grown = vec![1; span.len() - ellipsis.len()];
                    grown.extend_from_slice(&ellipsis);
                    ellipsis = grown;
                }
                let offset = ellipsis.len() - span.len();
                for (slot, &d) in ellipsis[offset..].iter_mut().zip(span) {
                    *slot = (*slot).max(d);
                }
                axis += spanned;
                rest = &rest[3..];
                continue;
            }
            if c.is_ascii_alphabetic() {
                let d = *dims.get(axis)?;
                let slot = sizes.entry(c).or_insert(1);
                *slot = (*slot).max(d);
                axis += 1;
            }
            rest = &rest[c.len_utf8()..];
        }
        // Dims no letter or ellipsis accounts for: not an equation of these inputs.
        if axis != dims.len() {
            return None;
        }
    }
    let letters: Vec<u128> = sizes.into_values().collect();
    Some(product(&letters).saturating_mul(product(&ellipsis)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::builder::{GraphBuilder, dims};
    use infopt_ir::{Attribute, DataType};

    /// `Relu(Conv(x, w))`, `w` of `[out, in / group, 3, 3]`, with `pads`.
    fn conv_model(channels: i64, group: i64, pads: [i64; 4]) -> Model {
        let mut b = GraphBuilder::new();
        let x = b.input(
            "x",
            DataType::Float,
            dims(&["N", &channels.to_string(), "H", "W"]),
        );
        let per_group = channels / group;
        let w = b.f32(
            "w",
            &[channels, per_group, 3, 3],
            &vec![0.5; (channels * per_group * 9) as usize],
        );
        let y = b.op(
            "Conv",
            &[x, w],
            vec![
                Attribute::ints("kernel_shape", vec![3, 3]),
                Attribute::ints("pads", pads.to_vec()),
                Attribute::int("group", group),
            ],
        );
        let r = b.op("Relu", &[y], vec![]);
        b.output(r, "out", DataType::Float, None);
        b.build(17)
    }

    fn sizes(n: usize, h: usize, w: usize) -> InputShapes {
        InputShapes::new()
            .with_symbol("N", n)
            .with_symbol("H", h)
            .with_symbol("W", w)
    }

    #[test]
    fn a_conv_counts_each_output_times_its_weight_slice() {
        // [1,8,32,32] outputs of 8 channels x 3 x 3 products each, the
        // padded input [1,8,34,34] written first, and a Relu writing as
        // many elements as the Conv.
        let work = work_at(&conv_model(8, 1, [1, 1, 1, 1]), &sizes(1, 32, 32)).expect("inferred");
        assert_eq!(
            work.total,
            8192 * (72 + ELEMENT_COST) + 9248 * ELEMENT_COST + 8192 * ELEMENT_COST
        );
        assert_eq!(work.elements, 2 * 8192);
        let heaviest = work.heaviest.expect("a node");
        assert_eq!(
            (heaviest.op.as_str(), heaviest.work),
            ("Conv", 8192 * (72 + ELEMENT_COST) + 9248 * ELEMENT_COST)
        );
        // Depthwise: one input channel per output.
        let work = work_at(&conv_model(8, 8, [1, 1, 1, 1]), &sizes(1, 32, 32)).expect("inferred");
        assert_eq!(
            work.total,
            8192 * (9 + 2 * ELEMENT_COST) + 9248 * ELEMENT_COST
        );
    }

    #[test]
    fn matmul_gemm_and_einsum_count_their_products() {
        let mut b = GraphBuilder::new();
        let a = b.input("a", DataType::Float, dims(&["2", "5", "7"]));
        let w = b.f32("w", &[7, 4], &[0.5; 28]);
        let m = b.op("MatMul", &[a, w], vec![]);
        let c = b.input("c", DataType::Float, dims(&["2", "4", "5"]));
        let e = b.op(
            "Einsum",
            &[m, c],
            vec![Attribute::string("equation", "bij,bjk->bik")],
        );
        let e2 = b.op(
            "Einsum",
            &[m, c],
            vec![Attribute::string("equation", "...ij,...jk->...ik")],
        );
        let g_in = b.input("g", DataType::Float, dims(&["6", "3"]));
        let g_w = b.f32("gw", &[6, 2], &[0.5; 12]);
        let g = b.op("Gemm", &[g_in, g_w], vec![Attribute::int("transA", 1)]);
        b.output(e, "e", DataType::Float, None);
        b.output(e2, "e2", DataType::Float, None);
        b.output(g, "gemm", DataType::Float, None);
        let work = work_at(&b.build(17), &InputShapes::new()).expect("inferred");
        // MatMul [2,5,4] x 7, each Einsum b * i * j * k = 2 * 5 * 4 * 5
        // writing [2,5,5], Gemm [3,2] x 6.
        let written = 40 + 2 * 50 + 6;
        assert_eq!(
            work.total,
            40 * 7 + 200 + 200 + 6 * 6 + written * ELEMENT_COST
        );
    }

    #[test]
    fn padding_that_multiplies_the_work_is_refused_naming_the_node() {
        // 100000 rows of padding on a depthwise Conv: 100031 x 32 x 8
        // outputs (100 MB: it fits) of 9 products each, and a Relu.
        let m = conv_model(8, 8, [100_000, 1, 1, 1]);
        let inferred = infer_at(&m, &sizes(1, 32, 32)).expect("inferred");
        let chosen = |model| Budget { model, node: None };
        assert_eq!(
            refusal_in(&inferred, chosen(1_000_000_000)).as_deref(),
            Some(
                "node 'conv_1' (Conv) costs 2.3e9 at the verification sizes (x [1,8,32,32]), the whole model 3.4e9, more than the 1.0e9 verification runs a model for (multiply-adds, and 40 for each element a node writes); give smaller sizes with --input-shape, or skip verification with --no-verify"
            )
        );
        assert_eq!(refusal_in(&inferred, Budget::for_sizes(false)), None);
        // At fixed sizes the model may cost more, no node more than a node's
        // budget: the padded Conv is the node refused.
        let fixed = Budget {
            model: 10_000_000_000,
            node: Some(1_000_000_000),
        };
        assert_eq!(
            refusal_in(&inferred, fixed).as_deref(),
            Some(
                "node 'conv_1' (Conv) costs 2.3e9 at the verification sizes (x [1,8,32,32]), the whole model 3.4e9, more than the 1.0e9 verification runs one node for (multiply-adds, and 40 for each element a node writes); give smaller sizes with --input-shape, or skip verification with --no-verify"
            )
        );
        // Without the padding the same model is far under the budget.
        let plain = infer_at(&conv_model(8, 8, [1, 1, 1, 1]), &sizes(1, 32, 32)).expect("inferred");
        assert_eq!(refusal_in(&plain, chosen(1_000_000_000)), None);
    }

    #[test]
    fn at_fixed_sizes_a_model_spread_over_its_layers_may_cost_more() {
        // Eight 3x3 Convs of 64 channels at 256x256: 2.8e9 each with what they
        // write, 2.2e10 in all.
        let mut b = GraphBuilder::new();
        let mut x = b.input("x", DataType::Float, dims(&["1", "64", "256", "256"]));
        for i in 0..8 {
            let w = b.f32(&format!("w{i}"), &[64, 64, 3, 3], &vec![0.01; 64 * 64 * 9]);
            x = b.op(
                "Conv",
                &[x, w],
                vec![Attribute::ints("pads", vec![1, 1, 1, 1])],
            );
        }
        b.output(x, "y", DataType::Float, None);
        let m = b.build(13);
        let inferred = infer_at(&m, &InputShapes::default()).expect("inferred");
        let (model, node) = (10_000_000_000, 3_000_000_000);
        assert!(refusal_in(&inferred, Budget { model, node: None }).is_some());
        assert_eq!(
            refusal_in(
                &inferred,
                Budget {
                    model: 10 * model,
                    node: Some(node)
                }
            ),
            None
        );
        let over = refusal_in(
            &inferred,
            Budget {
                model,
                node: Some(node),
            },
        )
        .expect("over the model's budget");
        assert!(
            over.contains("the whole model 2.2e10, more than the 1.0e10 verification runs a model for at the sizes it fixes"),
            "{over}"
        );
    }

    #[test]
    fn a_for_loop_body_counts_once_per_iteration() {
        let mut body = GraphBuilder::new();
        body.input("i", DataType::Int64, dims(&[]));
        let cond = body.input("cond", DataType::Bool, dims(&[]));
        let v = body.input("v", DataType::Float, dims(&["1000"]));
        let next = body.op("Relu", &[v], vec![]);
        let cond_out = body.op("Identity", &[cond], vec![]);
        body.output(cond_out, "cond_out", DataType::Bool, Some(dims(&[])));
        body.output(next, "v_out", DataType::Float, Some(dims(&["1000"])));
        let body = body.into_graph();
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["1000"]));
        let trip = b.i64("M", &[], &[500]);
        let t = b.initializer(
            "c",
            infopt_ir::Tensor::from_raw(DataType::Bool, vec![], vec![1u8].into()),
        );
        let y = b.op("Loop", &[trip, t, x], vec![Attribute::graph("body", body)]);
        b.output(y, "y", DataType::Float, None);
        let work = work_at(&b.build(17), &InputShapes::new()).expect("inferred");
        // 500 iterations of a Relu writing 1000 elements and an Identity
        // writing one, and the Loop's own 1000.
        assert_eq!(work.total, (500 * 1001 + 1000) * ELEMENT_COST);
    }
}
