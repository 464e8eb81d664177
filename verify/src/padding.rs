//! The input a convolution or pool reads once its `pads` are applied.
//! Runtimes materialize it (tract pads into a buffer of its own before the
//! kernel runs), so both the memory estimate (`activations`) and the work
//! estimate (`work`) count it: a Conv padded by 2^20 once aborted tract
//! unpriced.

use infopt_ir::Node;

/// Whether `node` reads its input 0 padded by a `pads` attribute.
fn pads_its_input(node: &Node) -> bool {
    node.domain().is_empty()
        && matches!(
            node.op_type.as_str(),
            "Conv" | "ConvInteger" | "ConvTranspose" | "MaxPool" | "AveragePool" | "LpPool"
        )
}

/// `dims` (the node's input 0, `[N, C, spatial...]`) with the node's `pads`
/// added to each spatial dim; `None` when the node pads nothing (no `pads`,
/// all of them ≤ 0, or a length that does not match the rank, which the
/// load checks refuse). A negative pad crops and counts as 0 here.
pub fn padded_dims(node: &Node, dims: &[u128]) -> Option<Vec<u128>> {
    if !pads_its_input(node) {
        return None;
    }
    let pads = node.attr_ints("pads").ok().flatten()?;
    let spatial = dims.len().checked_sub(2)?;
    if pads.len() != 2 * spatial || pads.iter().all(|&p| p <= 0) {
        return None;
    }
    let pad = |i: usize| u128::try_from(pads[i]).unwrap_or(0);
    Some(
        dims.iter()
            .enumerate()
            .map(|(i, &d)| match i.checked_sub(2) {
                Some(k) => d.saturating_add(pad(k)).saturating_add(pad(k + spatial)),
                None => d,
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::Attribute;

    fn node(op: &str, pads: Vec<i64>) -> Node {
        let mut n = Node::new(op);
        n.set_attr(Attribute::ints("pads", pads));
        n
    }

    #[test]
    fn spatial_dims_grow_by_both_pads_and_crops_count_as_zero() {
        // pads are [begin of each axis..., end of each axis...].
        let conv = node("Conv", vec![1, 2, -3, 4]);
        assert_eq!(
            padded_dims(&conv, &[2, 3, 10, 10]),
            Some(vec![2, 3, 11, 16])
        );
        let pool = node("MaxPool", vec![1048576, 0]);
        assert_eq!(padded_dims(&pool, &[1, 1, 8]), Some(vec![1, 1, 1048584]));
    }

    #[test]
    fn nothing_padded_is_none() {
        assert_eq!(
            padded_dims(&node("Conv", vec![0, 0, -1, 0]), &[1, 1, 4, 4]),
            None
        );
        assert_eq!(padded_dims(&node("Conv", vec![1, 1]), &[1, 1, 4, 4]), None);
        assert_eq!(padded_dims(&node("Relu", vec![1, 1]), &[1, 1, 4]), None);
        assert_eq!(padded_dims(&Node::new("Conv"), &[1, 1, 4, 4]), None);
    }
}
