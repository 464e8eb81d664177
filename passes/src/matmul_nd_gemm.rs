//! Rule of `fuse-matmul-add` for activations of rank 3 or more with fully
//! known shapes: `MatMul(A[.., M', K], B[K, N]) + bias[N]` is
//! `Reshape(Gemm(Reshape(A, [M, K]), B, bias), [.., M', N])` with `M` the
//! product of A's leading dims. Taken only when it lowers the node count:
//! the new Reshapes replace layout ops already around the pair (a Reshape,
//! Flatten, Squeeze or Unsqueeze that makes A, or the one that reads the
//! sum), or vanish when the layout op's source already has the 2-D shape.

use infopt_ir::{DataType, Dim, Graph, Node, NodeId, Patch, PatchValue, Tensor, ValueId};

use crate::rule::Outcome;
use crate::util::{carry_type, input, output, single_reader};
use crate::{require, require_some};

const LAYOUT: &[&str] = &["Reshape", "Flatten", "Squeeze", "Unsqueeze"];

/// Dims of `v` when every one is known (a constant's or the inferred type's).
fn known(g: &Graph, v: ValueId) -> Option<(Vec<i64>, DataType)> {
    if let Some(t) = g.constant(v) {
        return Some((t.dims().to_vec(), t.dtype()));
    }
    let ty = g.value_type(v)?;
    let dims = ty
        .shape?
        .iter()
        .map(|d| match d {
            Dim::Known(k) => Some(*k),
            _ => None,
        })
        .collect::<Option<Vec<i64>>>()?;
    Some((dims, ty.dtype))
}

/// A single-reader default-domain layout op producing `v` (not a graph
/// output): its node and its data input.
fn layout_producer(g: &Graph, v: ValueId) -> Option<(NodeId, ValueId)> {
    let (p, _) = g.value(v).producer?;
    let n = g.node(p);
    (n.domain().is_empty() && LAYOUT.contains(&n.op_type.as_str())).then_some(())?;
    (single_reader(g, v).is_some() && !g.is_graph_output(v)).then_some(())?;
    Some((p, input(g, p, 0)?))
}

/// The sole reader of `v` when it is a default-domain layout op (and `v` is
/// not a graph output): its node and output.
fn layout_reader(g: &Graph, v: ValueId) -> Option<(NodeId, ValueId)> {
    if g.is_graph_output(v) {
        return None;
    }
    let (u, _) = single_reader(g, v)?;
    let n = g.node(u);
    (n.domain().is_empty() && LAYOUT.contains(&n.op_type.as_str())).then_some(())?;
    // Data input only (a Reshape's shape input is another role).
    (input(g, u, 0) == Some(v)).then_some(())?;
    Some((u, output(g, u, 0)?))
}

/// `Add` node `id` reading `MatMul` node `mm` (sole reader) with `bias`.
pub fn rank_n_to_gemm(g: &Graph, id: NodeId, mm: NodeId, bias: ValueId, opset: i64) -> Outcome {
    let a = require_some!(input(g, mm, 0));
    let b = require_some!(input(g, mm, 1));
    let (adims, dtype) = require_some!(known(g, a));
    require!(adims.len() >= 3);
    require!(matches!(
        dtype,
        DataType::Float | DataType::Double | DataType::Float16
    ));
    let (bdims, btype) = require_some!(known(g, b));
    require!(bdims.len() == 2 && btype == dtype && bdims[0] == adims[adims.len() - 1]);
    let (k, n) = (bdims[0], bdims[1]);
    // Declared dims can be anything (a crafted model's 2^40): a product
    // that overflows is no shape a tensor has.
    let m: i64 = require_some!(adims[..adims.len() - 1].iter().try_fold(1i64, |acc, &d| {
        (d >= 0).then(|| acc.checked_mul(d)).flatten()
    }));
    // Bias along the last axis only, not growing the MatMul output.
    let (cdims, ctype) = require_some!(known(g, bias));
    require!(ctype == dtype && cdims.len() <= adims.len());
    let (last, lead) = match cdims.split_last() {
        Some((l, lead)) => (*l, lead),
        None => (1, &[][..]),
    };
    require!((last == n || last == 1) && lead.iter().all(|&d| d == 1));
    require!(opset >= 7);
    let sum = require_some!(output(g, id, 0));
    let mut out_dims = adims.clone();
    *require_some!(out_dims.last_mut()) = n;

    // Count what the rewrite saves around the pair.
    let pre = layout_producer(g, a);
    let post = layout_reader(g, sum);
    let (pre_src, pre_before) = match pre {
        Some((_, s)) => (s, 1),
        None => (a, 0),
    };
    let pre_src_dims = require_some!(known(g, pre_src)).0;
    let pre_after = usize::from(pre_src_dims != [m, k]);
    let (post_out, post_before) = match post {
        Some((_, o)) => (o, 1),
        None => (sum, 0),
    };
    let post_dims = require_some!(known(g, post_out)).0;
    let post_after = usize::from(post_dims != [m, n]);
    require!(1 + pre_after + post_after < 2 + pre_before + post_before);

    let mut p = Patch::new();
    let base = g.value(sum).name.clone();
    let reshape = |p: &mut Patch, src: PatchValue, dims: &[i64], tag: &str| {
        let shape = p.add_initializer(
            &format!("{base}_{tag}_shape"),
            Tensor::from_i64(vec![dims.len() as i64], dims),
        );
        let mut r = Node::new("Reshape");
        r.name = Some(format!("{base}_{tag}"));
        let id = p.add_node(r, vec![Some(src), Some(shape)], vec![String::new()]);
        PatchValue::NewNode {
            node: id,
            output: 0,
        }
    };
    let a2 = if pre_after == 1 {
        reshape(&mut p, PatchValue::Existing(pre_src), &[m, k], "rows")
    } else {
        PatchValue::Existing(pre_src)
    };
    let c = if cdims.len() <= 2 {
        PatchValue::Existing(bias)
    } else {
        let t = require_some!(g.constant(bias));
        let raw = require_some!(t.raw_bytes().ok());
        let flat = Tensor::from_raw(t.dtype(), vec![last], bytes::Bytes::copy_from_slice(&raw));
        p.add_initializer(&format!("{base}_c"), flat)
    };
    let mut gemm = Node::new("Gemm");
    gemm.name = g.node(mm).name.clone();
    let gid = p.add_node(
        gemm,
        vec![Some(a2), Some(PatchValue::Existing(b)), Some(c)],
        vec![String::new()],
    );
    let gout = PatchValue::NewNode {
        node: gid,
        output: 0,
    };
    let result = if post_after == 1 {
        reshape(&mut p, gout, &post_dims, "cols")
    } else {
        gout
    };
    p.replace(post_out, result);
    carry_type(&mut p, g, post_out, result);
    p.remove_node(mm);
    p.remove_node(id);
    if let Some((pn, _)) = pre {
        p.remove_node(pn);
    }
    if let Some((qn, _)) = post {
        p.remove_node(qn);
    }
    Outcome::Rewrite(p)
}
