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
    let (Some(input), Some(target)) = (input, target) else {
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
