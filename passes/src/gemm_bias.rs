//! Rules of `fuse-matmul-add` around a `Gemm` between Reshapes: a bias added
//! after the Reshape that follows a Gemm goes into the Gemm's C.

use infopt_ir::{Attribute, DataType, Dim, Graph, NodeId, Patch, PatchValue, Tensor, ValueId};

use crate::rule::Outcome;
use crate::util::{carry_type, input, output, single_reader};
use crate::{require, require_some};

/// Known dims of `v` (a constant's, else its inferred type's), `None` where
/// a dim is unknown.
fn dims_of(g: &Graph, v: ValueId) -> Option<(Vec<Option<i64>>, DataType)> {
    if let Some(t) = g.constant(v) {
        return Some((t.dims().iter().map(|&d| Some(d)).collect(), t.dtype()));
    }
    let ty = g.value_type(v)?;
    let dims = ty
        .shape?
        .iter()
        .map(|d| match d {
            Dim::Known(k) => Some(*k),
            _ => None,
        })
        .collect();
    Some((dims, ty.dtype))
}

/// `y = Add(Reshape(Gemm(A, B), s), bias)` (either Add operand order), where
/// the Gemm has no C, the Reshape keeps the Gemm's column count `N` as its
/// last dim, and the bias varies along the last axis only (`[N]`,
/// `[1, .., 1, N]`, or all ones): the bias is the Gemm's C, and the Reshape's
/// output is `y`. Row-major order maps Gemm element `(i, j)` to a Reshape
/// element whose last index is `j`, so each element gets the same bias term.
pub fn bias_after_reshape(g: &Graph, id: NodeId) -> Outcome {
    let add = g.node(id);
    require!(add.is("Add") && add.inputs.len() == 2);
    let (r, bias) = {
        let mut found = None;
        for (a, b) in [(0, 1), (1, 0)] {
            let (Some(x), Some(c)) = (input(g, id, a), input(g, id, b)) else {
                continue;
            };
            if g.producer(x).is_some_and(|n| n.is("Reshape")) {
                found = Some((x, c));
                break;
            }
        }
        require_some!(found)
    };
    let (reshape, _) = require_some!(g.value(r).producer);
    require!(single_reader(g, r).is_some() && !g.is_graph_output(r));
    let gout = require_some!(input(g, reshape, 0));
    let (gemm, gemm_node) = require_some!(g.value(gout).producer.map(|(p, _)| (p, g.node(p))));
    require!(gemm_node.is("Gemm") && gemm_node.domain().is_empty());
    require!(input(g, gemm, 2).is_none());
    require!(single_reader(g, gout).is_some() && !g.is_graph_output(gout));
    let (gdims, gtype) = require_some!(dims_of(g, gout));
    require!(gdims.len() == 2);
    let n = require_some!(gdims[1]);
    let (rdims, _) = require_some!(dims_of(g, r));
    require!(rdims.last() == Some(&Some(n)));
    let (bdims, btype) = require_some!(dims_of(g, bias));
    require!(btype == gtype && bdims.len() <= rdims.len());
    let (last, lead) = match bdims.split_last() {
        Some((l, lead)) => (*l, lead),
        None => (Some(1), &[][..]),
    };
    require!(last == Some(n) || last == Some(1));
    require!(lead.iter().all(|&d| d == Some(1)));
    let out = require_some!(output(g, id, 0));
    // The Add must not broadcast the Reshape output to a larger shape.
    let (odims, _) = require_some!(dims_of(g, out));
    require!(odims == rdims);

    let mut p = Patch::new();
    // Gemm's C is at most 2-D: a constant of higher rank is rewritten flat.
    let c = if bdims.len() <= 2 {
        PatchValue::Existing(bias)
    } else {
        let t = require_some!(g.constant(bias));
        let raw = require_some!(t.raw_bytes().ok());
        let flat = Tensor::from_raw(
            t.dtype(),
            vec![last.unwrap_or(1)],
            bytes::Bytes::copy_from_slice(&raw),
        );
        p.add_initializer(&format!("{}_c", g.value(bias).name), flat)
    };
    let mut fused = gemm_node.clone();
    fused.inputs.clear();
    fused.outputs.clear();
    fused.set_attr(Attribute::float("beta", 1.0));
    let mut inputs: Vec<Option<PatchValue>> = gemm_node
        .inputs
        .iter()
        .map(|v| v.map(PatchValue::Existing))
        .collect();
    inputs.truncate(2);
    inputs.push(Some(c));
    let k = p.add_node(fused, inputs, vec![String::new()]);
    let new_g = PatchValue::NewNode { node: k, output: 0 };
    carry_type(&mut p, g, gout, new_g);
    let mut rnode = g.node(reshape).clone();
    rnode.inputs.clear();
    rnode.outputs.clear();
    let shape = input(g, reshape, 1).map(PatchValue::Existing);
    let rk = p.add_node(rnode, vec![Some(new_g), shape], vec![String::new()]);
    let new_r = PatchValue::NewNode {
        node: rk,
        output: 0,
    };
    p.replace(out, new_r);
    carry_type(&mut p, g, out, new_r);
    p.remove_node(id);
    p.remove_node(reshape);
    p.remove_node(gemm);
    Outcome::Rewrite(p)
}
