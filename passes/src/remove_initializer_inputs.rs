//! Stops listing initializers as graph inputs, so they count as constants.
//!
//! ## What it does
//! Exporters following IR < 4 (and torch's `keep_initializers_as_inputs=True`)
//! list every weight as a graph input with a default value. ONNX semantics let
//! a caller override such inputs at run time, so no pass may treat them as
//! constants and nothing folds or fuses. This pass removes those entries from
//! the graph inputs (the initializers stay), which is what every deployment of
//! such a model does in practice: the weights are never fed. Inputs without an
//! initializer are untouched. The report notes how many inputs were removed.
//!
//! ## When it declines
//! Never on the main graph; subgraph inputs are the body's parameters and are
//! left alone. Do not run it on a model whose callers really override a
//! defaulted input (leave it out of the pipeline with `--disable`).
//!
//! ## Numerics
//! Exact for every caller that does not override the defaulted inputs.
//!
//! ## Example
//! Inputs `[input, conv1.weight, conv1.bias]` with initializers for both
//! weights become inputs `[input]`; Conv+BatchNormalization can then fold.

crate::register_pass! {
    name: "remove-initializer-inputs",
    kind: Canonicalize,
    file: "remove_initializer_inputs.rs",
    options: crate::registry::NoOptions,
    build: |_| RemoveInitializerInputs,
    numerics: Exact,
}

use infopt_ir::Model;

use crate::pass::{Pass, PassCx, PassError};

pub struct RemoveInitializerInputs;

impl Pass for RemoveInitializerInputs {
    fn name(&self) -> &'static str {
        "remove-initializer-inputs"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        let g = &mut model.graph;
        let before = g.inputs.len();
        let values: Vec<_> = g.inputs.iter().map(|io| io.value).collect();
        let keep: Vec<bool> = values
            .iter()
            .map(|&v| g.value(v).initializer.is_none())
            .collect();
        let mut k = keep.iter();
        g.inputs.retain(|_| *k.next().unwrap_or(&true));
        let removed = before - g.inputs.len();
        // IR 3 requires every initializer to be a graph input; IR 4 lifted that.
        if removed > 0 && model.meta.ir_version.is_some_and(|v| v < 4) {
            model.meta.ir_version = Some(4);
            cx.note("remove-initializer-inputs: ir_version raised to 4 (IR 3 requires initializers to be inputs)");
        }
        if removed > 0 {
            cx.note(format!(
                "remove-initializer-inputs: {removed} initializers are no longer graph inputs (they were defaults callers could override)"
            ));
        }
        Ok(removed)
    }
}
