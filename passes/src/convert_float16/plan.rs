//! Which nodes of one graph convert ([`Plan`]) and why the others stay
//! float32; the plans of a graph and its subgraphs ([`PlanTree`]).

use std::collections::{HashMap, HashSet};

use infopt_ir::{DataType, Graph, Node, NodeId, Slot, Use, ValueId};

use crate::pass::PassCx;
use crate::precision::{Override, PrecisionMap};

use super::half_type::{ConvertFloat, Half};
use super::ops::{self, Role};
use super::values;

/// Which nodes convert, and how their inputs are treated.
#[derive(Default)]
pub(super) struct Plan {
    /// Original element type of every value.
    pub(super) dtype: HashMap<ValueId, DataType>,
    /// Converted nodes and the roles of their inputs.
    pub(super) roles: HashMap<NodeId, Vec<Role>>,
    pub(super) convert: HashSet<NodeId>,
    /// Nodes with float32 tensors that stay float32.
    pub(super) kept: usize,
}

impl Plan {
    /// A plan converting nothing, with the element types of `g`'s values
    /// (those read from enclosing graphs from `scope`).
    pub(super) fn typed(g: &Graph, scope: &HashMap<String, DataType>) -> Plan {
        let mut plan = Plan::default();
        for v in g.value_ids() {
            let value = g.value(v);
            let dtype = match value.outer {
                true => scope
                    .get(&value.name)
                    .copied()
                    .or_else(|| g.value_type(v).map(|t| t.dtype)),
                false => g.value_type(v).map(|t| t.dtype),
            };
            if let Some(d) = dtype {
                plan.dtype.insert(v, d);
            }
        }
        plan
    }

    pub(super) fn dt(&self, v: ValueId) -> DataType {
        self.dtype.get(&v).copied().unwrap_or(DataType::Undefined)
    }

    /// True when the reader `u` wants the half type.
    pub(super) fn wants_half(&self, u: &Use) -> bool {
        match u.slot {
            Slot::Input(i) => self
                .roles
                .get(&u.node)
                .and_then(|r| r.get(i as usize))
                .is_some_and(|r| *r == Role::Half),
            Slot::Capture => false,
        }
    }

    /// Converted nodes connected through converted values, as components.
    pub(super) fn islands(&self, g: &Graph) -> Vec<Vec<NodeId>> {
        let mut seen: HashSet<NodeId> = HashSet::new();
        let mut out = Vec::new();
        let mut starts: Vec<NodeId> = self.convert.iter().copied().collect();
        starts.sort();
        for start in starts {
            if !seen.insert(start) {
                continue;
            }
            let mut island = vec![start];
            let mut stack = vec![start];
            while let Some(n) = stack.pop() {
                let node = g.node(n);
                let mut next: Vec<NodeId> = Vec::new();
                for v in node.outputs.iter().flatten() {
                    next.extend(g.value(*v).uses.iter().map(|u| u.node));
                }
                for v in node.inputs.iter().flatten() {
                    next.extend(g.value(*v).producer.map(|(p, _)| p));
                }
                for m in next {
                    if self.convert.contains(&m) && seen.insert(m) {
                        stack.push(m);
                        island.push(m);
                    }
                }
            }
            out.push(island);
        }
        out
    }

    /// Casts an island needs: float32 values it reads in half (constants are
    /// converted, not cast) and half values read in float32 outside it.
    pub(super) fn border_casts(&self, g: &Graph, island: &HashSet<NodeId>, keep_io: bool) -> usize {
        let mut inputs: HashSet<ValueId> = HashSet::new();
        let mut outputs = 0;
        for &n in island {
            let node = g.node(n);
            for (slot, v) in node.inputs.iter().enumerate() {
                let Some(v) = *v else { continue };
                let half = self
                    .roles
                    .get(&n)
                    .and_then(|r| r.get(slot))
                    .is_some_and(|r| *r == Role::Half);
                let constant = g.constant(v).is_some() || g.producer(v).is_some_and(|p| p.is("Constant"));
                let outside = g.value(v).producer.is_none_or(|(p, _)| !island.contains(&p));
                // Without keep_io_types a graph input is declared half instead.
                let free_input = g.is_graph_input(v) && !keep_io;
                if half && !constant && outside && !free_input {
                    inputs.insert(v);
                }
            }
            for v in node.outputs.iter().flatten() {
                if self.dt(*v) != DataType::Float {
                    continue;
                }
                let outside = g.value(*v).uses.iter().any(|u| {
                    !island.contains(&u.node)
                        && !matches!(u.slot, Slot::Input(i) if ops::reads_any_float(g.node(u.node), i))
                });
                if outside || (g.is_graph_output(*v) && keep_io) {
                    outputs += 1;
                }
            }
        }
        inputs.len() + outputs
    }
}

impl ConvertFloat {
    /// Which nodes of `g` convert. `scope`: the element types of the
    /// enclosing graphs' values by name (what a subgraph reads from them);
    /// `keep_io`: `g`'s inputs and outputs stay float32 (always so in a
    /// subgraph: the If/Loop/Scan node's interface keeps its types).
    pub(super) fn plan(
        &self,
        g: &Graph,
        opset: i64,
        map: &PrecisionMap,
        cx: &mut PassCx,
        scope: &HashMap<String, DataType>,
        keep_io: bool,
    ) -> Plan {
        let mut plan = Plan::typed(g, scope);
        let mut sensitive = ops::sensitive(g, &plan.dtype);
        // bfloat16 has float32's exponent range: tiny guards survive it.
        if self.to == Half::F16 {
            for (id, why) in super::guards::guarded(g) {
                sensitive.entry(id).or_insert(why);
            }
            for (id, why) in super::runtime_faults::crashing(g) {
                sensitive.entry(id).or_insert(why);
            }
        }
        // Both half types round a filter bank's signal (see `log_frontend`)
        // and a periodic function's argument (see `periodic`).
        for (id, why) in super::log_frontend::front_ends(g, &plan.dtype) {
            sensitive.entry(id).or_insert(why);
        }
        for (id, why) in super::periodic::periodic(g) {
            sensitive.entry(id).or_insert(why);
        }
        let target = self.to.precision();
        let ty = self.to.type_name();
        // Phase 1: compute nodes.
        let mut decided: Vec<(NodeId, Vec<Role>)> = Vec::new();
        let mut considered = 0;
        let mut range_cache: HashMap<ValueId, f32> = HashMap::new();
        for (id, node) in g.nodes() {
            let is_f32 = |v: &ValueId| plan.dt(*v) == DataType::Float;
            let float_io = node.inputs.iter().flatten().any(is_f32)
                || node.outputs.iter().flatten().any(is_f32);
            // A node with subgraphs is not converted itself: its subgraphs
            // are planned on their own (see `plan_tree`).
            if !float_io || is_retypable(node) || ops::reads_any_float(node, 0) || node.has_subgraphs() {
                continue;
            }
            considered += 1;
            let name = node.name_or_op().to_string();
            let ov = map.override_for(node);
            let want = ov.map(|o| o.to).or(map.default).unwrap_or(target);
            if want != target {
                let why = match ov {
                    Some(Override { why: Some(w), .. }) => w.clone(),
                    Some(o) => format!("the override for {} says {want}", o.selector),
                    None => format!("the precision map's default says {want}"),
                };
                cx.decline(&name, format!("kept in fp32: {why}"));
                continue;
            }
            let forced = ov.is_some();
            let contrib = self.options.contrib_ops && self.to == Half::F16;
            let Some(mut roles) = ops::signature(node, opset, self.to, contrib) else {
                cx.decline(
                    &name,
                    format!(
                        "kept in fp32: {} is not on the {ty} allow-list (or has no {ty} form at opset {opset})",
                        node.op_type
                    ),
                );
                continue;
            };
            // From opset 12 Pow's exponent may be an integer: it keeps its type.
            if node.is("Pow")
                && opset >= 12
                && let Some(Some(e)) = node.inputs.get(1)
                && plan.dt(*e) != DataType::Float
            {
                roles[1] = Role::Keep;
            }
            if !forced && let Some(r) = sensitive.get(&id) {
                cx.decline(&name, format!("kept in fp32: {r}"));
                continue;
            }
            if let Some(reason) = self.type_problem(g, &plan, node, &roles) {
                if let Some(r) = reason {
                    cx.decline(&name, format!("kept in fp32: {r}"));
                }
                continue;
            }
            // Weights beyond the range would be clamped, which changes the
            // result (a BatchNorm variance of 1e8, say): keep the node,
            // unless an override asks for it (then clamp and report).
            if !forced && let Some(r) = self.out_of_range_weight(g, node, &roles, &mut range_cache) {
                cx.decline(&name, format!("kept in fp32: {r}"));
                continue;
            }
            decided.push((id, roles));
        }
        plan.kept = considered - decided.len();
        for (id, roles) in decided {
            plan.convert.insert(id);
            plan.roles.insert(id, roles);
        }

        // Phase 2: Cast(to=float) of non-float32 values, Constant and
        // ConstantOfShape produce the half type directly when every reader
        // wants it (no Cast back for anyone).
        let mut retyped: Vec<NodeId> = Vec::new();
        for (id, node) in g.nodes() {
            if !is_retypable(node) {
                continue;
            }
            let Some(out) = node.outputs.first().copied().flatten() else {
                continue;
            };
            if plan.dt(out) != DataType::Float || g.is_graph_output(out) {
                continue;
            }
            let uses = &g.value(out).uses;
            if uses.is_empty() || !uses.iter().all(|u| plan.wants_half(u)) {
                continue;
            }
            if map.override_for(node).is_some_and(|o| o.to != target) {
                continue;
            }
            let ok = match node.op_type.as_str() {
                "Cast" => node
                    .inputs
                    .first()
                    .copied()
                    .flatten()
                    .is_some_and(|x| !matches!(plan.dt(x), DataType::Float | DataType::Undefined)),
                "ConstantOfShape" => opset >= if self.to == Half::F16 { 9 } else { 20 },
                _ => infopt_ir::infer::constant_value(node).is_some_and(|t| t.dtype() == DataType::Float),
            };
            if ok {
                retyped.push(id);
            }
        }
        for id in retyped {
            plan.convert.insert(id);
            plan.roles.insert(id, vec![Role::Keep; g.node(id).inputs.len()]);
        }

        // Phase 3: an island without a heavy op that needs as many Casts as
        // it has ops gains nothing (the Casts cost what float16 saves) and
        // only loses precision: it stays float32. Islands holding a node an
        // override asked for are kept.
        for island in plan.islands(g) {
            let set: HashSet<NodeId> = island.iter().copied().collect();
            let heavy = island.iter().any(|&n| {
                let node = g.node(n);
                HEAVY.iter().any(|op| node.is(op)) || map.override_for(node).is_some()
            });
            let ops = island.iter().filter(|&&n| !is_retypable(g.node(n))).count();
            let casts = plan.border_casts(g, &set, keep_io);
            if heavy || casts < ops {
                continue;
            }
            for &n in &island {
                plan.convert.remove(&n);
                plan.roles.remove(&n);
                let node = g.node(n);
                if !is_retypable(node) {
                    plan.kept += 1;
                    cx.decline(
                        node.name_or_op(),
                        format!(
                            "kept in fp32: a {ty} island of {ops} op{} without MatMul/Conv/Gemm would need {casts} Casts",
                            if ops == 1 { "" } else { "s" }
                        ),
                    );
                }
            }
        }
        plan
    }

    /// A reason when a constant `Half` input of `node` holds finite values
    /// beyond the half type's range.
    pub(super) fn out_of_range_weight(
        &self,
        g: &Graph,
        node: &Node,
        roles: &[Role],
        cache: &mut HashMap<ValueId, f32>,
    ) -> Option<String> {
        let max = match self.to {
            Half::F16 => half::f16::MAX.to_f32(),
            Half::Bf16 => half::bf16::MAX.to_f32(),
        };
        for (slot, v) in node.inputs.iter().enumerate() {
            let Some(v) = *v else { continue };
            if roles.get(slot) != Some(&Role::Half) {
                continue;
            }
            let largest = match cache.get(&v) {
                Some(m) => *m,
                None => {
                    let t = match g.constant(v) {
                        Some(t) => Some(t.clone()),
                        None => g
                            .producer(v)
                            .filter(|p| p.is("Constant"))
                            .and_then(infopt_ir::infer::constant_value),
                    };
                    let m = t.map_or(0.0, |t| values::largest_finite(&t));
                    cache.insert(v, m);
                    m
                }
            };
            if largest > max {
                return Some(format!(
                    "weight '{}' holds values up to {largest:e}, beyond {}'s ±{max:e}",
                    g.value(v).name,
                    self.to.type_name()
                ));
            }
        }
        None
    }

    /// `Some(reason)` when `node` cannot convert (`Some(None)`: silently, its
    /// types are not float32).
    pub(super) fn type_problem(
        &self,
        g: &Graph,
        plan: &Plan,
        node: &Node,
        roles: &[Role],
    ) -> Option<Option<String>> {
        for (slot, v) in node.inputs.iter().enumerate() {
            let Some(v) = v else { continue };
            if roles.get(slot) != Some(&Role::Half) {
                continue;
            }
            match plan.dt(*v) {
                DataType::Float => {}
                DataType::Undefined => {
                    return Some(Some(format!(
                        "the element type of input '{}' is unknown",
                        g.value(*v).name
                    )));
                }
                _ => return Some(None),
            }
        }
        let mut float_out = false;
        for v in node.outputs.iter().flatten() {
            match plan.dt(*v) {
                DataType::Float => float_out = true,
                DataType::Undefined => {
                    return Some(Some(format!(
                        "the element type of output '{}' is unknown",
                        g.value(*v).name
                    )));
                }
                _ => {}
            }
        }
        if !float_out {
            return Some(None);
        }
        // Statistics outputs (Mean/InvStdDev, running mean/var) keep float32.
        if (node.is("LayerNormalization") || node.is("BatchNormalization"))
            && node.outputs.iter().skip(1).flatten().any(|&v| g.reader_count(v) > 0)
        {
            return Some(Some("its statistics outputs are used".into()));
        }
        // SkipLayerNormalization's mean / inv_std_var outputs are float32 (U)
        // whatever T is: converted, they would be declared half.
        if node.domain() == "com.microsoft"
            && node.op_type == "SkipLayerNormalization"
            && node.outputs.iter().skip(1).take(2).any(|v| v.is_some())
        {
            return Some(Some("its float32 statistics outputs are present".into()));
        }
        None
    }

}

/// Ops whose float16 form pays for Casts around them.
const HEAVY: &[&str] = &[
    "MatMul",
    "Gemm",
    "Conv",
    "ConvTranspose",
    "Einsum",
    "LayerNormalization",
    "Attention",
    "SkipLayerNormalization",
    "LSTM",
    "GRU",
    "RNN",
];

/// Nodes whose output type is set by an attribute (phase 2 of the plan).
fn is_retypable(node: &Node) -> bool {
    node.domain().is_empty() && matches!(node.op_type.as_str(), "Cast" | "Constant" | "ConstantOfShape")
        && (!node.is("Cast")
            || node
                .attr_int("to")
                .ok()
                .flatten()
                .is_some_and(|t| t == DataType::Float.code() as i64))
}

/// The plan of one graph and of the subgraphs of its nodes.
pub(super) struct PlanTree {
    pub plan: Plan,
    /// By node, attribute index and subgraph index.
    pub subs: HashMap<(NodeId, usize, usize), PlanTree>,
    /// Islands of the plan, counted before the rewrite adds its Casts.
    pub islands: usize,
}

impl PlanTree {
    /// True when every reader of weight `v` of `g` inside `g`'s subgraphs
    /// (nested ones included) reads it in half, and at least one does.
    pub fn captures_want_half(&self, g: &Graph, v: ValueId) -> bool {
        let name = &g.value(v).name;
        let mut all = true;
        let mut any = false;
        for u in &g.value(v).uses {
            if u.slot == Slot::Capture {
                let (a, y) = self.readers_in_subgraphs(g, u.node, name);
                all &= a;
                any |= y;
            }
        }
        all && any
    }

    /// (all readers want half, some reader wants half) for the value named
    /// `name` read from `g` by the subgraphs of node `n`.
    fn readers_in_subgraphs(&self, g: &Graph, n: NodeId, name: &str) -> (bool, bool) {
        let mut all = true;
        let mut any = false;
        for (ai, a) in g.node(n).attributes.iter().enumerate() {
            for (si, sg) in a.subgraphs.iter().enumerate() {
                let Some(inner) = sg
                    .value_ids()
                    .find(|&x| sg.value(x).outer && sg.value(x).name == name)
                else {
                    continue;
                };
                let Some(sub) = self.subs.get(&(n, ai, si)) else {
                    all = false;
                    continue;
                };
                if sg.is_graph_output(inner) {
                    all = false;
                }
                for u in &sg.value(inner).uses {
                    match u.slot {
                        Slot::Input(i) => {
                            if sub.plan.wants_half(u) {
                                any = true;
                            } else if !ops::reads_any_float(sg.node(u.node), i) {
                                all = false;
                            }
                        }
                        Slot::Capture => {
                            let (a, y) = sub.readers_in_subgraphs(sg, u.node, name);
                            all &= a;
                            any |= y;
                        }
                    }
                }
            }
        }
        (all, any)
    }
}
