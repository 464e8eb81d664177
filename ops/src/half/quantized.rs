//! A model whose activations are already quantized stays float32 under
//! `--fp16`. Its activations are rounded to INT8 steps at every
//! QuantizeLinear; float16's error before one moves a value across a step
//! now and then, and each such flip is a whole step's error, not
//! float16's. pipecat's Smart Turn v3.2 (shipped INT8 by ONNX Runtime's
//! quantizer) changed 4% of its decisions in float16 while the verification
//! on two generated inputs passed. A model with INT8 weights alone
//! (DequantizeLinear of constants, no QuantizeLinear of activations) has
//! no such steps and converts as any other.

use infopt_ir::Model;

/// What `--fp16` says of a model whose activations are quantized, or None.
pub(super) fn quantized_activations(model: &Model, ty: &str) -> Option<String> {
    let count = crate::quantized_input::rounding_nodes(&model.graph);
    (count > 0).then(|| {
        format!(
            "the model's activations are already quantized ({count} node(s) round them to integers): {ty} before those roundings would move values across INT8 steps, so every node stayed float32 (convert its float export instead)"
        )
    })
}
