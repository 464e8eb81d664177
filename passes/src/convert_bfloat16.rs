//! Converts the float32 computation of the graph to bfloat16, keeping
//! numerically sensitive ops in float32, with Casts only at the borders.
//!
//! ## What it does
//! The same rewrite as `convert-float16` (one implementation, see
//! convert_float16.rs) with bfloat16 as the target: the allow-list follows
//! the ONNX schemas' bfloat16 support, which arrived later than float16
//! (most ops at opset 13; Conv, ConvTranspose, pooling, HardSigmoid, Elu,
//! Softplus and InstanceNormalization only at opset 22), so at older opsets
//! those stay float32. The pipeline's `precision:` map chooses the nodes as
//! for float16 (`default: bf16`).
//!
//! ## When it declines
//! As `convert-float16`: the precision map keeps the node, the op has no
//! bfloat16 form at the model's opset or is not on the allow-list, it is
//! numerically sensitive, a type is unknown, or a subgraph reads its output.
//!
//! ## Numerics
//! bfloat16 has float32's range (no clamping in practice) but only 8
//! significant bits: relative error ~4e-3 per rounding, so expect cosine
//! ≥ 0.999 on well-conditioned models but larger absolute differences than
//! float16. ONNX Runtime's CPU provider has no bfloat16 kernels for compute
//! ops and does not insert Casts for them: the result is for TensorRT and
//! GPU execution providers, not for ONNX Runtime on CPU.
//!
//! ## Example
//! `x:f32 → MatMul(W) → Relu → y:f32` becomes
//! `x → Cast(bf16) → MatMul(W:bf16) → Relu → Cast(f32) → y`.

crate::register_pass! {
    name: "convert-bfloat16",
    kind: Shape,
    file: "convert_bfloat16.rs",
    options: crate::convert_float16::ConvertOptions,
    build: |o: &crate::convert_float16::ConvertOptions| crate::convert_float16::ConvertFloat {
        to: crate::convert_float16::Half::Bf16,
        options: o.clone(),
    },
    numerics: HalfPrecision,
}
