//! Records the inferred type and shape of every value in the model.
//!
//! ## What it does
//! Runs infopt's shape and type inference over the main graph and every
//! subgraph and writes what it proves into `value_info` and the graph output
//! declarations, with symbolic dims (`batch`, `seq`, and derived dims such as
//! `seq+1` or `2*batch`). Facts the model already states are never replaced by
//! less precise ones. Other passes (and runtimes) read these facts; folding and
//! `fix-shapes` run inference themselves.
//!
//! ## When it declines
//! Ops without an inference rule (custom domains, rare ops) are reported, once
//! per op type with their node count; their outputs stay unknown. A fact in the
//! model that contradicts inference is kept and reported as a note.
//!
//! ## Numerics
//! None: only type annotations change.
//!
//! ## Example
//! `y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]))` with
//! `x: [batch, 4, 8, 8]` gets `y: [batch, 256]` in `value_info`.

crate::register_pass! {
    name: "infer-shapes",
    kind: Shape,
    file: "infer_shapes.rs",
    options: crate::registry::NoOptions,
    build: |_| InferShapes,
    numerics: Exact,
}

use infopt_ir::Model;
use infopt_ir::infer::infer_shapes;

use crate::pass::{Pass, PassCx, PassError};

pub struct InferShapes;

impl Pass for InferShapes {
    fn name(&self) -> &'static str {
        "infer-shapes"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        let report = infer_shapes(model);
        for (op, n) in &report.blocked {
            cx.decline(
                op,
                format!(
                    "no shape inference rule for \"{op}\" ({n} node(s)): its outputs stay unknown"
                ),
            );
        }
        for c in &report.conflicts {
            cx.note(format!("infer-shapes: {c}"));
        }
        Ok(report.updated)
    }
}
