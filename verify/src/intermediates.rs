//! Comparing every tensor two models compute under the same name, to find
//! where they start to diverge (`compare --intermediate`,
//! `optimize --verify-each-pass`). Each model is loaded once for
//! observation; A's tensors are kept until B's twin has been compared, then
//! dropped.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use infopt_ir::{Graph, Model};
use infopt_runtime::compare::{self, OutputAgreement, Tolerance};
use infopt_runtime::{Backend, HostTensor, InputShapes, Observe};
use serde::Serialize;

use crate::error::{ErrorKind, Result, VerifyError};
use crate::observe::{computed_tensors, load_observing};

/// One model to compare: the IR, the folder its external data lives in, and its inputs.
pub struct Side<'a> {
    pub model: &'a Model,
    pub dir: PathBuf,
    pub inputs: &'a [HostTensor],
}

#[derive(Serialize, Debug, Clone)]
pub struct IntermediateAgreement {
    /// The tensor's name in both models.
    pub name: String,
    /// The node of A that produces it.
    pub op_type: String,
    pub node: String,
    pub agreement: OutputAgreement,
}

#[derive(Serialize, Debug)]
pub struct IntermediateReport {
    /// Tensors computed under the same name in both models (graph outputs excluded).
    pub compared: usize,
    pub diverging: usize,
    /// Names left out, with the reason (e.g. a non-tensor type).
    pub skipped: Vec<String>,
    /// The first diverging tensor in A's topological order.
    pub first_divergence: Option<IntermediateAgreement>,
    /// Every compared tensor, in A's topological order.
    pub tensors: Vec<IntermediateAgreement>,
}

/// Whether the IR knows the tensor's element type is one no backend here holds.
fn unsupported_type(g: &Graph, name: &str) -> Option<String> {
    let v = g.find_value(name)?;
    let ty = g.value_type(v)?;
    let code = ty.dtype.code();
    if code == 0 || infopt_runtime::DType::from_onnx(code).is_some() {
        return None;
    }
    Some(ty.dtype.name())
}

/// Runs both models observing the tensors they share and compares them.
pub fn compare(
    backend: &dyn Backend,
    shapes: &InputShapes,
    a_side: Side<'_>,
    b_side: Side<'_>,
    tol: Tolerance,
) -> Result<IntermediateReport> {
    compare_these(backend, shapes, a_side, b_side, tol, &|_| true)
}

/// [`compare`] limited to the shared tensors `wanted` names: a caller that
/// reads a few (the INT8 report's layers) does not pay for observing and
/// comparing the rest (brainmaze's spindle U-Net: 300 M values a sample
/// over 220 tensors, 4.6 s for the report's ten lines).
pub fn compare_these(
    backend: &dyn Backend,
    shapes: &InputShapes,
    a_side: Side<'_>,
    b_side: Side<'_>,
    tol: Tolerance,
    wanted: &dyn Fn(&str) -> bool,
) -> Result<IntermediateReport> {
    let (a, b) = (a_side.model, b_side.model);
    let in_b: HashSet<String> = computed_tensors(b)?
        .into_iter()
        .map(|(n, _, _)| n)
        .collect();
    let mut skipped = Vec::new();
    let mut common: Vec<(String, String, String)> = Vec::new();
    for (name, op, node) in computed_tensors(a)? {
        if !in_b.contains(&name) || !wanted(&name) {
            continue;
        }
        if let Some(t) =
            unsupported_type(&a.graph, &name).or_else(|| unsupported_type(&b.graph, &name))
        {
            skipped.push(format!("{name} ({t})"));
            continue;
        }
        common.push((name, op, node));
    }
    let names: Vec<String> = common.iter().map(|(n, _, _)| n.clone()).collect();
    let observe = Observe::Names(names);
    let hint = if backend.name() == "tract" {
        " (try --backend ort)"
    } else {
        ""
    };
    let fail = |e: VerifyError| {
        VerifyError::new(
            ErrorKind::CannotVerify,
            format!(
                "cannot observe the intermediate tensors in {}: {}{hint}",
                backend.name(),
                e.message
            ),
        )
    };
    // Both sessions at once where their weights fit four times over in a
    // quarter of the memory (the second's load, ONNX Runtime's graph
    // preparation of every tensor as an output, is half the time of a
    // comparison); one after the other otherwise, the first dropped first.
    let weights = |m: &Model| infopt_ir::stats::GraphStats::of_model(m).parameter_bytes;
    let side_by_side = crate::memory::available_bytes()
        .is_some_and(|free| 4 * (weights(a) + weights(b)) < free / 4);
    let load_b = || load_observing(backend, b, &b_side.dir, shapes, &observe).map_err(fail);
    let (kept, mb) = if side_by_side {
        std::thread::scope(|scope| {
            let loading = scope.spawn(load_b);
            let kept = observe_run(backend, a, &a_side, shapes, &observe, &fail);
            let mb = loading.join().unwrap_or_else(|_| {
                Err(VerifyError::new(
                    ErrorKind::Internal,
                    "loading the second model for the comparison panicked",
                ))
            });
            (kept, mb)
        })
    } else {
        let kept = observe_run(backend, a, &a_side, shapes, &observe, &fail);
        (kept, load_b())
    };
    let (mut kept, mb) = (kept?, mb?);
    let mut results: HashMap<String, OutputAgreement> = HashMap::new();
    mb.run_observed(b_side.inputs, &mut |t| {
        if let Some(n) = t.name()
            && let Some(ta) = kept.remove(n)
        {
            results.insert(n.to_string(), compare::compare_tensors(n, t, &ta, tol));
        }
        Ok(())
    })
    .map_err(|e| fail(VerifyError::new(ErrorKind::CannotVerify, e)))?;
    let mut tensors = Vec::with_capacity(common.len());
    for (name, op_type, node) in common {
        let Some(agreement) = results.remove(&name) else {
            skipped.push(format!("{name} (not observed in both models)"));
            continue;
        };
        tensors.push(IntermediateAgreement {
            name,
            op_type,
            node,
            agreement,
        });
    }
    let diverging = tensors
        .iter()
        .filter(|t| !t.agreement.within_tolerance)
        .count();
    let first_divergence = tensors
        .iter()
        .find(|t| !t.agreement.within_tolerance)
        .cloned();
    Ok(IntermediateReport {
        compared: tensors.len(),
        diverging,
        skipped,
        first_divergence,
        tensors,
    })
}

/// The observed tensors of `model` run on its side's inputs, by name.
fn observe_run(
    backend: &dyn Backend,
    model: &Model,
    side: &Side<'_>,
    shapes: &InputShapes,
    observe: &Observe,
    fail: &dyn Fn(VerifyError) -> VerifyError,
) -> Result<HashMap<String, HostTensor>> {
    let m = load_observing(backend, model, &side.dir, shapes, observe).map_err(fail)?;
    let mut kept: HashMap<String, HostTensor> = HashMap::new();
    m.run_observed(side.inputs, &mut |t| {
        if let Some(n) = t.name() {
            kept.insert(n.to_string(), t.clone());
        }
        Ok(())
    })
    .map_err(|e| fail(VerifyError::new(ErrorKind::CannotVerify, e)))?;
    Ok(kept)
}
