//! fold-constants with a registered fallback evaluator (its own test binary:
//! the registration is process-wide).

mod common;

use common::*;
use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::kernels::{Evaluator, KernelError};
use infopt_ir::{DataType, Node, Tensor};
use infopt_passes::fold_constants::register_fallback_evaluator;

/// Implements Erf only (as tract would, for ops the reference kernels lack).
struct ErfOnly;

impl Evaluator for ErfOnly {
    fn eval(
        &self,
        node: &Node,
        inputs: &[Option<&Tensor>],
        _opset: i64,
    ) -> Result<Option<Vec<Tensor>>, KernelError> {
        if node.op_type != "Erf" {
            return Ok(None);
        }
        let x = inputs[0]
            .expect("Erf input")
            .to_f64_vec()
            .map_err(|e| KernelError::Invalid(e.to_string()))?;
        // A crude erf is enough to see which evaluator ran.
        let y: Vec<f32> = x.iter().map(|v| v.signum() as f32).collect();
        Ok(Some(vec![Tensor::from_f32(vec![y.len() as i64], &y)]))
    }
}

#[test]
fn registered_fallback_serves_ops_without_a_reference_kernel() {
    assert!(register_fallback_evaluator(|| Box::new(ErfOnly)));
    assert!(
        !register_fallback_evaluator(|| Box::new(ErfOnly)),
        "first registration wins"
    );
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2"]));
    let c = b.f32("c", &[2], &[0.5, -2.0]);
    let e = b.op("Erf", &[c], vec![]);
    let n = b.op("Neg", &[e], vec![]);
    let y = b.op("Add", &[n, x], vec![]);
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(17);
    let run = run_passes(&mut m, &["fold-constants", "eliminate-dead"]);
    assert!(run.declined.is_empty(), "{:?}", run.declined);
    assert_eq!(ops(&m), histogram(&[("Add", 1)]));
    // Erf by the fallback, Neg by the reference kernels.
    let g = &m.graph;
    let (_, add) = g.nodes().next().unwrap();
    let k = g.constant(add.inputs[0].unwrap()).unwrap();
    assert_eq!(k.to_f64_vec().unwrap(), vec![-1.0, 1.0]);
}
