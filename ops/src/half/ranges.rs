//! Ranges: the largest magnitude every float32 tensor takes on the
//! verification inputs, and the float16 nodes that would overflow there.

use std::collections::HashMap;

use infopt_ir::Model;
use infopt_verify::Verifier;

use super::nodes::half_nodes;
use crate::error::{ErrorKind, OpsError, OpsResult};

/// Share of float16's largest value at which an output is kept in
/// float32: other inputs than the verification ones may go further.
pub const RANGE_MARGIN: f64 = 0.5;

/// Largest finite magnitude of every float tensor `model` computes on the
/// verification inputs (graph outputs from the verifier's reference run).
/// The tensors are read where the backend put them, a run's worth at a
/// time and on every core, with no histogram (the extremes are all this
/// needs): no host copy of every intermediate of a full-size input.
pub(super) fn tensor_ranges(v: &Verifier, model: &Model) -> OpsResult<HashMap<String, f64>> {
    tensor_ranges_on(v, model, &v.inputs, true)
}

/// [`tensor_ranges`] on `inputs`; `expected`: the verifier's reference
/// outputs are those of these inputs (their graph outputs count too).
pub(super) fn tensor_ranges_on(
    v: &Verifier,
    model: &Model,
    inputs: &[infopt_runtime::HostTensor],
    expected: bool,
) -> OpsResult<HashMap<String, f64>> {
    use infopt_verify::observe::{computed_tensors, load_observing};
    let names: Vec<String> = computed_tensors(model)?
        .into_iter()
        .map(|(n, _, _)| n)
        .collect();
    let observe = infopt_runtime::Observe::Names(names);
    // The reference backend runs the graph as written (ONNX Runtime at
    // `disable`), as it ran the original for the expected outputs.
    let loaded = load_observing(
        v.chosen.reference_backend(),
        model,
        &v.dir,
        &v.shapes,
        &observe,
    )?;
    let mut extremes = infopt_calibration::RangeCollector::new().without_histograms();
    loaded
        .run_observed_views(inputs, &mut |views| {
            extremes.observe_views(views);
            Ok(())
        })
        .map_err(|e| {
            OpsError::new(
                ErrorKind::CannotVerify,
                format!("cannot observe the float32 model's tensors: {e}"),
            )
        })?;
    if expected {
        for t in &v.expected {
            extremes.observe_named(t);
        }
    }
    Ok(extremes
        .iter()
        .map(|(name, stats)| (name.to_string(), f64::from(stats.abs_max())))
        .collect())
}

/// Nodes the candidate runs in float16 whose float32 outputs or inputs come
/// within [`RANGE_MARGIN`] of float16's largest value, with the largest such
/// tensor and its magnitude.
pub(super) fn out_of_range(
    fp32: &Model,
    candidate: &Model,
    ranges: &HashMap<String, f64>,
) -> Vec<(String, String, String, f64)> {
    let limit = half::f16::MAX.to_f32() as f64 * RANGE_MARGIN;
    let half = half_nodes(candidate);
    let g = &fp32.graph;
    let mut out = Vec::new();
    for (_, node) in g.nodes() {
        let Some(name) = node.name.clone().filter(|n| half.contains(n)) else {
            continue;
        };
        // Its outputs, and its inputs: a reader of a tensor beyond the range
        // would read it through a Cast to float16, which overflows too.
        let Some((tensor, max)) = node
            .outputs
            .iter()
            .chain(node.inputs.iter())
            .flatten()
            .filter_map(|v| {
                let t = &g.value(*v).name;
                ranges.get(t).map(|m| (t.clone(), *m))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
        else {
            continue;
        };
        if max >= limit {
            out.push((name, node.op_type.clone(), tensor, max));
        }
    }
    out
}

/// Whether `node` (by name) produces the tensor named `tensor`.
pub(super) fn produces(model: &Model, node: &str, tensor: &str) -> bool {
    let g = &model.graph;
    g.find_node(node).is_some_and(|id| {
        g.node(id)
            .outputs
            .iter()
            .flatten()
            .any(|v| g.value(*v).name == tensor)
    })
}
