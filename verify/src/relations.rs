//! Linear relations between a model's symbolic input dims, read from the
//! graph, so that verification sizes satisfy them.
//!
//! A decoder step with a KV cache declares `attention_mask` as
//! `[batch, total]` and the cache as `[batch, heads, past, d]`; the scores
//! the mask is added to end in the Concat of cache and new keys, so the
//! graph only runs when `total = past + seq`. Giving each symbol its own
//! value (2, 3, 4, 5) can never run it. Here shape inference runs with the
//! declared symbols and every op that needs two dims to agree contributes
//! an equation between their expressions:
//!
//! - element-wise broadcasting (Add, Mul, Where, And, ...) and the batch
//!   dims of MatMul: two dims above 1 on the same axis;
//! - MatMul and Gemm: the contracted dims;
//! - Concat: every axis but the concatenated one;
//! - Slice from 0 to a symbolic end (`mask[:, :key_len]`): the sliced dim is
//!   at least the end, and equal to it is a size the graph accepts.
//!
//! Equations that are linear in the symbols are solved one by one by
//! substitution: a symbol no input declares (a Range's length, a NonZero
//! count) is eliminated first, since it can take any value; then an input
//! symbol whose equation makes it a sum of the others (`total = past + seq`),
//! then any input symbol with a unit coefficient. What cannot be solved (a
//! product of symbols, a contradiction) is left out: the relations can be
//! incomplete, never made up. A symbol whose own name is an expression over
//! other symbols (Optimum's `past_sequence_length + sequence_length`) is
//! related by its name.

use std::collections::{BTreeMap, BTreeSet};

use infopt_ir::infer::sym::Expr;
use infopt_ir::infer::{self, GraphFacts, InferReport, Opsets, Scope};
use infopt_ir::{Dim, Graph, Model, Node};

use crate::index_bounds::{self, Bound};

/// Largest value a dependent symbol may take.
const MAX_VALUE: i64 = 1 << 20;
/// Equations looked at, at most (a very large graph says the same thing many times).
const MAX_EQUATIONS: usize = 4096;

/// `sum(coef * symbol) + constant`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
struct Linear {
    coefs: BTreeMap<String, i64>,
    constant: i64,
}

impl Linear {
    fn of(e: &Expr) -> Option<Linear> {
        let (coefs, constant) = e.linear()?;
        Some(Linear { coefs, constant })
    }

    fn of_dim(d: &Dim) -> Option<Linear> {
        Linear::of(&infer::sym::expr_of(d)?)
    }

    /// `self - other`, `None` on overflow.
    fn minus(&self, other: &Linear) -> Option<Linear> {
        let mut out = self.clone();
        for (s, c) in &other.coefs {
            let e = out.coefs.entry(s.clone()).or_insert(0);
            *e = e.checked_sub(*c)?;
        }
        out.coefs.retain(|_, c| *c != 0);
        out.constant = out.constant.checked_sub(other.constant)?;
        Some(out)
    }

    /// `self` with `sym` replaced by `by`.
    fn substitute(&self, sym: &str, by: &Linear) -> Option<Linear> {
        let Some(&c) = self.coefs.get(sym) else {
            return Some(self.clone());
        };
        let mut out = self.clone();
        out.coefs.remove(sym);
        for (s, k) in &by.coefs {
            let e = out.coefs.entry(s.clone()).or_insert(0);
            *e = e.checked_add(c.checked_mul(*k)?)?;
        }
        out.coefs.retain(|_, c| *c != 0);
        out.constant = out.constant.checked_add(c.checked_mul(by.constant)?)?;
        Some(out)
    }

    fn eval(&self, value: &dyn Fn(&str) -> Option<i64>) -> Option<i64> {
        let mut v = self.constant;
        for (s, c) in &self.coefs {
            v = v.checked_add(c.checked_mul(value(s)?)?)?;
        }
        Some(v)
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for (s, c) in &self.coefs {
            let sign = if *c < 0 { "-" } else { "+" };
            let mag = c.unsigned_abs();
            let term = if mag == 1 {
                s.clone()
            } else {
                format!("{mag}*{s}")
            };
            if out.is_empty() {
                out = if *c < 0 { format!("-{term}") } else { term };
            } else {
                out.push_str(&format!(" {sign} {term}"));
            }
        }
        if self.constant != 0 || out.is_empty() {
            if out.is_empty() {
                out = self.constant.to_string();
            } else {
                let sign = if self.constant < 0 { "-" } else { "+" };
                out.push_str(&format!(" {sign} {}", self.constant.unsigned_abs()));
            }
        }
        out
    }
}

/// One solved relation: `symbol = expr`, and the node that says so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relation {
    pub symbol: String,
    expr: Linear,
    pub because: String,
}

impl Relation {
    /// `total = past + seq (Add `scores`)`.
    pub fn describe(&self) -> String {
        format!(
            "{} = {} ({})",
            self.symbol,
            self.expr.render(),
            self.because
        )
    }
}

/// The relations between the input symbols of one model.
#[derive(Clone, Debug, Default)]
pub struct Relations {
    /// In solving order; each expression mentions free symbols only.
    pub solved: Vec<Relation>,
}

impl Relations {
    pub fn is_empty(&self) -> bool {
        self.solved.is_empty()
    }

    /// Values for the dependent symbols from the free ones (`value` gives a
    /// free symbol's size); `None` when one comes out below 1 or too large.
    pub fn dependents(&self, value: &dyn Fn(&str) -> Option<i64>) -> Option<BTreeMap<String, i64>> {
        let mut out = BTreeMap::new();
        for r in &self.solved {
            let v = r.expr.eval(value)?;
            if !(1..=MAX_VALUE).contains(&v) {
                return None;
            }
            out.insert(r.symbol.clone(), v);
        }
        Some(out)
    }

    /// `total = past + seq (Add `x`); ...`.
    pub fn describe(&self) -> String {
        self.solved
            .iter()
            .map(Relation::describe)
            .collect::<Vec<_>>()
            .join("; ")
    }

    pub fn is_dependent(&self, symbol: &str) -> bool {
        self.solved.iter().any(|r| r.symbol == symbol)
    }
}

/// The relations between `symbols` (the unbound input symbols) that the
/// graph of `model` implies.
pub fn relations(model: &Model, symbols: &BTreeSet<String>) -> Relations {
    let mut solver = Solver {
        inputs: symbols.clone(),
        solved: Vec::new(),
    };
    // Names that are expressions: `past_sequence_length + sequence_length`.
    for s in symbols {
        let Some(lin) = Linear::of(&Expr::parse(s)) else {
            continue;
        };
        let atomic =
            lin.constant == 0 && lin.coefs.len() == 1 && lin.coefs.values().all(|&c| c == 1);
        if atomic || lin.coefs.is_empty() {
            continue;
        }
        let mut eq = lin;
        eq.coefs.insert(s.clone(), -1);
        solver.add(eq, "its name");
    }
    if symbols.is_empty() {
        return Relations::default();
    }
    // Inference on a copy: the verifier's model stays as the user gave it.
    let mut graph = model.graph.clone();
    let mut report = InferReport::default();
    let facts = infer::infer_graph(
        &mut graph,
        Opsets::of(model),
        &Scope::default(),
        &mut report,
    );
    let mut seen = 0;
    let order = graph
        .topological_order()
        .unwrap_or_else(|_| graph.node_ids());
    for id in order {
        let node = graph.node(id);
        for (a, b) in agreeing_dims(&graph, &facts, node) {
            if seen >= MAX_EQUATIONS {
                break;
            }
            seen += 1;
            let (Some(la), Some(lb)) = (Linear::of_dim(&a), Linear::of_dim(&b)) else {
                continue;
            };
            if let Some(eq) = la.minus(&lb) {
                let why = format!("{} `{}`", node.op_type, node.name_or_op());
                solver.add(eq, &why);
            }
        }
    }
    // Last, so that anything the graph says wins: a decoder step's mask
    // covers the cache and the new tokens, by the inputs' names. Some
    // exports relate them only through indices (transformers' TorchScript
    // export gathers the flattened mask at `range(past + seq)`).
    if let Some(eq) = decoder_step_mask(model, symbols) {
        solver.add(
            eq,
            "a decoder step's attention_mask covers past_key_values and input_ids (by their names)",
        );
    }
    Relations {
        solved: solver
            .solved
            .into_iter()
            .filter(|r| symbols.contains(&r.symbol))
            .collect(),
    }
}

/// `total - past - seq` for a decoder step with a KV cache, read from the
/// input names: `*attention_mask` `[batch, total]`, a `past*` cache of rank
/// 4 whose axis 2 is `past`, and `input_ids` / `inputs_embeds` /
/// `position_ids` whose axis 1 is `seq`; three distinct unbound symbols.
fn decoder_step_mask(model: &Model, symbols: &BTreeSet<String>) -> Option<Linear> {
    let g = &model.graph;
    let dims_of = |want: &dyn Fn(&str) -> bool, rank: usize, axis: usize| {
        g.inputs.iter().find_map(|io| {
            let name = &g.value(io.value).name;
            if !want(name) {
                return None;
            }
            let shape = g.value_type(io.value)?.shape?;
            match shape.get(axis) {
                Some(Dim::Sym(s)) if shape.len() == rank && symbols.contains(s) => Some(s.clone()),
                _ => None,
            }
        })
    };
    let total = dims_of(&|n| n.ends_with("attention_mask"), 2, 1)?;
    let past = dims_of(&|n| n.starts_with("past"), 4, 2)?;
    let seq = dims_of(
        &|n| matches!(n, "input_ids" | "inputs_embeds" | "position_ids"),
        2,
        1,
    )
    .or_else(|| dims_of(&|n| n == "inputs_embeds", 3, 1))?;
    if total == past || total == seq || past == seq {
        return None;
    }
    let coefs = BTreeMap::from([(total, 1), (past, -1), (seq, -1)]);
    Some(Linear { coefs, constant: 0 })
}

struct Solver {
    inputs: BTreeSet<String>,
    solved: Vec<Relation>,
}

impl Solver {
    /// Adds `eq = 0`, solved for one of its symbols when possible.
    fn add(&mut self, eq: Linear, why: &str) {
        let mut eq = eq;
        for r in &self.solved {
            match eq.substitute(&r.symbol, &r.expr) {
                Some(e) => eq = e,
                None => return,
            }
        }
        if eq.coefs.is_empty() {
            // Redundant (0 = 0) or a contradiction the graph's broadcast
            // may resolve with a 1: nothing to learn either way.
            return;
        }
        let Some(sym) = self.pick(&eq) else { return };
        let c = eq.coefs[&sym];
        // c*sym + rest = 0  =>  sym = -rest / c, with c = ±1 or rest constant.
        let mut rest = eq.clone();
        rest.coefs.remove(&sym);
        // Checked throughout: dims come from the file and may be anything.
        let negate = |k: i64| k.checked_mul(c)?.checked_neg();
        let expr = if c == 1 || c == -1 {
            let coefs: Option<BTreeMap<String, i64>> = rest
                .coefs
                .iter()
                .map(|(s, k)| Some((s.clone(), negate(*k)?)))
                .collect();
            let (Some(coefs), Some(constant)) = (coefs, negate(rest.constant)) else {
                return;
            };
            Linear { coefs, constant }
        } else {
            if !rest.coefs.is_empty() || rest.constant.checked_rem(c) != Some(0) {
                return;
            }
            let Some(constant) = rest.constant.checked_div(c).and_then(i64::checked_neg) else {
                return;
            };
            Linear {
                coefs: BTreeMap::new(),
                constant,
            }
        };
        if expr.coefs.is_empty() && expr.constant < 1 {
            return;
        }
        for r in &mut self.solved {
            match r.expr.substitute(&sym, &expr) {
                Some(e) => r.expr = e,
                None => return,
            }
        }
        self.solved.push(Relation {
            symbol: sym,
            expr,
            because: why.to_string(),
        });
    }

    /// The symbol to solve `eq` for (see the module doc for the order).
    fn pick(&self, eq: &Linear) -> Option<String> {
        let unit = |s: &&String| matches!(eq.coefs[*s], 1 | -1);
        if let Some(s) = eq
            .coefs
            .keys()
            .filter(unit)
            .find(|s| !self.inputs.contains(*s))
        {
            return Some(s.clone());
        }
        // A sum of the others: every other coefficient, and the constant,
        // of the opposite sign (or zero).
        let sum_of_others = |s: &&String| {
            let c = eq.coefs[*s];
            eq.coefs
                .iter()
                .all(|(t, k)| t == *s || k.signum() == -c.signum())
                && eq.constant.signum() != c.signum()
        };
        if let Some(s) = eq.coefs.keys().filter(unit).find(sum_of_others) {
            return Some(s.clone());
        }
        if let Some(s) = eq.coefs.keys().find(unit) {
            return Some(s.clone());
        }
        (eq.coefs.len() == 1)
            .then(|| eq.coefs.keys().next().cloned())
            .flatten()
    }
}

/// Pairs of dims `node` needs to be equal, from the inferred facts.
fn agreeing_dims(graph: &Graph, facts: &GraphFacts, node: &Node) -> Vec<(Dim, Dim)> {
    if !node.domain().is_empty() {
        return Vec::new();
    }
    let shape = |slot: usize| -> Option<Vec<Dim>> {
        let v = (*node.inputs.get(slot)?)?;
        facts.get(v)?.shape().map(|s| s.to_vec())
    };
    let mut out = Vec::new();
    match node.op_type.as_str() {
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Max" | "Min" | "Sum" | "Mean" | "Where"
        | "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "And" | "Or"
        | "Xor" | "Mod" | "PRelu" | "BitShift" | "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" => {
            let shapes: Vec<Vec<Dim>> = (0..node.inputs.len()).filter_map(shape).collect();
            broadcast_pairs(&shapes, &mut out);
        }
        "MatMul" | "MatMulInteger" => {
            if let (Some(a), Some(b)) = (shape(0), shape(1))
                && a.len() >= 2
                && b.len() >= 2
            {
                out.push((a[a.len() - 1].clone(), b[b.len() - 2].clone()));
                let batch = |s: &[Dim]| s[..s.len() - 2].to_vec();
                broadcast_pairs(&[batch(&a), batch(&b)], &mut out);
            }
        }
        "Gemm" => {
            if let (Some(a), Some(b)) = (shape(0), shape(1))
                && a.len() == 2
                && b.len() == 2
            {
                let ta = node.attr_int_or("transA", 0).unwrap_or(0) != 0;
                let tb = node.attr_int_or("transB", 0).unwrap_or(0) != 0;
                let ka = if ta { &a[0] } else { &a[1] };
                let kb = if tb { &b[1] } else { &b[0] };
                out.push((ka.clone(), kb.clone()));
            }
        }
        // `mask[..., :key_len]` (transformers slices the mask to the keys'
        // length): the sliced dim is at least the end; taking it equal is a
        // size the graph accepts.
        "Slice" => {
            let value = |slot: usize| -> Option<Vec<Dim>> {
                let v = (*node.inputs.get(slot)?)?;
                facts.get(v)?.value.as_ref().map(|v| v.elems.clone())
            };
            let (Some(data), Some(starts), Some(ends)) = (shape(0), value(1), value(2)) else {
                return out;
            };
            let axes: Vec<Dim> =
                value(3).unwrap_or_else(|| (0..ends.len() as i64).map(Dim::Known).collect());
            let unit_steps = node.inputs.get(4).copied().flatten().is_none()
                || value(4).is_some_and(|s| s.iter().all(|d| matches!(d, Dim::Known(1))));
            if !unit_steps || starts.len() != ends.len() || axes.len() != ends.len() {
                return out;
            }
            for ((start, end), axis) in starts.iter().zip(&ends).zip(&axes) {
                let Dim::Known(axis) = axis else { continue };
                let axis = if *axis < 0 {
                    axis + data.len() as i64
                } else {
                    *axis
                };
                let Some(d) = usize::try_from(axis).ok().and_then(|a| data.get(a)) else {
                    continue;
                };
                if matches!(start, Dim::Known(0)) && matches!(end, Dim::Sym(_)) {
                    out.push((d.clone(), end.clone()));
                }
            }
        }
        // Indices counted by a Range (torch's dynamo exporter reads the mask
        // with `mask[batch_idx, kv_idx]`): the axis read is at least the
        // count, and equal to it is a size the graph accepts.
        "Gather" => {
            let axis = node.attr_int_or("axis", 0).unwrap_or(0);
            if let (Some(data), Some(Some(indices))) = (shape(0), node.inputs.get(1))
                && let Some(Bound::All(n)) = index_bounds::bound(graph, facts, *indices)
                && let Some(d) = axis_dim(&data, axis)
            {
                out.push((d, n));
            }
        }
        "GatherND" => {
            let batch_dims = node.attr_int_or("batch_dims", 0).unwrap_or(0);
            if let (0, Some(data), Some(Some(indices))) = (batch_dims, shape(0), node.inputs.get(1))
                && let Some(Bound::Components(c)) = index_bounds::bound(graph, facts, *indices)
            {
                out.extend(data.iter().cloned().zip(c));
            }
        }
        "Concat" => {
            let shapes: Vec<Vec<Dim>> = (0..node.inputs.len()).filter_map(shape).collect();
            let Some(first) = shapes.first() else {
                return out;
            };
            let rank = first.len();
            let axis = node.attr_int_or("axis", 0).unwrap_or(0);
            let axis = if axis < 0 { axis + rank as i64 } else { axis };
            for s in shapes.iter().skip(1).filter(|s| s.len() == rank) {
                for i in (0..rank).filter(|&i| i as i64 != axis) {
                    out.push((first[i].clone(), s[i].clone()));
                }
            }
        }
        _ => {}
    }
    out.retain(|(a, b)| {
        !matches!(a, Dim::Unknown)
            && !matches!(b, Dim::Unknown)
            && infer::sym::canonical(a) != infer::sym::canonical(b)
    });
    out
}

/// The dim of `shape` at `axis` (negative counts from the end).
fn axis_dim(shape: &[Dim], axis: i64) -> Option<Dim> {
    let rank = i64::try_from(shape.len()).ok()?;
    let axis = if axis < 0 {
        axis.checked_add(rank)?
    } else {
        axis
    };
    shape.get(usize::try_from(axis).ok()?).cloned()
}

/// Numpy broadcasting: on each axis (aligned from the right), every dim
/// that is not 1 must equal the first such dim.
fn broadcast_pairs(shapes: &[Vec<Dim>], out: &mut Vec<(Dim, Dim)>) {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    for i in 0..rank {
        let here: Vec<&Dim> = shapes
            .iter()
            .filter_map(|s| (i + s.len()).checked_sub(rank).map(|j| &s[j]))
            .filter(|d| !matches!(d, Dim::Known(1)))
            .collect();
        // A symbol against a fixed size is left to the size hints (it may
        // be 1 there); two expressions must agree.
        let syms: Vec<&&Dim> = here.iter().filter(|d| matches!(d, Dim::Sym(_))).collect();
        if let Some((first, rest)) = syms.split_first() {
            for d in rest {
                out.push(((**first).clone(), (**d).clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lin(pairs: &[(&str, i64)], c: i64) -> Linear {
        Linear {
            coefs: pairs.iter().map(|(s, k)| (s.to_string(), *k)).collect(),
            constant: c,
        }
    }

    fn solver(inputs: &[&str]) -> Solver {
        Solver {
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            solved: Vec::new(),
        }
    }

    /// transformers' TorchScript export of a Llama step relates the mask to
    /// the cache only through a Gather's indices: the names say it.
    #[test]
    fn a_decoder_step_mask_covers_the_cache_and_the_new_tokens_by_name() {
        use infopt_ir::DataType;
        use infopt_ir::builder::{GraphBuilder, dims};
        let build = |mask: &str| {
            let mut b = GraphBuilder::new();
            let ids = b.input("input_ids", DataType::Int64, dims(&["batch", "seq"]));
            let m = b.input(mask, DataType::Int64, dims(&["batch", "total"]));
            let k = b.input(
                "past_key_values.0.key",
                DataType::Float,
                dims(&["batch", "2", "past", "8"]),
            );
            for (v, name) in [(ids, "a"), (m, "b"), (k, "c")] {
                let y = b.op("Identity", &[v], vec![]);
                b.output(y, name, DataType::Float, None);
            }
            b.build(17)
        };
        let symbols: BTreeSet<String> = ["batch", "seq", "total", "past"].map(String::from).into();
        let rels = relations(&build("attention_mask"), &symbols);
        assert_eq!(
            rels.describe(),
            "total = past + seq (a decoder step's attention_mask covers past_key_values and input_ids (by their names))"
        );
        // Another name: nothing is made up.
        assert!(relations(&build("mask"), &symbols).is_empty());
    }

    #[test]
    fn a_total_becomes_the_sum_of_past_and_seq() {
        let mut s = solver(&["past", "seq", "total"]);
        // past + seq - total = 0, as an Add of scores and mask states it.
        s.add(lin(&[("past", 1), ("seq", 1), ("total", -1)], 0), "Add `a`");
        assert_eq!(s.solved.len(), 1);
        assert_eq!(s.solved[0].describe(), "total = past + seq (Add `a`)");
    }

    #[test]
    fn symbols_no_input_declares_go_first_and_chains_substitute() {
        let mut s = solver(&["past", "seq", "total"]);
        // A Range's length equals seq; then total equals past plus it.
        s.add(lin(&[("range_out0", 1), ("seq", -1)], 0), "Add `m`");
        s.add(
            lin(&[("total", 1), ("past", -1), ("range_out0", -1)], 0),
            "Add `s`",
        );
        let rels = Relations {
            solved: s
                .solved
                .into_iter()
                .filter(|r| r.symbol != "range_out0")
                .collect(),
        };
        assert_eq!(rels.describe(), "total = past + seq (Add `s`)");
        let values = |x: &str| match x {
            "past" => Some(4),
            "seq" => Some(3),
            _ => None,
        };
        assert_eq!(rels.dependents(&values).unwrap()["total"], 7);
    }

    #[test]
    fn contradictions_products_and_non_positive_sizes_are_left_out() {
        let mut s = solver(&["a", "b"]);
        s.add(lin(&[("a", 1), ("b", -1)], 0), "x");
        // a - b = 1 contradicts a = b once substituted: ignored.
        s.add(lin(&[("a", 1), ("b", -1)], -1), "y");
        assert_eq!(s.solved.len(), 1);
        // 2*c = 7 has no whole solution, c = -3 is no size.
        let mut s = solver(&["c"]);
        s.add(lin(&[("c", 2)], -7), "z");
        s.add(lin(&[("c", 1)], 3), "w");
        assert!(s.solved.is_empty());
        // 3*d = 12 gives d = 4.
        s.add(lin(&[("d", 3)], -12), "v");
        assert_eq!(s.solved[0].describe(), "d = 4 (v)");
        // A dependent that comes out negative makes the binding unusable.
        let rels = Relations {
            solved: vec![Relation {
                symbol: "p".into(),
                expr: lin(&[("t", 1), ("s", -1)], 0),
                because: "x".into(),
            }],
        };
        let values = |x: &str| match x {
            "t" => Some(2),
            "s" => Some(3),
            _ => None,
        };
        assert_eq!(rels.dependents(&values), None);
    }

    #[test]
    fn huge_coefficients_from_a_hostile_file_do_not_overflow() {
        let mut s = solver(&["a", "b"]);
        s.add(lin(&[("a", -1), ("b", i64::MIN)], 0), "x");
        s.add(lin(&[("a", -1)], i64::MIN), "y");
        s.add(lin(&[("b", i64::MIN)], i64::MIN), "z");
        // Nothing overflows, and nothing that would is kept.
        assert!(s.solved.is_empty(), "{:?}", s.solved);
    }

    #[test]
    fn an_expression_as_a_name_relates_its_symbols() {
        let model = Model::new(infopt_ir::Graph::new("empty"), 17);
        let symbols: BTreeSet<String> = [
            "past_sequence_length + sequence_length",
            "past_sequence_length",
            "sequence_length",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let rels = relations(&model, &symbols);
        let values = |x: &str| match x {
            "past_sequence_length" => Some(4),
            "sequence_length" => Some(3),
            _ => None,
        };
        assert_eq!(
            rels.dependents(&values).unwrap()["past_sequence_length + sequence_length"],
            7
        );
    }
}
