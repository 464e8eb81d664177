//! What a model that arrives already quantized holds: the ops that round
//! activations to integers (QuantizeLinear, a dynamic quantization, the
//! QLinear and integer ops) and those that only read integers back
//! (DequantizeLinear: INT8 or INT4 weights). `--int8` leaves either kind
//! as it is (`int8.rs`); `--fp16` keeps float32 only where activations
//! are rounded (`half/quantized.rs`).

use infopt_ir::Graph;

/// Ops that round activations to integers.
const ROUNDING_OPS: [&str; 6] = [
    "QuantizeLinear",
    "DynamicQuantizeLinear",
    "QLinearConv",
    "QLinearMatMul",
    "MatMulInteger",
    "ConvInteger",
];

/// Nodes of `g` that round activations to integers.
pub fn rounding_nodes(g: &Graph) -> usize {
    g.nodes()
        .filter(|(_, n)| ROUNDING_OPS.contains(&n.op_type.as_str()))
        .count()
}

/// Nodes of `g` that quantize or dequantize anything.
pub fn quantized_nodes(g: &Graph) -> usize {
    rounding_nodes(g)
        + g.nodes()
            .filter(|(_, n)| n.op_type == "DequantizeLinear")
            .count()
}
