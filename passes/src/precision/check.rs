//! Checks of a precision map before any work: every override has a pass of
//! the pipeline that realizes its precision, and every override selects
//! something in the model. A misspelt node name or an override no pass reads
//! would otherwise change nothing, silently.

use std::collections::BTreeSet;

use infopt_ir::{Graph, Model, Node};

use super::{Override, Precision, PrecisionMap, Selector};

/// The passes that put a node in `p`: what an override to `p` needs in
/// the pipeline. Float32 is kept by any precision pass.
pub fn readers(p: Precision) -> &'static [&'static str] {
    match p {
        Precision::Fp32 => &["convert-float16", "convert-bfloat16", "quantize-int8"],
        Precision::Fp16 => &["convert-float16"],
        Precision::Bf16 => &["convert-bfloat16"],
        Precision::Int8 => &["quantize-int8"],
    }
}

/// How the caller names what the user wrote. The passes hold no
/// command-line text: a front end says how its overrides were given
/// (`--precision SEL=P`, a keyword argument) and what adds a pass.
pub trait Wording {
    /// An override given by the caller (the map's first `cli` entries).
    fn given(&self, o: &Override) -> String;
    /// What the user adds to get a pass that puts nodes in `p`.
    fn adds_reader(&self, p: Precision) -> String;
}

/// An override of the pipeline's own `precision:` map, as written there.
pub fn yaml_entry(o: &Override) -> String {
    let key = match &o.selector {
        Selector::Op(_) => "op",
        Selector::Name { .. } | Selector::Exact(_) => "name",
    };
    let sel = o.selector.source_text();
    format!(
        "the pipeline's precision override {{ {key}: {sel}, to: {} }}",
        o.to
    )
}

/// What the user wrote: the caller's wording for the first `cli` overrides
/// (the caller's go first in the map), the YAML entry otherwise.
fn entry(o: &Override, from_cli: bool, wording: &dyn Wording) -> String {
    if from_cli {
        wording.given(o)
    } else {
        yaml_entry(o)
    }
}

/// The overrides the user gave (tools add theirs with a `why`), with
/// whether each came from the command line.
fn user_overrides(map: &PrecisionMap, cli: usize) -> impl Iterator<Item = (&Override, bool)> {
    map.overrides
        .iter()
        .enumerate()
        .filter(|(_, o)| o.why.is_none())
        .map(move |(i, o)| (o, i < cli))
}

/// Every override (and the default) has a pass among `passes` (the passes
/// the pipeline runs) that realizes its precision; else the one-line
/// refusal naming the entry and what adds the pass.
pub fn check_readers(
    map: &PrecisionMap,
    cli: usize,
    passes: &[&str],
    wording: &dyn Wording,
) -> Result<(), String> {
    let runs = |p: Precision| readers(p).iter().any(|r| passes.contains(r));
    if let Some(d) = map.default
        && d != Precision::Fp32
        && !runs(d)
    {
        return Err(format!(
            "the pipeline's precision default {d} needs {} in the pipeline, which does not run it; add {}",
            readers(d).join(" or "),
            wording.adds_reader(d)
        ));
    }
    for (o, from_cli) in user_overrides(map, cli) {
        if runs(o.to) {
            continue;
        }
        let other = match o.to {
            Precision::Fp16 => Some(Precision::Bf16),
            Precision::Bf16 => Some(Precision::Fp16),
            _ => None,
        };
        if let Some(other) = other.filter(|&p| runs(p)) {
            return Err(format!(
                "{}: the pipeline converts to {other}, and a model holds one half type; ask for fp32 or {other} there",
                entry(o, from_cli, wording)
            ));
        }
        return Err(format!(
            "{}: no pass of the pipeline puts a node in {} (that needs {}); add {}",
            entry(o, from_cli, wording),
            o.to,
            readers(o.to).join(" or "),
            wording.adds_reader(o.to)
        ));
    }
    Ok(())
}

/// Default-domain op types the fusions of this crate create from other
/// ops: an override may name them before the model has any.
pub const FUSED_OPS: &[&str] = &[
    "Attention",
    "Gelu",
    "Gemm",
    "HardSigmoid",
    "HardSwish",
    "LayerNormalization",
    "LogSoftmax",
    "RMSNormalization",
    "SpaceToDepth",
];

/// Every node of `g` and of its subgraphs.
fn all_nodes<'a>(g: &'a Graph, out: &mut Vec<&'a Node>) {
    for (_, n) in g.nodes() {
        out.push(n);
        for sub in n.subgraphs() {
            all_nodes(sub, out);
        }
    }
}

/// Every override selects at least one node of `model` (a node name, an
/// op type present, or a regex that matches a name); else the one-line
/// refusal naming the entry, with "did you mean" over the model's node names
/// and op types.
pub fn check_model(
    map: &PrecisionMap,
    cli: usize,
    model: &Model,
    wording: &dyn Wording,
) -> Result<(), String> {
    let mut nodes = Vec::new();
    all_nodes(&model.graph, &mut nodes);
    for (o, from_cli) in user_overrides(map, cli) {
        if nodes.iter().any(|n| o.selector.matches(n)) {
            continue;
        }
        // An op a fusion creates (Gelu from its Erf/Tanh form) may be in the
        // graph only when the precision pass runs, which checks it then.
        if matches!(&o.selector, Selector::Op(op) if FUSED_OPS.contains(&op.as_str())) {
            continue;
        }
        let ops: BTreeSet<&str> = nodes.iter().map(|n| n.op_type.as_str()).collect();
        let text = o.selector.source_text();
        // An op type the model has outside the default domain
        // (com.microsoft.FusedConv): op selectors are default-domain ones.
        if let Some(n) = nodes
            .iter()
            .find(|n| n.op_type == text && !n.domain().is_empty())
        {
            return Err(format!(
                "{}: the model's {text} nodes are of domain {}, and an op-type override selects ops of the default ONNX domain; select them by node name (exactly, or a regex matching the whole name)",
                entry(o, from_cli, wording),
                n.domain()
            ));
        }
        let what = match &o.selector {
            Selector::Op(op) => format!("the model has no {op} node"),
            _ => "it is no node name of the model, no op type in it, and no regex matching a node name".into(),
        };
        let mut candidates: Vec<&str> = nodes.iter().filter_map(|n| n.name.as_deref()).collect();
        let scope = part_of_names(text, &candidates);
        candidates.extend(ops.iter().copied());
        let nearest = crate::suggest::closest(text, &candidates);
        // A one-letter slip (Gem for Gemm) is a typo even when the text is
        // also part of a name (fc/Gemm); a farther match is a guess, and a
        // scope the text is part of says more.
        let typo = nearest.filter(|c| crate::suggest::edit_distance(text, c) <= 1);
        let hint = typo
            .map(|c| format!("did you mean '{c}'?"))
            .or(scope)
            .or_else(|| nearest.map(|c| format!("did you mean '{c}'?")))
            .unwrap_or_else(|| {
                let list: Vec<&str> = ops.iter().copied().collect();
                format!("its op types: {}", list.join(", "))
            });
        return Err(format!("{}: {what}; {hint}", entry(o, from_cli, wording)));
    }
    Ok(())
}

/// "did you mean '.*ffn.*'?" when the entry is a part of node names
/// (`ffn` for `/ffn.fc1/MatMul`): a regex must match the whole name, and
/// a scope is what people type. Only for text without regex syntax other
/// than `.` and `/`, so that the suggested regex means what was typed.
fn part_of_names(text: &str, names: &[&str]) -> Option<String> {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ':'));
    if !plain {
        return None;
    }
    let matching: Vec<&str> = names.iter().copied().filter(|n| n.contains(text)).collect();
    let first = matching.first()?;
    Some(format!(
        "did you mean '.*{text}.*'? (a regex matching the whole name; it selects {} node(s), e.g. {first})",
        matching.len()
    ))
}

/// At a precision pass: every user override still selects a node of the
/// graph the pass sees. The command checked the model as loaded; a pass
/// before this one may have removed what an override named (fuse-conv-bn
/// folds `bn1/BatchNormalization` into its Conv), and the override would
/// then change nothing.
pub fn check_at_pass(map: &PrecisionMap, model: &Model, pass: &str) -> Result<(), String> {
    let mut nodes = Vec::new();
    all_nodes(&model.graph, &mut nodes);
    for (o, _) in user_overrides(map, 0) {
        if o.to == Precision::Int8 && pass != "quantize-int8" {
            continue;
        }
        if !nodes.iter().any(|n| o.selector.matches(n)) {
            return Err(format!(
                "the precision override for {} ({}) selects no node of the graph {pass} converts: the passes before it removed or renamed what it selected (a BatchNormalization folded into its Conv, a MatMul and Add fused into a Gemm); select the nodes that remain (dumping the graph after each pass shows them)",
                o.selector, o.to
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The command line's wording (src/job.rs), for the messages below.
    struct Flags;
    impl Wording for Flags {
        fn given(&self, o: &Override) -> String {
            format!("--precision {}={}", o.selector.source_text(), o.to)
        }
        fn adds_reader(&self, p: Precision) -> String {
            match p {
                Precision::Fp32 => "--fp16, --bf16 or --int8",
                Precision::Fp16 => "--fp16",
                Precision::Bf16 => "--bf16",
                Precision::Int8 => "--int8 with --calib-data or --ranges",
            }
            .into()
        }
    }

    use super::*;
    use infopt_ir::builder::GraphBuilder;

    fn map(args: &[&str]) -> PrecisionMap {
        let mut m = PrecisionMap::default();
        for a in args.iter().rev() {
            m.add_arg(a).unwrap();
        }
        m
    }

    #[test]
    fn each_precision_needs_the_pass_that_makes_it() {
        let m = map(&["conv2/Conv=fp16"]);
        let e = check_readers(&m, 1, &["fuse-conv-bn", "quantize-int8"], &Flags).unwrap_err();
        assert_eq!(
            e,
            "--precision conv2/Conv=fp16: no pass of the pipeline puts a node in fp16 (that needs convert-float16); add --fp16"
        );
        assert!(check_readers(&m, 1, &["convert-float16"], &Flags).is_ok());
        let m = map(&["Softmax=int8"]);
        let e = check_readers(&m, 0, &["convert-float16"], &Flags).unwrap_err();
        assert!(
            e.starts_with("the pipeline's precision override { op: Softmax, to: int8 }"),
            "{e}"
        );
        // float32 is kept by any precision pass.
        let m = map(&["Softmax=fp32"]);
        for p in ["convert-float16", "convert-bfloat16", "quantize-int8"] {
            assert!(check_readers(&m, 1, &[p], &Flags).is_ok(), "{p}");
        }
        assert!(check_readers(&m, 1, &["fuse-conv-bn"], &Flags).is_err());
    }

    #[test]
    fn every_override_selects_a_node_of_the_model() {
        use infopt_ir::DataType::Float;
        let mut b = GraphBuilder::new();
        let x = b.input("x", Float, infopt_ir::builder::dims(&["1", "4"]));
        let r = b.op("Relu", &[x], vec![]);
        let s = b.op("Sigmoid", &[r], vec![]);
        b.output(s, "y", Float, None);
        let mut model = b.build(17);
        for (id, name) in [(0, "block/act"), (1, "head/out")] {
            let n = model.graph.node_at(id);
            model.graph.node_mut(n).name = Some(name.into());
        }
        for ok in [
            "Relu=fp32",
            "block/act=fp32",
            "head/.*=fp32",
            "Sigmoid=fp16",
        ] {
            assert!(check_model(&map(&[ok]), 1, &model, &Flags).is_ok(), "{ok}");
        }
        let e = check_model(&map(&["block/akt=fp32"]), 1, &model, &Flags).unwrap_err();
        assert_eq!(
            e,
            "--precision block/akt=fp32: it is no node name of the model, no op type in it, and no regex matching a node name; did you mean 'block/act'?"
        );
        // A scope typed as a part of the names: the regex that selects them.
        let e = check_model(&map(&["head=fp32"]), 1, &model, &Flags).unwrap_err();
        assert_eq!(
            e,
            "--precision head=fp32: it is no node name of the model, no op type in it, and no regex matching a node name; did you mean '.*head.*'? (a regex matching the whole name; it selects 1 node(s), e.g. head/out)"
        );
        let e = check_model(&map(&["Softmax=fp32"]), 1, &model, &Flags).unwrap_err();
        assert!(e.contains("the model has no Softmax node"), "{e}");
        let e = check_model(&map(&["Sigmoidd=fp32"]), 1, &model, &Flags).unwrap_err();
        assert!(e.contains("did you mean 'Sigmoid'"), "{e}");
        let e = check_model(&map(&["zzzzzzzzzz=fp32"]), 1, &model, &Flags).unwrap_err();
        assert!(e.ends_with("its op types: Relu, Sigmoid"), "{e}");
        // An op type of another domain is named as such.
        let mut custom = model.clone();
        let id = custom.graph.node_at(0);
        custom.graph.node_mut(id).domain = Some("com.microsoft".into());
        let e = check_model(&map(&["Relu=fp32"]), 1, &custom, &Flags).unwrap_err();
        assert!(
            e.starts_with(
                "--precision Relu=fp32: the model's Relu nodes are of domain com.microsoft"
            ),
            "{e}"
        );
        // An op a fusion creates is checked where the precision pass runs.
        assert!(check_model(&map(&["Gelu=fp32"]), 1, &model, &Flags).is_ok());
        assert!(check_at_pass(&map(&["Gelu=fp32"]), &model, "convert-float16").is_err());
        // Overrides a tool added (with a reason) are not the user's to check.
        let mut m = map(&["nothing=fp32"]);
        m.overrides[0].why = Some("measured".into());
        assert!(check_model(&m, 0, &model, &Flags).is_ok());
    }
}
