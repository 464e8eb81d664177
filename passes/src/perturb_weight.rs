//! Test-only: adds 1.0 to one element of the largest float initializer.
//!
//! ## What it does
//! Plants a numerical bug on purpose, so the tests of verification,
//! `--verify-each-pass` and `compare --intermediate` have something real to
//! find. It is hidden from `passes list` and refused unless the environment
//! variable `INFOPT_TEST_PASSES=1` is set.
//!
//! ## When it declines
//! When the model has no float32 initializer.
//!
//! ## Numerics
//! Wrong on purpose.
//!
//! ## Example
//! `INFOPT_TEST_PASSES=1 infopt optimize m.onnx --passes perturb-weight` fails verification.

crate::register_pass! {
    name: "perturb-weight",
    kind: Canonicalize,
    file: "perturb_weight.rs",
    options: crate::registry::NoOptions,
    build: |_| PerturbWeight,
    hidden: true,
}

use infopt_ir::{DataType, Model, Tensor};

use crate::pass::{Pass, PassCx, PassError};

pub struct PerturbWeight;

pub use crate::pass_info::TEST_PASSES_ENV;

impl Pass for PerturbWeight {
    fn name(&self) -> &'static str {
        "perturb-weight"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        let g = &mut model.graph;
        let target = g
            .initializers()
            .filter(|(v, t)| t.dtype() == DataType::Float && !g.is_graph_input(*v))
            .max_by_key(|(_, t)| t.numel().unwrap_or(0))
            .map(|(v, _)| v);
        let Some(v) = target else {
            cx.decline("model", "no float32 initializer to perturb");
            return Ok(0);
        };
        let tensor = g.value(v).initializer.as_ref().expect("initializer");
        let mut values: Vec<f32> = tensor.to_f64_vec()?.into_iter().map(|x| x as f32).collect();
        if let Some(first) = values.first_mut() {
            *first += 1.0;
        }
        let dims = tensor.dims().to_vec();
        let name = g.value(v).name.clone();
        g.value_mut(v).initializer = Some(Tensor::from_f32(dims, &values));
        cx.note(format!("perturb-weight changed '{name}'[0] by +1.0"));
        Ok(1)
    }
}
