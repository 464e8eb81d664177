//! Computes the constant parts of the graph ahead of time.
//!
//! ## What it does
//! Runs shape inference, then evaluates every node whose inputs are all
//! constants (initializers, in subgraphs also constants of the enclosing
//! graphs) with the reference kernels, and every node whose outputs inference
//! knows exactly: `Shape`/`Size` of a tensor whose shape is fully known, and
//! the `Gather`/`Unsqueeze`/`Concat`/arithmetic built on them. The results
//! become initializers that keep the outputs' names. An `If` whose condition
//! is a constant is replaced by the branch it takes, and so is an `If` one of
//! whose branches cannot run with the known shapes (an LSTM fed a rank-5
//! tensor, a Squeeze of an axis of size 2: ONNX Runtime refuses such a model at
//! load), with a note naming the failing node. A `Loop` with a constant trip
//! count of 1 and a constant true (or no) initial condition is replaced by
//! its body (scan outputs gain their leading axis of 1). Repeats until nothing
//! more folds, then recurses into the bodies of If/Loop/Scan. Exporters' shape
//! scaffolding (`Shape → Gather → Unsqueeze → Concat → Reshape`) collapses once
//! `fix-shapes` has fixed the dims it reads; dims left symbolic keep their
//! scaffolding. A `Reshape`/`Transpose`/`Expand`/... of a `ConstantOfShape`
//! too large to fold becomes a `ConstantOfShape` of the moved shape.
//!
//! Options: `max_tensor_bytes` (default 1048576): the largest folded output;
//! `max_growth_bytes` (default 16777216, the folding budget): the most folds
//! may add to the model over the whole pipeline (what they write less the
//! constants they make dead), so that the output is at most the input plus
//! this.
//!
//! ## When it declines
//! Each declined fold is reported with its reason:
//! - an output over `max_tensor_bytes` (folding `ConstantOfShape`, `Tile` or
//!   `Expand` into a huge initializer would bloat the model); the size is
//!   checked before anything is allocated;
//! - a fold past the folding budget (`max_growth_bytes`);
//! - a `ConstantOfShape` of more than 64 KiB: a fill costs a runtime nothing
//!   at load and written out only grows the file (a move of it stays a fill,
//!   and `fuse-conv-bn` scales a fill weight);
//! - non-deterministic ops (`RandomNormal`, `Bernoulli`, ...);
//! - `QuantizeLinear`/`DequantizeLinear` of a constant: the Q/DQ pair on a
//!   weight is the pattern TensorRT needs to build INT8 layers;
//! - ops without a reference kernel (`unsupported op "Erf"`), and inputs the
//!   kernels reject (integer division by zero, NaN cast to an integer, ...).
//!
//! ## Numerics
//! Integer and shape arithmetic, data movement, casts and `+ - * /` are exact;
//! `Exp`/`Log`/`Pow`, sums and MatMul are computed in f64 and rounded once,
//! within an ulp of what a runtime computes.
//!
//! ## Example
//! With `x: [1, 4, 8, 8]`, `s = Shape(x)`, `b = Gather(s, 0)`,
//! `u = Unsqueeze(b, [0])`, `c = Concat(u, [-1])`, `y = Reshape(x, c)` becomes
//! initializer `c = [1, -1]` and `y = Reshape(x, c)`.

crate::register_pass! {
    name: "fold-constants",
    kind: Fold,
    file: "fold_constants.rs",
    options: FoldConstantsOptions,
    build: |o: &FoldConstantsOptions| FoldConstants::new(o.clone()),
}

use std::collections::HashMap;

use infopt_ir::infer::{GraphFacts, InferReport, Opsets, Scope, infer_graph};
use infopt_ir::kernels::{Evaluator, Fallback, KernelError, ReferenceKernels};
use infopt_ir::{DataType, Graph, Model, Node, NodeId, Tensor, ValueId};

use crate::branch_check::static_failure;
use crate::pass::{Pass, PassCx, PassError};
use crate::util::{is_nondeterministic, is_renamable};

pub const DEFAULT_MAX_TENSOR_BYTES: u64 = 1 << 20;

/// The folding budget of a pipeline: what folds may add to the model in all.
pub const DEFAULT_MAX_GROWTH_BYTES: u64 = 16 << 20;

fn default_max_tensor_bytes() -> u64 {
    DEFAULT_MAX_TENSOR_BYTES
}

fn default_max_growth_bytes() -> u64 {
    DEFAULT_MAX_GROWTH_BYTES
}

/// Options of `fold-constants`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FoldConstantsOptions {
    /// The largest output (in bytes) a fold may create.
    #[serde(default = "default_max_tensor_bytes")]
    pub max_tensor_bytes: u64,
    /// The most (in bytes) folds may add to the model over the pipeline:
    /// what they write less the constants they make dead.
    #[serde(default = "default_max_growth_bytes")]
    pub max_growth_bytes: u64,
}

impl Default for FoldConstantsOptions {
    fn default() -> Self {
        FoldConstantsOptions {
            max_tensor_bytes: DEFAULT_MAX_TENSOR_BYTES,
            max_growth_bytes: DEFAULT_MAX_GROWTH_BYTES,
        }
    }
}

pub struct FoldConstants {
    pub options: FoldConstantsOptions,
    evaluator: Box<dyn Evaluator>,
}

static FALLBACK: std::sync::OnceLock<fn() -> Box<dyn Evaluator>> = std::sync::OnceLock::new();

/// Registers an evaluator for what the reference kernels do not implement
/// (the CLI registers tract). Every `fold-constants` built afterwards uses it
/// behind the reference kernels. The first registration wins; returns false
/// when one was already registered.
pub fn register_fallback_evaluator(factory: fn() -> Box<dyn Evaluator>) -> bool {
    FALLBACK.set(factory).is_ok()
}

/// Wraps the whole evaluator (kernels and fallback) of every fold-constants
/// built afterwards: the CLI checks each kind of fold against ONNX Runtime
/// this way (`infopt_verify::fold_check`). The first registration wins.
pub fn register_fold_check(wrap: WrapEvaluator) -> bool {
    CHECK.set(wrap).is_ok()
}

/// Wraps an evaluator in another (see [`register_fold_check`]).
pub type WrapEvaluator = fn(Box<dyn Evaluator>) -> Box<dyn Evaluator>;

static CHECK: std::sync::OnceLock<WrapEvaluator> = std::sync::OnceLock::new();

impl FoldConstants {
    /// Folding with the reference kernels (and the registered fallback, if
    /// any), checked by the registered check, if any.
    pub fn new(options: FoldConstantsOptions) -> FoldConstants {
        let kernels = ReferenceKernels::with_limit(options.max_tensor_bytes);
        let evaluator: Box<dyn Evaluator> = match FALLBACK.get() {
            Some(factory) => Box::new(Fallback(kernels, factory())),
            None => Box::new(kernels),
        };
        let evaluator = match CHECK.get() {
            Some(wrap) => wrap(evaluator),
            None => evaluator,
        };
        FoldConstants { options, evaluator }
    }

    /// Folding with another evaluator (e.g. the reference kernels with a
    /// runtime as fallback, see `infopt_ir::kernels::Fallback`).
    pub fn with_evaluator(
        options: FoldConstantsOptions,
        evaluator: Box<dyn Evaluator>,
    ) -> FoldConstants {
        FoldConstants { options, evaluator }
    }
}

/// What a subgraph sees of its enclosing graphs.
#[derive(Clone, Default)]
struct FoldScope {
    infer: Scope,
    constants: HashMap<String, Tensor>,
}

/// Most sweeps per graph (each sweep folds everything it can in one pass over
/// the nodes; more are needed only after an If was inlined).
const MAX_SWEEPS: usize = 8;

impl FoldConstants {
    fn fold_graph(
        &self,
        g: &mut Graph,
        opsets: Opsets,
        scope: &FoldScope,
        cx: &mut PassCx,
    ) -> Result<usize, PassError> {
        let mut total = 0;
        let mut report = InferReport::default();
        let mut facts = infer_graph(g, opsets, &scope.infer, &mut report);
        for _ in 0..MAX_SWEEPS {
            let n = self.sweep(g, &facts, opsets, scope, cx)?;
            total += n;
            if n == 0 {
                break;
            }
            facts = infer_graph(g, opsets, &scope.infer, &mut report);
        }
        if !g.nodes().any(|(_, n)| n.has_subgraphs()) {
            return Ok(total);
        }
        // Subgraphs, with this graph's constants and facts in scope.
        let mut child = FoldScope {
            infer: facts.scope_for_subgraphs(g, &scope.infer),
            constants: scope.constants.clone(),
        };
        for (v, t) in g.initializers() {
            if !g.is_graph_input(v) {
                child.constants.insert(g.value(v).name.clone(), t.clone());
            }
        }
        for id in g.node_ids() {
            if !g.node(id).has_subgraphs() {
                continue;
            }
            let n_attrs = g.node(id).attributes.len();
            for a in 0..n_attrs {
                let mut subs = std::mem::take(&mut g.node_mut(id).attributes[a].subgraphs);
                let mut result = Ok(0);
                for sg in &mut subs {
                    result = self.fold_graph(sg, opsets, &child, cx);
                    match &result {
                        Ok(n) => total += n,
                        Err(_) => break,
                    }
                }
                g.node_mut(id).attributes[a].subgraphs = subs;
                result?;
            }
            g.refresh_captures(id);
        }
        total += self.drop_failing_branches(g, opsets, &child.infer, cx)?;
        Ok(total)
    }

    /// Replaces each `If` one of whose branches fails for every value it can
    /// receive (see `branch_check`) by the other branch: every run of the
    /// original that succeeds takes that one. Left in place, the failing
    /// branch makes the model unloadable once its shapes are fixed.
    fn drop_failing_branches(
        &self,
        g: &mut Graph,
        opsets: Opsets,
        scope: &Scope,
        cx: &mut PassCx,
    ) -> Result<usize, PassError> {
        let mut count = 0;
        for id in g.node_ids() {
            if g.try_node(id).is_none() || !g.node(id).is("If") {
                continue;
            }
            let failure = |attr: &str| {
                let branch = g.node(id).attr(attr)?.subgraphs.first()?;
                static_failure(branch, opsets, scope)
            };
            let (keep_then, why) = match (failure("then_branch"), failure("else_branch")) {
                (None, Some(why)) => (true, why),
                (Some(why), None) => (false, why),
                _ => continue,
            };
            let (dropped, kept) = if keep_then {
                ("else", "then")
            } else {
                ("then", "else")
            };
            cx.note(format!(
                "fold-constants: If '{}': the {dropped} branch cannot run with these shapes \
                 ({why}); only the {kept} branch is kept (inputs that took the {dropped} \
                 branch made the original fail)",
                g.node(id).name_or_op()
            ));
            inline_if(g, id, keep_then)?;
            count += 1;
        }
        Ok(count)
    }

    /// True for a Loop whose trip count is a constant 1 and whose initial
    /// condition is absent or a constant true: its body runs exactly once.
    fn runs_once(g: &Graph, scope: &FoldScope, id: NodeId) -> bool {
        let scalar = |slot: usize| {
            let v = g.node(id).inputs.get(slot).copied().flatten()?;
            let t = Self::constant_of(g, scope, v)?;
            match t.to_i64_vec() {
                Ok(v) if v.len() == 1 => Some(v[0]),
                _ => None,
            }
        };
        let cond_true = match g.node(id).inputs.get(1).copied().flatten() {
            None => true,
            Some(_) => scalar(1).is_some_and(|c| c != 0),
        };
        scalar(0) == Some(1) && cond_true
    }

    /// The constant behind an input: a local initializer or an outer constant.
    fn constant_of<'a>(g: &'a Graph, scope: &'a FoldScope, v: ValueId) -> Option<&'a Tensor> {
        let value = g.value(v);
        if value.outer {
            return scope.constants.get(&value.name);
        }
        g.constant(v)
    }

    fn sweep(
        &self,
        g: &mut Graph,
        facts: &GraphFacts,
        opsets: Opsets,
        scope: &FoldScope,
        cx: &mut PassCx,
    ) -> Result<usize, PassError> {
        let mut count = 0;
        let order = g.topological_order()?;
        for id in order {
            if g.try_node(id).is_none() {
                continue;
            }
            let node = g.node(id);
            let at = node.name_or_op().to_string();
            if node.is("If") {
                let cond = node.inputs.first().copied().flatten();
                let known = cond.and_then(|c| {
                    Self::constant_of(g, scope, c)
                        .cloned()
                        .or_else(|| facts.known_value(c))
                });
                if let Some(t) = known {
                    match t.to_i64_vec() {
                        Ok(v) if v.len() == 1 => {
                            inline_if(g, id, v[0] != 0)?;
                            count += 1;
                        }
                        _ => cx.decline(&at, "the If condition is not a single boolean"),
                    }
                }
                continue;
            }
            if node.is("Loop") {
                if Self::runs_once(g, scope, id) {
                    inline_loop(g, id, opsets.onnx)?;
                    count += 1;
                }
                continue;
            }
            if node.has_subgraphs() {
                continue;
            }
            let outs: Vec<ValueId> = node.outputs.iter().flatten().copied().collect();
            if outs.is_empty() || outs.iter().any(|&o| g.value(o).initializer.is_some()) {
                continue;
            }
            // A fill moved to another shape stays a fill (see `fold_fill`);
            // its input is a ConstantOfShape's output, never a constant.
            if crate::fold_fill::refill(g, facts, id, opsets.onnx) {
                count += 1;
                continue;
            }
            let node = g.node(id);
            let inputs: Vec<Option<ValueId>> = node.inputs.clone();
            let consts: Vec<Option<&Tensor>> = inputs
                .iter()
                .map(|i| i.and_then(|v| Self::constant_of(g, scope, v)))
                .collect();
            let all_const = inputs
                .iter()
                .zip(&consts)
                .all(|(i, c)| i.is_none() || c.is_some());
            let op = node.op_type.clone();
            if is_nondeterministic(&op) {
                if all_const {
                    cx.decline(
                        &at,
                        format!("non-deterministic op \"{op}\" is never folded"),
                    );
                }
                continue;
            }
            // Outputs inference knows exactly (shape arithmetic on fixed dims).
            if !all_const {
                let known: Option<Vec<Tensor>> =
                    outs.iter().map(|&o| facts.known_value(o)).collect();
                if let Some(tensors) = known
                    && self.within_budget(g, id, &outs, &tensors, &at, cx)
                {
                    replace_with_initializers(g, id, &outs, tensors);
                    count += 1;
                }
                continue;
            }
            if node.domain().is_empty()
                && matches!(op.as_str(), "QuantizeLinear" | "DequantizeLinear")
            {
                let w = inputs
                    .first()
                    .copied()
                    .flatten()
                    .map(|v| g.value(v).name.clone())
                    .unwrap_or_default();
                cx.decline(&at, format!("{op} of constant weight '{w}' is kept: the Q/DQ weight pattern TensorRT needs"));
                continue;
            }
            // Size check before evaluating, from the inferred output types.
            if let Some((name, bytes)) = outs.iter().find_map(|&o| {
                let bytes = expected_bytes(facts, o)?;
                (bytes > self.options.max_tensor_bytes).then(|| (g.value(o).name.clone(), bytes))
            }) {
                cx.decline(&at, self.over_budget(&name, bytes));
                continue;
            }
            if node.domain().is_empty()
                && op == "ConstantOfShape"
                && let Some(bytes) = outs.first().and_then(|&o| expected_bytes(facts, o))
                && bytes > MAX_FILL_BYTES
            {
                cx.decline(
                    &at,
                    format!(
                        "ConstantOfShape '{}' ({}) is kept: a fill a runtime makes at load, which written out would only grow the model",
                        g.value(outs[0]).name,
                        human(bytes)
                    ),
                );
                continue;
            }
            let opset = opset_for(node, opsets);
            infopt_ir::context::enter_node(node);
            let result = self.evaluator.eval(node, &consts, opset);
            match result {
                Ok(Some(tensors)) if tensors.len() >= outs.len() => {
                    // Keep only the outputs the node has (None outputs are skipped).
                    let node = g.node(id);
                    let picked: Vec<Tensor> = node
                        .outputs
                        .iter()
                        .zip(tensors)
                        .filter(|(o, _)| o.is_some())
                        .map(|(_, t)| t)
                        .collect();
                    if picked.len() != outs.len() {
                        cx.decline(
                            &at,
                            format!("{op}: the evaluator returned fewer outputs than the node has"),
                        );
                        continue;
                    }
                    if self.within_budget(g, id, &outs, &picked, &at, cx) {
                        replace_with_initializers(g, id, &outs, picked);
                        count += 1;
                    }
                }
                Ok(Some(_)) => cx.decline(
                    &at,
                    format!("{op}: the evaluator returned fewer outputs than the node has"),
                ),
                Ok(None) => {
                    let key = if node.domain().is_empty() {
                        op.clone()
                    } else {
                        format!("{}::{op}", node.domain())
                    };
                    cx.decline(
                        &at,
                        format!("unsupported op \"{key}\" (no reference kernel)"),
                    );
                }
                Err(KernelError::TooLarge { bytes, .. }) => {
                    let name = g.value(outs[0]).name.clone();
                    cx.decline(&at, self.over_budget(&name, bytes));
                }
                Err(e) => cx.decline(&at, format!("cannot evaluate {op}: {e}")),
            }
        }
        Ok(count)
    }

    fn over_budget(&self, name: &str, bytes: u64) -> String {
        format!(
            "output '{name}' would be {bytes} bytes ({}), over max_tensor_bytes {} ({})",
            human(bytes),
            self.options.max_tensor_bytes,
            human(self.options.max_tensor_bytes)
        )
    }

    fn within_budget(
        &self,
        g: &Graph,
        id: NodeId,
        outs: &[ValueId],
        tensors: &[Tensor],
        at: &str,
        cx: &mut PassCx,
    ) -> bool {
        let mut added: u64 = 0;
        for (&o, t) in outs.iter().zip(tensors) {
            let bytes = t.payload_bytes() as u64;
            if bytes > self.options.max_tensor_bytes {
                cx.decline(at, self.over_budget(&g.value(o).name, bytes));
                return false;
            }
            added = added.saturating_add(bytes);
        }
        // Growth: what the fold writes, less the initializers only it read.
        let freed: u64 = g
            .node(id)
            .inputs
            .iter()
            .flatten()
            .filter(|&&v| !g.is_graph_input(v) && g.reader_count(v) == 1)
            .filter_map(|&v| g.value(v).initializer.as_ref())
            .map(|t| t.payload_bytes() as u64)
            .sum();
        let growth = added as i64 - freed as i64;
        let so_far = cx.side.get::<FoldGrowth>().map_or(0, |g| g.0);
        if growth > 0 && so_far.saturating_add(growth) > self.options.max_growth_bytes as i64 {
            cx.decline(
                at,
                format!(
                    "folding has grown the model by {} so far; this fold would add {}, past max_growth_bytes {} ({})",
                    human(so_far.max(0) as u64),
                    human(growth as u64),
                    self.options.max_growth_bytes,
                    human(self.options.max_growth_bytes)
                ),
            );
            return false;
        }
        cx.side.insert(FoldGrowth(so_far.saturating_add(growth)));
        true
    }
}

/// Bytes folding has added to the model so far in this pipeline (what folds
/// wrote less the constants they made dead), in the pipeline's side data.
#[derive(Clone, Copy, Debug, Default)]
struct FoldGrowth(i64);

/// A `ConstantOfShape` above this size is kept as the node: written out it
/// only grows the model (ONNX's `light` models make 100 MB of placeholder
/// weights so); `fuse-conv-bn` scales a fill weight where it stands, and a
/// move of a fill stays a fill (`fold_fill`).
pub const MAX_FILL_BYTES: u64 = 64 << 10;

fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Bytes of a value whose type and shape inference knows.
fn expected_bytes(facts: &GraphFacts, v: ValueId) -> Option<u64> {
    let f = facts.get(v)?;
    let dims = f.ty.known_dims()?;
    let n = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?));
    match n {
        None => Some(u64::MAX),
        Some(n) => match f.ty.dtype {
            DataType::String | DataType::Undefined => None,
            d => Some(
                d.storage_bytes(n as usize)
                    .map(|b| b as u64)
                    .unwrap_or(u64::MAX),
            ),
        },
    }
}

fn opset_for(node: &Node, opsets: Opsets) -> i64 {
    if node.domain() == "com.microsoft" {
        opsets.microsoft.unwrap_or(1)
    } else {
        opsets.onnx
    }
}

/// Makes every output of `id` an initializer with the output's name and removes the node.
fn replace_with_initializers(g: &mut Graph, id: NodeId, outs: &[ValueId], tensors: Vec<Tensor>) {
    let mut inits = Vec::with_capacity(outs.len());
    for (&o, t) in outs.iter().zip(tensors) {
        let name = g.value(o).name.clone();
        let init = g.add_initializer(&name, t);
        g.replace_all_uses(o, init);
        inits.push((init, name));
    }
    g.remove_node(id);
    for &o in outs {
        g.remove_value(o);
    }
    for (init, name) in inits {
        g.value_mut(init).name = name;
    }
}

/// A name not used by any value of `g`.
fn unique_name(g: &Graph, base: &str, taken: &mut std::collections::HashSet<String>) -> String {
    let mut name = base.to_string();
    let mut k = 1;
    while taken.contains(&name) || g.find_value(&name).is_some() {
        name = format!("{base}_{k}");
        k += 1;
    }
    taken.insert(name.clone());
    name
}

/// Replaces `If` node `id` by the nodes of the branch it takes.
fn inline_if(g: &mut Graph, id: NodeId, cond: bool) -> Result<(), PassError> {
    let attr = if cond { "then_branch" } else { "else_branch" };
    let branch = g
        .node(id)
        .attr(attr)
        .and_then(|a| a.subgraphs.first())
        .cloned()
        .ok_or_else(|| {
            PassError::Model(format!(
                "If node '{}' has no {attr}",
                g.node(id).name_or_op()
            ))
        })?;
    let if_outs: Vec<Option<ValueId>> = g.node(id).outputs.clone();
    if branch.outputs.len() != if_outs.len() {
        return Err(PassError::Model(format!(
            "If node '{}': {attr} has {} outputs, the node {}",
            g.node(id).name_or_op(),
            branch.outputs.len(),
            if_outs.len()
        )));
    }
    let mut taken = std::collections::HashSet::new();
    let (srcs, at) = splice_body(g, id, &branch, &HashMap::new(), &mut taken)?;
    let srcs: Vec<Option<ValueId>> = srcs.into_iter().map(Some).collect();
    take_over_outputs(g, id, &srcs, at, &mut taken)
}

/// Replaces `Loop` node `id`, which runs its body once, by the body: the
/// iteration number is 0, the condition true, the carried values their
/// initial values; each scan output gains its leading axis of 1 through an
/// Unsqueeze.
fn inline_loop(g: &mut Graph, id: NodeId, opset: i64) -> Result<(), PassError> {
    let label = g.node(id).name_or_op().to_string();
    let body = g
        .node(id)
        .attr("body")
        .and_then(|a| a.subgraphs.first())
        .cloned()
        .ok_or_else(|| PassError::Model(format!("Loop node '{label}' has no body")))?;
    let carried: Vec<Option<ValueId>> = g.node(id).inputs.iter().skip(2).copied().collect();
    if body.inputs.len() != carried.len() + 2 || body.outputs.len() < carried.len() + 1 {
        return Err(PassError::Model(format!(
            "Loop node '{label}': its body has {} inputs and {} outputs for {} carried values",
            body.inputs.len(),
            body.outputs.len(),
            carried.len()
        )));
    }
    let mut taken = std::collections::HashSet::new();
    let mut bound = HashMap::new();
    let iter_name = unique_name(g, &format!("{label}.iteration"), &mut taken);
    let iter = g.add_initializer(&iter_name, Tensor::from_i64(vec![], &[0]));
    bound.insert(body.inputs[0].value, iter);
    let cond_name = unique_name(g, &format!("{label}.condition"), &mut taken);
    let cond = g.add_initializer(
        &cond_name,
        Tensor::from_raw(DataType::Bool, vec![], vec![1u8].into()),
    );
    bound.insert(body.inputs[1].value, cond);
    for (io, v) in body.inputs.iter().skip(2).zip(&carried) {
        let Some(v) = *v else {
            return Err(PassError::Model(format!(
                "Loop node '{label}': a carried value has no initial value"
            )));
        };
        bound.insert(io.value, v);
    }
    let (outs, mut at) = splice_body(g, id, &body, &bound, &mut taken)?;
    // Body outputs: condition, carried values, scan outputs.
    let mut srcs: Vec<Option<ValueId>> =
        outs[1..=carried.len()].iter().copied().map(Some).collect();
    for &scan in &outs[carried.len() + 1..] {
        let mut unsqueeze = Node {
            op_type: "Unsqueeze".into(),
            inputs: vec![Some(scan)],
            ..Default::default()
        };
        if opset < 13 {
            unsqueeze.set_attr(infopt_ir::Attribute::ints("axes", vec![0]));
        } else {
            let axes_name = unique_name(g, &format!("{label}.scan_axes"), &mut taken);
            let axes = g.add_initializer(&axes_name, Tensor::from_i64(vec![1], &[0]));
            unsqueeze.inputs.push(Some(axes));
        }
        let name = unique_name(g, &format!("{}.stacked", g.value(scan).name), &mut taken);
        let nid = g.insert_node(at, unsqueeze, &[&name]);
        at += 1;
        srcs.push(g.node(nid).outputs[0]);
    }
    take_over_outputs(g, id, &srcs, at, &mut taken)
}

/// Copies the nodes of `body` into `g` before node `id`, reading `bound`
/// for the body values given (its inputs) and the enclosing graph for what
/// it captures. Returns the outer values of the body outputs and the
/// position after the copied nodes.
fn splice_body(
    g: &mut Graph,
    id: NodeId,
    body: &Graph,
    bound: &HashMap<ValueId, ValueId>,
    taken: &mut std::collections::HashSet<String>,
) -> Result<(Vec<ValueId>, usize), PassError> {
    let mut map: HashMap<ValueId, ValueId> = bound.clone();
    let mut renamed: Vec<(String, String)> = Vec::new();
    for v in body.value_ids().collect::<Vec<_>>() {
        let value = body.value(v);
        if map.contains_key(&v) {
            continue;
        }
        if value.outer {
            let outer = g.find_value(&value.name).ok_or_else(|| {
                PassError::Model(format!(
                    "subgraph reads '{}', which the enclosing graph does not define",
                    value.name
                ))
            })?;
            map.insert(v, outer);
        } else if let Some(t) = &value.initializer {
            let name = unique_name(g, &value.name, taken);
            if name != value.name {
                renamed.push((value.name.clone(), name.clone()));
            }
            let init = g.add_initializer(&name, t.clone());
            map.insert(v, init);
        }
    }
    let mut at = g.position(id).unwrap_or(0);
    let order = body.topological_order()?;
    for n in order {
        let src = body.node(n);
        let mut node = src.clone();
        node.inputs = src
            .inputs
            .iter()
            .map(|i| i.and_then(|v| map.get(&v).copied()))
            .collect();
        node.outputs.clear();
        let names: Vec<String> = src
            .outputs
            .iter()
            .map(|o| match o {
                Some(v) => {
                    let old = body.value(*v).name.clone();
                    let new = unique_name(g, &old, taken);
                    if new != old {
                        renamed.push((old, new.clone()));
                    }
                    new
                }
                None => String::new(),
            })
            .collect();
        let refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
        let new_id = g.insert_node(at, node, &refs);
        at += 1;
        let new_outs = g.node(new_id).outputs.clone();
        for (o, no) in src.outputs.iter().zip(new_outs) {
            if let (Some(o), Some(no)) = (o, no) {
                map.insert(*o, no);
                if let Some(ty) = body.value_type(*o) {
                    g.set_value_type(no, &ty);
                }
            }
        }
        // Nested subgraphs read renamed values by their new names.
        if !renamed.is_empty() {
            for sg in g.node_mut(new_id).subgraphs_mut() {
                for (old, new) in &renamed {
                    sg.rename_outer(old, new);
                }
            }
            g.refresh_captures(new_id);
        }
    }
    let mut outs = Vec::with_capacity(body.outputs.len());
    for io in &body.outputs {
        let Some(&src) = map.get(&io.value) else {
            return Err(PassError::Model(format!(
                "subgraph output '{}' is undefined",
                body.value(io.value).name
            )));
        };
        outs.push(src);
    }
    Ok((outs, at))
}

/// Makes the readers of node `id`'s outputs read `srcs` (a graph output
/// keeps its name through an Identity) and removes the node.
fn take_over_outputs(
    g: &mut Graph,
    id: NodeId,
    srcs: &[Option<ValueId>],
    mut at: usize,
    taken: &mut std::collections::HashSet<String>,
) -> Result<(), PassError> {
    let outs: Vec<Option<ValueId>> = g.node(id).outputs.clone();
    for (src, out) in srcs.iter().zip(&outs) {
        let (Some(src), Some(out)) = (*src, *out) else {
            continue;
        };
        let src = if g.is_graph_output(out) && !is_renamable(g, src) {
            // Keep the interface names: route through an Identity.
            let ident = Node {
                op_type: "Identity".into(),
                inputs: vec![Some(src)],
                ..Default::default()
            };
            let name = unique_name(g, &format!("{}.taken", g.value(out).name), taken);
            let nid = g.insert_node(at, ident, &[&name]);
            at += 1;
            g.node(nid).outputs[0].expect("identity output")
        } else {
            src
        };
        g.replace_all_uses(out, src);
    }
    g.remove_node(id);
    for out in outs.into_iter().flatten() {
        if g.reader_count(out) == 0 {
            g.remove_value(out);
        }
    }
    Ok(())
}

impl Pass for FoldConstants {
    fn name(&self) -> &'static str {
        "fold-constants"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        let opsets = Opsets::of(model);
        self.fold_graph(&mut model.graph, opsets, &FoldScope::default(), cx)
    }
}
