//! Regression tests from an adversarial review: each one demonstrated a
//! correctness bug in the IR or a pass (a different function, an invalid
//! model, lost data or a panic) before it was fixed.

mod common;

use std::collections::HashSet;

use common::*;
use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::proto::{ModelProto, StringStringEntryProto, TensorAnnotation};
use infopt_ir::{Attribute, DataType, Graph, GraphIo, Model, Node, Tensor, Value, ValueId};
use infopt_runtime::InputShapes;

// ----- helpers -----

/// Saves `m` to a temporary folder with `Model::save` and loads it back.
fn save_and_reload(m: &Model) -> Model {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.onnx");
    let mut m = m.clone();
    m.save(&path, &Default::default()).expect("save");
    let loaded = Model::load(&path).expect("saved model loads back");
    // Bring every tensor in memory so the temp dir can go.
    let bytes = loaded.to_bytes().unwrap();
    infopt_ir::load::model_from_bytes(bytes.into(), dir.path(), &path).unwrap()
}

/// A subgraph that reads `outer` from the enclosing scope and returns `op(outer)`.
fn unary_branch(name: &str, op: &str, outer: &str) -> Graph {
    let mut g = Graph::new(name);
    let x = g.add_value(Value {
        outer: true,
        ..Value::named(outer)
    });
    let n = g.add_node(
        Node {
            op_type: op.into(),
            inputs: vec![Some(x)],
            ..Default::default()
        },
        &[&format!("{name}_out")],
    );
    let out = g.node(n).outputs[0].unwrap();
    g.outputs.push(GraphIo {
        value: out,
        info: Default::default(),
    });
    g
}

fn name(m: &Model, v: ValueId) -> String {
    m.graph.value(v).name.clone()
}

/// Every value name a serialized graph defines (inputs, initializers, node outputs).
fn defined_names(g: &infopt_ir::proto::GraphProto) -> Vec<String> {
    let mut names: Vec<String> = g.input.iter().filter_map(|i| i.name.clone()).collect();
    names.extend(g.initializer.iter().filter_map(|t| t.name.clone()));
    for n in &g.node {
        names.extend(n.output.iter().filter(|o| !o.is_empty()).cloned());
    }
    names
}

// ----- IR: Patch / replace_all_uses -----

/// BUG (ir/src/patch.rs:217 and 233-238, with ir/src/graph.rs:547-550): `Graph::apply`
/// gives a new node's output the placeholder name "\0patch{i}.{k}" and calls
/// `replace_all_uses(old, new)` *before* handing `old`'s name on to `new`.
/// `replace_all_uses` renames subgraph captures of `old` to `new`'s current
/// name, i.e. to the placeholder, and nothing renames them back. Any rewrite
/// that replaces a value read by an If/Loop body with a new node (here the
/// Transpose∘Transpose merge of eliminate-identity) leaves the body reading a
/// name that no longer exists: validation fails ("in a subgraph of If: ...
/// undefined input"), and without validation the saved model is broken.
#[test]
fn patch_leaks_placeholder_name_into_subgraph_captures() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2", "3", "4"]));
    let cond = b.input("cond", DataType::Bool, vec![]);
    let t1 = b.op(
        "Transpose",
        &[x],
        vec![Attribute::ints("perm", vec![1, 0, 2])],
    );
    let t2 = b.op(
        "Transpose",
        &[t1],
        vec![Attribute::ints("perm", vec![0, 2, 1])],
    );
    let t2_name = b.graph_mut().value(t2).name.clone();
    let y = b.op(
        "If",
        &[cond],
        vec![
            Attribute::graph("then_branch", unary_branch("then", "Relu", &t2_name)),
            Attribute::graph("else_branch", unary_branch("else", "Neg", &t2_name)),
        ],
    );
    b.output(y, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    // Panics with BrokeGraph: the If branches read "\0patch0.0".
    run_passes(&mut m, &["eliminate-identity"]);
    assert_eq!(ops(&m)["Transpose"], 1, "the pair merged");
    assert_equivalent(&original, &m, &InputShapes::new(), 0.0, 0.0);
}

// ----- eliminate-identity -----

/// BUG (passes/src/eliminate_identity.rs:259-260): for `Unsqueeze(Squeeze(a,
/// ax1), ax2)` the rank both axis lists refer to is rank(a), but the rule uses
/// `rank(a) + len(ax2)`. Negative axes are then normalized one too far, so
/// `Squeeze(a, [-2])` (axis 0 of a rank-2 `a`) looks equal to `Unsqueeze(.., [1])`
/// and the pair is removed although it moves the unit axis: `[1,5]` becomes
/// `[5,1]` in the original and stays `[1,5]` after the pass.
#[test]
fn unsqueeze_of_squeeze_with_negative_axis_is_not_an_identity() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "5"]));
    let a = b.op("Relu", &[x], vec![]);
    // The rule needs rank(a): give it the type shape inference would.
    b.graph_mut().set_value_type(
        a,
        &infopt_ir::TensorType {
            dtype: DataType::Float,
            shape: Some(dims(&["1", "5"])),
        },
    );
    let sq_axes = b.i64("sq_axes", &[1], &[-2]);
    let s = b.op("Squeeze", &[a, sq_axes], vec![]);
    let un_axes = b.i64("un_axes", &[1], &[1]);
    let u = b.op("Unsqueeze", &[s, un_axes], vec![]);
    b.output(u, "y", DataType::Float, None);
    let original = b.build(13);
    let mut m = original.clone();
    run_passes(&mut m, &["eliminate-identity"]);
    // Fails: y has shape [1,5] after the pass, [5,1] before.
    assert_equivalent(&original, &m, &InputShapes::new(), 0.0, 0.0);
}

// ----- names: verification bytes vs saved model -----

/// BUG (passes/src/eliminate_identity.rs:462 and ir/src/save.rs:157-181, 193):
/// merged Unsqueeze chains get an axes initializer named
/// `"{node.name_or_op()}.axes"`, i.e. "Unsqueeze.axes" for every unnamed node.
/// Names are only made unique in `Model::save`; `Model::to_bytes` /
/// `to_bytes_referencing_sources` (what `optimize` verifies and what
/// `assert_equivalent` runs) serialize the duplicates as they are, so the model
/// that is verified is not the model that is saved: here both merged
/// Unsqueezes read the same axes tensor in the verified bytes.
#[test]
fn merged_unsqueeze_axes_names_collide_in_verified_bytes() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["3"]));
    let a0 = b.i64("a0", &[1], &[0]);
    let a1 = b.i64("a1", &[1], &[0]);
    let a2 = b.i64("a2", &[1], &[1]);
    let a3 = b.i64("a3", &[1], &[2]);
    let u1 = b.op("Unsqueeze", &[x, a0], vec![]);
    let u2 = b.op("Unsqueeze", &[u1, a1], vec![]);
    let v1 = b.op("Unsqueeze", &[x, a2], vec![]);
    let v2 = b.op("Unsqueeze", &[v1, a3], vec![]);
    b.output(u2, "y1", DataType::Float, None);
    b.output(v2, "y2", DataType::Float, None);
    // Exporters often leave node names empty.
    for id in b.graph_mut().node_ids() {
        b.graph_mut().node_mut(id).name = None;
    }
    let original = b.build(13);
    let mut m = original.clone();
    run_passes(&mut m, &["eliminate-identity"]);
    assert_eq!(ops(&m), histogram(&[("Unsqueeze", 2)]));
    let proto = m.to_proto().unwrap();
    let names = defined_names(proto.graph.as_ref().unwrap());
    let unique: HashSet<&String> = names.iter().collect();
    assert_eq!(
        unique.len(),
        names.len(),
        "the verified bytes define a name twice: {names:?}"
    );
    assert_equivalent(&original, &m, &InputShapes::new(), 0.0, 0.0);
}

/// BUG (ir/src/graph.rs:564-567; nothing maintains `GraphProto.quantization_annotation`):
/// when a rewrite renames a value (bypassing `y = Identity(r)` with `y` a
/// graph output renames `r` to `y`), the quantization annotation of `r`
/// keeps naming "r", which no longer exists after the save: the annotation is
/// silently detached from its tensor.
#[test]
fn quantization_annotation_follows_renamed_value() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["4"]));
    let r = b.op("Relu", &[x], vec![]);
    let i = b.op("Identity", &[r], vec![]);
    b.output(i, "y", DataType::Float, None);
    let r_name = b.graph_mut().value(r).name.clone();
    b.graph_mut().meta.quantization_annotation = vec![TensorAnnotation {
        tensor_name: Some(r_name.clone()),
        quant_parameter_tensor_names: vec![StringStringEntryProto {
            key: Some("SCALE_TENSOR".into()),
            value: Some("r_scale".into()),
        }],
    }];
    let mut m = b.build(17);
    run_passes(&mut m, &["eliminate-identity"]);
    let saved = save_and_reload(&m);
    let proto: ModelProto = saved.to_proto().unwrap();
    let g = proto.graph.unwrap();
    let names = defined_names(&g);
    for a in &g.quantization_annotation {
        let t = a.tensor_name.clone().unwrap_or_default();
        assert!(
            names.contains(&t),
            "annotation names '{t}', which the saved graph does not define ({names:?})"
        );
    }
}

// ----- remove-initializer-inputs -----

/// BUG (passes/src/remove_initializer_inputs.rs:36-44): for IR version <= 3
/// the ONNX spec (and `onnx.checker`) require every initializer to be listed
/// as a graph input. The pass targets exactly those exports but removes the
/// inputs without raising `ir_version` to 4, so the written model is invalid.
#[test]
fn remove_initializer_inputs_keeps_ir3_models_valid() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2"]));
    let w = b.f32("w", &[2], &[1.0, 2.0]);
    let y = b.op("Mul", &[x, w], vec![]);
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(9);
    m.meta.ir_version = Some(3);
    let ty = infopt_ir::TensorType {
        dtype: DataType::Float,
        shape: Some(dims(&["2"])),
    };
    m.graph.inputs.push(GraphIo {
        value: w,
        info: infopt_ir::proto::ValueInfoProto {
            r#type: Some(ty.to_proto(None)),
            ..Default::default()
        },
    });
    run_passes(&mut m, &["remove-initializer-inputs"]);
    let listed: HashSet<ValueId> = m.graph.inputs.iter().map(|io| io.value).collect();
    let all_listed = m.graph.initializers().all(|(v, _)| listed.contains(&v));
    assert!(
        m.meta.ir_version.unwrap_or(0) >= 4 || all_listed,
        "ir_version {:?} requires initializers to be graph inputs; '{}' is not",
        m.meta.ir_version,
        name(&m, w)
    );
}

// ----- more: panics, zero-size dims, subgraph naming -----

/// BUG (passes/src/eliminate_identity.rs:169): the Transpose∘Transpose merge
/// indexes `p1[i as usize]` with the second node's perm entries after only
/// checking that both perms have the same length. A model with an
/// out-of-range perm (invalid, but user data) makes the pass panic
/// ("index out of bounds") instead of declining.
#[test]
fn transpose_merge_does_not_panic_on_out_of_range_perm() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2", "3"]));
    let t1 = b.op("Transpose", &[x], vec![Attribute::ints("perm", vec![1, 0])]);
    let t2 = b.op(
        "Transpose",
        &[t1],
        vec![Attribute::ints("perm", vec![0, 2])],
    );
    b.output(t2, "y", DataType::Float, None);
    let mut m = b.build(17);
    let names: Vec<String> = vec!["eliminate-identity".into()];
    let config =
        infopt_passes::PipelineConfig::from_pass_names(&names, Default::default()).unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        infopt_passes::run_pipeline(&mut m, &config, &Default::default(), &mut |_, _| {
            Ok(infopt_passes::Flow::Continue)
        })
        .map(|_| ())
    }));
    assert!(result.is_ok(), "eliminate-identity panicked on a bad perm");
}

/// Names every node output of `g` (recursively) that reuses a name visible from
/// an enclosing scope or already defined in the same graph: what
/// `onnx.checker` rejects with "Graph must be in single static assignment
/// (SSA) form" (node outputs are checked with `this_or_ancestor_graph_has`).
fn ssa_violations(
    g: &infopt_ir::proto::GraphProto,
    outer: &HashSet<String>,
    out: &mut Vec<String>,
) {
    let mut scope: HashSet<String> = outer.clone();
    for i in &g.input {
        scope.insert(i.name.clone().unwrap_or_default());
    }
    for t in &g.initializer {
        scope.insert(t.name.clone().unwrap_or_default());
    }
    for n in &g.node {
        for a in &n.attribute {
            let subs = a.g.iter().chain(a.graphs.iter());
            for sg in subs {
                ssa_violations(sg, &scope, out);
            }
        }
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            if !scope.insert(o.clone()) {
                out.push(o.clone());
            }
        }
    }
}

/// A subgraph with no reads from outside: `out_name = op(inner)` where `inner`
/// is an outer value.
fn branch_named_output(graph_name: &str, op: &str, outer: &str, out_name: &str) -> Graph {
    let mut g = Graph::new(graph_name);
    let x = g.add_value(Value {
        outer: true,
        ..Value::named(outer)
    });
    let n = g.add_node(
        Node {
            op_type: op.into(),
            inputs: vec![Some(x)],
            ..Default::default()
        },
        &[out_name],
    );
    let out = g.node(n).outputs[0].unwrap();
    g.outputs.push(GraphIo {
        value: out,
        info: Default::default(),
    });
    g
}

/// BUG (passes/src/fold_constants.rs:415-425, 463, 488 with ir/src/save.rs:508-510):
/// inlining an If copies the branch's value names into the enclosing graph
/// (`unique_name` only checks that graph), and `assign_unique_names` never
/// renames subgraph inputs/outputs ("fixed"), even though they are positional.
/// Two sibling branches may legally both define "t"; after the first If is
/// inlined, the main graph defines "t" and the other If's branch output "t"
/// now shadows it: the saved model fails `onnx.checker` (SSA violation).
#[test]
fn inlined_if_names_do_not_shadow_other_subgraphs() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["3"]));
    let c1 = b.initializer(
        "c1",
        Tensor::from_raw(DataType::Bool, vec![], vec![1u8].into()),
    );
    let c2 = b.input("c2", DataType::Bool, vec![]);
    let i1 = b.op(
        "If",
        &[c1],
        vec![
            Attribute::graph(
                "then_branch",
                branch_named_output("a_then", "Neg", "x", "t"),
            ),
            Attribute::graph(
                "else_branch",
                branch_named_output("a_else", "Relu", "x", "a_e"),
            ),
        ],
    );
    let z = b.op("Abs", &[i1], vec![]);
    let i2 = b.op(
        "If",
        &[c2],
        vec![
            Attribute::graph(
                "then_branch",
                branch_named_output("b_then", "Sin", "x", "t"),
            ),
            Attribute::graph(
                "else_branch",
                branch_named_output("b_else", "Cos", "x", "b_e"),
            ),
        ],
    );
    b.output(z, "z", DataType::Float, None);
    b.output(i2, "y", DataType::Float, None);
    let _ = x;
    let original = b.build(17);
    // The input is valid: no node output shadows an enclosing name.
    let mut v = Vec::new();
    ssa_violations(
        original.to_proto().unwrap().graph.as_ref().unwrap(),
        &HashSet::new(),
        &mut v,
    );
    assert!(v.is_empty(), "{v:?}");

    let mut m = original.clone();
    run_passes(&mut m, &["fold-constants"]);
    assert_eq!(ops(&m)["If"], 1, "the constant If was inlined");
    let saved = save_and_reload(&m);
    let mut v = Vec::new();
    ssa_violations(
        saved.to_proto().unwrap().graph.as_ref().unwrap(),
        &HashSet::new(),
        &mut v,
    );
    assert!(
        v.is_empty(),
        "the saved model redefines {v:?} (onnx.checker: not in SSA form)"
    );
}

/// BUG (ir/src/graph.rs:547-550 and 585-592, `replace_all_uses` /
/// `rename_outer`): redirecting a captured value renames the body's outer
/// reference to the replacement's name without checking that the body
/// already uses that name locally. ONNX allows a subgraph *input* to reuse an
/// outer name (onnx.checker checks graph inputs with `this_graph_has`), so a
/// Loop body may have a carried input "v" while the main graph also has "v".
/// Bypassing `w = Identity(v)` renames the body's read of outer "w" to "v",
/// which in the body now means the loop-carried input: the body computes
/// `v_carried + v_carried` instead of `v_carried + w`.
#[test]
fn captured_value_renamed_onto_shadowing_loop_input() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["3"]));
    let v = b.op("Relu", &[x], vec![]);
    b.graph_mut().value_mut(v).name = "v".into();
    let w = b.op("Identity", &[v], vec![]);
    b.graph_mut().value_mut(w).name = "w".into();
    let trip = b.i64("trip", &[], &[3]);
    // Body: (i, cond, v) -> (cond, v + w)
    let mut body = Graph::new("body");
    let io = |g: &mut Graph, name: &str| {
        let id = g.add_value(Value::named(name));
        g.inputs.push(GraphIo {
            value: id,
            info: Default::default(),
        });
        id
    };
    let _i = io(&mut body, "i");
    let cond = io(&mut body, "cond");
    let v_in = io(&mut body, "v");
    let w_outer = body.add_value(Value {
        outer: true,
        ..Value::named("w")
    });
    let add = body.add_node(
        Node {
            op_type: "Add".into(),
            inputs: vec![Some(v_in), Some(w_outer)],
            ..Default::default()
        },
        &["v_next"],
    );
    let keep = body.add_node(
        Node {
            op_type: "Identity".into(),
            inputs: vec![Some(cond)],
            ..Default::default()
        },
        &["cond_out"],
    );
    for n in [keep, add] {
        let out = body.node(n).outputs[0].unwrap();
        body.outputs.push(GraphIo {
            value: out,
            info: Default::default(),
        });
    }
    let node = Node {
        op_type: "Loop".into(),
        inputs: vec![Some(trip), None, Some(v)],
        attributes: vec![Attribute::graph("body", body)],
        ..Default::default()
    };
    let id = b.graph_mut().add_node(node, &["y_loop"]);
    let y = b.graph_mut().node(id).outputs[0].unwrap();
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(17);
    // tract cannot run Loop: check what the saved body's Add reads.
    let add_reads_outer = |m: &Model| -> (bool, String) {
        let saved = save_and_reload(m);
        let (_, lp) = saved
            .graph
            .nodes()
            .find(|(_, n)| n.op_type == "Loop")
            .unwrap();
        let body = lp.subgraphs().next().unwrap();
        let (_, add) = body.nodes().find(|(_, n)| n.op_type == "Add").unwrap();
        let second = add.inputs[1].unwrap();
        (body.value(second).outer, body.value(second).name.clone())
    };
    assert!(
        add_reads_outer(&m).0,
        "before the pass the body reads outer 'w'"
    );
    run_passes(&mut m, &["eliminate-identity"]);
    let (outer, name) = add_reads_outer(&m);
    assert!(
        outer,
        "the body's Add now reads its own loop-carried input '{name}' instead of the outer value"
    );
}

/// BUG (passes/src/eliminate_identity.rs:511-518, `transpose_of_unit_axes`):
/// the Reshape target is written with known dims as they are, so a dim of
/// size 0 becomes a 0 in a Reshape without `allowzero`, which means "copy the
/// input dim": `Transpose([1,0], perm=[1,0])` (output `[0,1]`) becomes
/// `Reshape(x, [0,1])`, i.e. shape `[1,1]` for an empty tensor, which fails
/// at run time.
#[test]
fn transpose_of_unit_axes_with_zero_sized_dim() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "0"]));
    let t = b.op("Transpose", &[x], vec![Attribute::ints("perm", vec![1, 0])]);
    let r = b.op("Relu", &[t], vec![]);
    b.output(r, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    run_passes(&mut m, &["eliminate-identity"]);
    assert_equivalent(&original, &m, &InputShapes::new(), 0.0, 0.0);
}
