//! A Reshape whose target holds another number of elements than its input
//! (a fuzzed `shape` constant of [2, 3, 100000, 100000] on a 384-element
//! tensor): no runtime runs it, and taken literally its dims size an
//! activation of terabytes. When the file fixes both the input's dims and
//! the target, it is a model error naming the node, found at load.

use crate::error::{IrError, Result};
use crate::graph::{Graph, Node};

/// `input` are the input's dims as inference proves them (`None` where not
/// a number), `target` the constant target when the file states one.
pub(crate) fn check_reshape_volume(
    g: &Graph,
    node: &Node,
    input: Option<&[Option<i64>]>,
    target: Option<&[i64]>,
) -> Result<()> {
    let Some(target) = target else {
        return Ok(());
    };
    check_target_entries(g, node, target)?;
    let Some(input) = input else {
        return Ok(());
    };
    let Some(input) = input
        .iter()
        .map(|d| d.and_then(|n| u128::try_from(n).ok()))
        .collect::<Option<Vec<u128>>>()
    else {
        return Ok(());
    };
    let allowzero = node.attr_int_or("allowzero", 0)? != 0;
    let mut wildcard = false;
    let mut fixed = 1u128;
    for (i, &t) in target.iter().enumerate() {
        let dim = match t {
            0 if !allowzero => match input.get(i) {
                Some(&d) => d,
                // Copying a dim the input lacks: the rank check's business.
                None => return Ok(()),
            },
            -1 if !wildcard => {
                wildcard = true;
                continue;
            }
            n => match u128::try_from(n) {
                Ok(n) => n,
                // Two -1s or a dim below -1: not a count to compare.
                Err(_) => return Ok(()),
            },
        };
        fixed = fixed.saturating_mul(dim);
    }
    let count = input.iter().fold(1u128, |acc, &d| acc.saturating_mul(d));
    let fits = if wildcard {
        fixed != 0 && count % fixed == 0 || fixed == 0 && count == 0
    } else {
        fixed == count
    };
    if fits || fixed == u128::MAX || count == u128::MAX {
        return Ok(());
    }
    let name = node.inputs.get(1).copied().flatten().map_or_else(
        || "attribute 'shape'".to_string(),
        |v| format!("input 'shape' ('{}')", g.value(v).name),
    );
    let dims: Vec<String> = input.iter().map(u128::to_string).collect();
    Err(IrError::Invalid(format!(
        "node '{}' (Reshape): {name} is {target:?}, which cannot hold the {count} elements of its input [{}]; a reshape keeps the number of elements",
        node.name_or_op(),
        dims.join(","),
    )))
}

/// A Reshape target's entries are sizes, 0 (copy the input's dim) or one
/// -1 (the rest): an entry below -1 or a second -1 has no meaning (fuzz
/// seed 31337 case 1098: a target of `[i64::MIN]` sent tract's symbolic
/// shape analysis into an expression that grew for minutes, where ONNX
/// Runtime refuses it only when it runs).
fn check_target_entries(g: &Graph, node: &Node, target: &[i64]) -> Result<()> {
    let what = if let Some(&bad) = target.iter().find(|&&t| t < -1) {
        format!("holds {bad}; a target entry is a size, 0 or -1")
    } else if target.iter().filter(|&&t| t == -1).count() > 1 {
        "holds -1 more than once; one entry at most can be inferred".to_string()
    } else {
        return Ok(());
    };
    let name = node.inputs.get(1).copied().flatten().map_or_else(
        || "attribute 'shape'".to_string(),
        |v| format!("input 'shape' ('{}')", g.value(v).name),
    );
    Err(IrError::Invalid(format!(
        "node '{}' (Reshape): {name} is {target:?}, which {what}",
        node.name_or_op(),
    )))
}
