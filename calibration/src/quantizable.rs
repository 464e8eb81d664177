//! The tensors an INT8 placement may quantize. Under a histogram method,
//! binning every observed tensor is most of a calibration's time (DeepCut's
//! character CNN: 147 tensors binned, 32 quantized; binning and min/max
//! scans 64% of a 3.9 s calibration). The optimize command's INT8 step only
//! reads the ranges of the activations some placement gives a Q/DQ: the
//! others keep their min and max (their range is then the full one, named
//! [`NOT_QUANTIZED`]), and are not binned.

use std::collections::BTreeSet;

use infopt_ir::{DataType, Model};
use infopt_passes::Target;

use crate::amax::Amax;
use crate::quantize::placement::{self, Settings};

/// The method named in range tables for a tensor no placement quantizes.
pub const NOT_QUANTIZED: &str = "minmax (no INT8 placement reads it)";

/// Every activation that one of the placements quantizes with every
/// weighted layer in INT8 (the portable/TensorRT placement, and ONNX
/// Runtime's with depthwise convolutions and elementwise ops in INT8,
/// which quantizes the most): a superset of what any keep-set quantizes.
/// It runs the placement itself, so what it quantizes and this set cannot
/// drift apart.
/// None when the graph cannot be planned (every tensor is then binned).
pub fn quantizable_tensors(model: &Model) -> Option<BTreeSet<String>> {
    let g = &model.graph;
    // A range for every tensor: the placement itself leaves out what is
    // not float (and constants).
    let mut every = Amax::default();
    for v in g.value_ids() {
        let name = &g.value(v).name;
        if !name.is_empty() {
            every.0.insert(name.clone(), 1.0);
        }
    }
    // The activation type (UINT8 or INT8 on ONNX Runtime) sets the
    // scales' type, not which tensors get them.
    let mut out = BTreeSet::new();
    for target in [Target::Portable, Target::Onnxruntime] {
        let settings = Settings {
            target,
            exclude: Vec::new(),
            keep_first_last: false,
            ort_activation: DataType::Uint8,
            ort_float_depthwise: false,
            ort_float_elementwise: false,
        };
        let plan = placement::plan(g, &every, &settings).ok()?;
        out.extend(plan.acts.keys().map(|&v| g.value(v).name.clone()));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::builder::{GraphBuilder, dims};

    #[test]
    fn what_a_layer_reads_is_quantizable_and_what_only_float_ops_touch_is_not() {
        // x -> Sqrt -> s -> Log -> l -> MatMul -> y: the layer's input gets
        // a Q/DQ in every placement; s is made and read by float ops only.
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["2", "4"]));
        let s = b.op("Sqrt", &[x], vec![]);
        let l = b.op("Log", &[s], vec![]);
        let w = b.f32("w", &[4, 3], &[0.5; 12]);
        let y = b.op("MatMul", &[l, w], vec![]);
        b.output(y, "y", DataType::Float, None);
        let q = quantizable_tensors(&b.build(13)).unwrap();
        // Outputs are named after their node: sqrt_1_out is s, log_2_out l.
        assert!(q.contains("log_2_out"), "{q:?}");
        assert!(!q.contains("sqrt_1_out") && !q.contains("x"), "{q:?}");
    }
}
