//! Axes and steps that index a runtime's tables: a Transpose `perm` that is
//! not a permutation (an entry of 2147483647 made tract index past its axes
//! and panic, and ONNX Runtime throw while creating the kernel), and a Slice
//! step of 0 (tract divided by it; ONNX Runtime refuses it only when it
//! runs). Such a model is a model error naming the node, found at load.

use crate::error::{IrError, Result};
use crate::graph::{Graph, Node, ValueId};
use crate::tensor::Tensor;

fn invalid(node: &Node, what: String) -> IrError {
    IrError::Invalid(format!(
        "node '{}' ({}): {what}",
        node.name_or_op(),
        node.op_type
    ))
}

/// `perm` (when given) holds each axis of the input once: no duplicate, no
/// negative entry, and with the input's rank `rank` known, `rank` entries
/// below it.
pub(crate) fn check_perm(node: &Node, rank: Option<usize>) -> Result<()> {
    let Some(perm) = node.attr_ints("perm")? else {
        return Ok(());
    };
    let n = rank.unwrap_or(perm.len());
    let mut seen = vec![false; perm.len()];
    for &p in perm {
        let fits = usize::try_from(p).ok().filter(|&i| i < n && i < seen.len());
        match fits {
            Some(i) if !seen[i] => seen[i] = true,
            _ => {
                return Err(invalid(
                    node,
                    format!(
                        "attribute 'perm': {perm:?} is not a permutation of the {n} axes of its input"
                    ),
                ));
            }
        }
    }
    if perm.len() != n {
        return Err(invalid(
            node,
            format!(
                "attribute 'perm': {perm:?} has {} entries for an input of rank {n}",
                perm.len()
            ),
        ));
    }
    Ok(())
}

/// `read` of the tensor a value holds when the file states it: an
/// initializer or a `Constant` node's value.
fn read_stated<T>(g: &Graph, v: ValueId, read: impl Fn(&Tensor) -> Option<T>) -> Option<T> {
    if let Some(t) = g.constant(v) {
        return read(t);
    }
    let p = g.producer(v)?;
    if !(p.domain().is_empty() && p.op_type == "Constant") {
        return None;
    }
    read(&crate::infer::constant_value(p)?)
}

/// The integers a value holds when the file states them.
fn constant_ints(g: &Graph, v: ValueId) -> Option<Vec<i64>> {
    read_stated(g, v, |t| t.to_i64_vec().ok())
}

/// The element count of a value the file states.
fn constant_numel(g: &Graph, v: ValueId) -> Option<usize> {
    read_stated(g, v, Tensor::numel)
}

/// Resize from opset 11 takes its output size from `scales` (input 2) or
/// `sizes` (input 3): one of them must be there, an empty tensor counting as
/// absent (opset 11 exports pass an empty `scales` next to `sizes`). With
/// neither, tract panicked at load and ONNX Runtime refused only when it ran
/// (fuzz seed 70707 case 1674: a det model's Resize inputs permuted).
pub(crate) fn check_resize_has_a_size(g: &Graph, node: &Node, opset: i64) -> Result<()> {
    if opset < 11 {
        return Ok(());
    }
    // Given, unless absent or a stated empty tensor; a computed one counts.
    let given = |slot: usize| {
        node.inputs
            .get(slot)
            .copied()
            .flatten()
            .is_some_and(|v| constant_numel(g, v) != Some(0))
    };
    if given(2) || given(3) {
        return Ok(());
    }
    Err(invalid(
        node,
        "neither 'scales' (input 2) nor 'sizes' (input 3) is given (an empty tensor counts as none); Resize needs one of them for its output size".into(),
    ))
}

/// Slice (opset 10+) `steps`, when the file states them, holds no 0.
pub(crate) fn check_slice_steps(g: &Graph, node: &Node) -> Result<()> {
    let Some(v) = node.inputs.get(4).copied().flatten() else {
        return Ok(());
    };
    match constant_ints(g, v) {
        Some(steps) if steps.contains(&0) => Err(invalid(
            node,
            format!(
                "input 'steps' ('{}') is {steps:?}; a slice step is never 0",
                g.value(v).name
            ),
        )),
        _ => Ok(()),
    }
}

/// Beyond this, a Gather index names an axis no tensor infopt can hold has
/// (2^40 slots of one byte are a terabyte), whatever sizes the graph runs at.
const FARTHEST_INDEX: i64 = 1 << 40;

/// Gather's indices, when the file states them, fall inside the axis they
/// index: within `[-d, d-1]` where the axis has a fixed length `d`, and
/// under [`FARTHEST_INDEX`] where it has none (tract ran for minutes on an
/// index of 2^63-1 and ONNX Runtime refuses it only when it runs: fuzz
/// seed 4242 case 392).
pub(crate) fn check_gather_indices(
    g: &Graph,
    node: &Node,
    data_dims: Option<Vec<Option<i64>>>,
) -> Result<()> {
    let Some(v) = node.inputs.get(1).copied().flatten() else {
        return Ok(());
    };
    let Some(indices) = constant_ints(g, v) else {
        return Ok(());
    };
    let axis = node.attr_int_or("axis", 0)?;
    let length = data_dims.and_then(|d| {
        let rank = d.len() as i64;
        let a = if axis < 0 { axis + rank } else { axis };
        (0..rank).contains(&a).then(|| d[a as usize]).flatten()
    });
    let outside = |i: i64| match length {
        Some(d) => i < -d || i >= d,
        None => i.unsigned_abs() >= FARTHEST_INDEX as u64,
    };
    match indices.iter().copied().find(|&i| outside(i)) {
        Some(i) => Err(invalid(
            node,
            match length {
                Some(d) => format!(
                    "input 'indices' ('{}') holds {i}, outside [-{d}, {}] of axis {axis} (length {d}) of its data",
                    g.value(v).name,
                    d - 1
                ),
                None => format!(
                    "input 'indices' ('{}') holds {i}, farther than any axis of a tensor can reach (axis {axis} of its data)",
                    g.value(v).name
                ),
            },
        )),
        None => Ok(()),
    }
}

/// Range's `start`, `limit` and `delta`, where the file states them, are
/// finite, `delta` is not 0 (tract divided by it and panicked; ONNX Runtime
/// refuses it only when it runs: fuzz seed 90909 case 363, seed 31337 case
/// 1497 with a NaN delta), and together they count fewer than
/// [`FARTHEST_INDEX`] elements.
pub(crate) fn check_range_delta(g: &Graph, node: &Node) -> Result<()> {
    let scalar = |slot: usize| {
        let v = node.inputs.get(slot).copied().flatten()?;
        let tensor = match g.constant(v) {
            Some(t) => Some(t.clone()),
            None => g
                .producer(v)
                .filter(|p| p.domain().is_empty() && p.op_type == "Constant")
                .and_then(crate::infer::constant_value),
        };
        match tensor.and_then(|t| t.to_f64_vec().ok()).as_deref() {
            Some(&[x]) => Some((x, g.value(v).name.clone())),
            _ => None,
        }
    };
    let bounds =
        [(0, "start"), (1, "limit"), (2, "delta")].map(|(slot, what)| (scalar(slot), what));
    for (value, what) in &bounds {
        if let Some((x, name)) = value
            && !x.is_finite()
        {
            return Err(invalid(
                node,
                format!("input '{what}' ('{name}') is {x}; a range's bounds and step are finite"),
            ));
        }
    }
    if let Some((d, name)) = &bounds[2].0
        && *d == 0.0
    {
        return Err(invalid(
            node,
            format!("input 'delta' ('{name}') is 0; a range's delta is never 0"),
        ));
    }
    if let [
        (Some((start, _)), _),
        (Some((limit, _)), _),
        (Some((delta, _)), _),
    ] = &bounds
    {
        let count = ((limit - start) / delta).ceil();
        if count >= FARTHEST_INDEX as f64 {
            return Err(invalid(
                node,
                format!(
                    "from {start:?} to {limit:?} by {delta:?} is {count:.1e} elements, more than any tensor can hold"
                ),
            ));
        }
    }
    Ok(())
}

/// The sizes Expand's `shape`, ConstantOfShape's `input` and Tile's
/// `repeats` state, when the file states them, are never negative: a size
/// below 0 has no tensor (fuzz seed 4242 case 1486: an Expand to
/// `[i64::MIN, 2, ...]` tripped an assertion inside tract, which surfaced
/// as panic text in the message, while ONNX Runtime refused it only when it
/// ran).
pub(crate) fn check_sizes_not_negative(g: &Graph, node: &Node) -> Result<()> {
    let (slot, what) = match node.op_type.as_str() {
        "Expand" => (1, "shape"),
        "ConstantOfShape" => (0, "input"),
        "Tile" => (1, "repeats"),
        _ => return Ok(()),
    };
    let Some(v) = node.inputs.get(slot).copied().flatten() else {
        return Ok(());
    };
    let Some(sizes) = constant_ints(g, v) else {
        return Ok(());
    };
    if let Some(s) = sizes.iter().find(|&&s| s < 0) {
        return Err(invalid(
            node,
            format!(
                "input '{what}' ('{}') holds {s}; a size is never negative",
                g.value(v).name
            ),
        ));
    }
    // Past FARTHEST_INDEX no axis of any tensor reaches (fuzz seed 2468
    // case 1554: an Expand to `[0, i64::MAX, 1]` overflowed inside tract's
    // broadcasting into a negative dim and tripped its assertion).
    match sizes.iter().find(|&&s| s >= FARTHEST_INDEX) {
        Some(s) => Err(invalid(
            node,
            format!(
                "input '{what}' ('{}') holds {s}, longer than any axis of a tensor",
                g.value(v).name
            ),
        )),
        None => Ok(()),
    }
}

/// An Einsum `equation` the spec allows: one term per input (and an output
/// term after `->`, if any) of ASCII letters with at most one `...`, and an
/// output naming each letter once, every one of them found in an input.
/// ONNX Runtime spun for minutes creating the session of `a...b...->ab`
/// (fuzz seed 5151 case 646), and an inference rule meeting two ellipses
/// indexed past the shape (seed 4242 case 1040).
pub(crate) fn check_einsum_equation(node: &Node) -> Result<()> {
    let Some(equation) = node.attr_string("equation")? else {
        return Ok(());
    };
    let bad = |why: String| invalid(node, format!("equation '{equation}' {why}"));
    let compact: String = equation.chars().filter(|c| *c != ' ').collect();
    let (lhs, rhs) = match compact.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (compact.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    let inputs = node.inputs.iter().flatten().count();
    if terms.len() != inputs {
        return Err(bad(format!(
            "has {} input terms for {inputs} inputs",
            terms.len()
        )));
    }
    for term in terms.iter().chain(rhs.iter()) {
        let letters = term.replacen("...", "", 1);
        if let Some(c) = letters.chars().find(|c| !c.is_ascii_alphabetic()) {
            return Err(bad(format!(
                "has '{c}' in term '{term}'; a term is letters with at most one '...'"
            )));
        }
    }
    if let Some(rhs) = rhs {
        let mut seen = std::collections::HashSet::new();
        for c in rhs.chars().filter(char::is_ascii_alphabetic) {
            if !seen.insert(c) {
                return Err(bad(format!("names '{c}' twice in its output")));
            }
            if !lhs.contains(c) {
                return Err(bad(format!("names '{c}' in its output and in no input")));
            }
        }
    }
    Ok(())
}
