//! Inserting a node on some edges of a value, and patches that would create a
//! cycle.

use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{Attribute, DataType, Graph, Node, Patch, PatchValue, Slot, Use, ValueId};

/// x -> Relu -> a (output), x -> Neg -> b (output).
fn two_consumers() -> (Graph, ValueId) {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2", "3"]));
    let a = b.op("Relu", &[x], vec![]);
    let n = b.op("Neg", &[x], vec![]);
    b.output(a, "a", DataType::Float, Some(dims(&["2", "3"])));
    b.output(n, "b", DataType::Float, Some(dims(&["2", "3"])));
    (b.into_graph(), x)
}

fn reader_of(g: &Graph, v: ValueId, op: &str) -> Use {
    *g.value(v)
        .uses
        .iter()
        .find(|u| g.node(u.node).op_type == op)
        .expect("reader")
}

#[test]
fn node_inserted_on_one_of_two_consumers() {
    let (mut g, x) = two_consumers();
    let neg_use = reader_of(&g, x, "Neg");
    let mut p = Patch::new();
    let mut cast = Node::new("Cast");
    cast.set_attr(Attribute::int("to", 10));
    p.insert_on_edge(x, vec![neg_use], cast, vec![], 0, "x.f16".into());
    g.apply(p).expect("edge patch applies");
    g.validate().expect("valid after the edge patch");

    let relu = g.nodes().find(|(_, n)| n.op_type == "Relu").unwrap().1;
    let neg = g.nodes().find(|(_, n)| n.op_type == "Neg").unwrap().1;
    let cast = g.nodes().find(|(_, n)| n.op_type == "Cast").unwrap().1;
    // Relu still reads x; Neg reads the Cast, which reads x.
    assert_eq!(relu.inputs[0], Some(x));
    assert_eq!(cast.inputs[0], Some(x));
    let cast_out = cast.outputs[0].unwrap();
    assert_eq!(neg.inputs[0], Some(cast_out));
    assert_eq!(g.value(cast_out).name, "x.f16");
    // Use lists follow: x is read by Relu and the Cast, the Cast's output by Neg.
    assert_eq!(g.value(x).uses.len(), 2);
    assert_eq!(g.value(cast_out).uses.len(), 1);
    assert!(g.topological_order().is_ok());
}

#[test]
fn rewire_to_a_node_reading_the_value_keeps_its_own_input() {
    // Inserting in front of every reader with a full rewire: the new node
    // must keep reading the value it replaces (before, it read itself).
    let (mut g, x) = two_consumers();
    let mut p = Patch::new();
    let n = p.add_node(
        Node::new("Identity"),
        vec![Some(PatchValue::Existing(x))],
        vec!["x.copy".into()],
    );
    p.replace(x, PatchValue::NewNode { node: n, output: 0 });
    g.apply(p).expect("applies");
    g.validate().expect("no self-loop");
    let id = g.nodes().find(|(_, n)| n.op_type == "Identity").unwrap().1;
    assert_eq!(id.inputs[0], Some(x));
    assert_eq!(g.value(x).uses.len(), 1);
}

#[test]
fn cycle_is_rejected_and_graph_untouched() {
    let (mut g, x) = two_consumers();
    let relu = g.nodes().find(|(_, n)| n.op_type == "Relu").unwrap().1;
    let a = relu.outputs[0].unwrap();
    let neg_use = reader_of(&g, x, "Neg");
    // Neg would read Abs(a) instead of x; fine. But Relu reading Abs(a) is a cycle.
    let relu_use = reader_of(&g, x, "Relu");
    let mut p = Patch::new();
    p.insert_on_edge(a, vec![], Node::new("Abs"), vec![], 0, "abs".into());
    let abs_out = PatchValue::NewNode { node: 0, output: 0 };
    p.redirect_uses(x, vec![relu_use, neg_use], abs_out);
    let before = g.node_count();
    let e = g.apply(p).unwrap_err().to_string();
    assert!(e.contains("cycle") && e.contains("relu"), "{e}");
    assert_eq!(g.node_count(), before);
    g.validate().expect("unchanged");

    // The same through a full rewire.
    let mut p = Patch::new();
    let n = p.add_node(
        Node::new("Abs"),
        vec![Some(PatchValue::Existing(a))],
        vec!["abs".into()],
    );
    p.replace(x, PatchValue::NewNode { node: n, output: 0 });
    let e = g.apply(p).unwrap_err().to_string();
    assert!(e.contains("cycle"), "{e}");
}

#[test]
fn redirect_of_a_use_that_does_not_exist_is_rejected() {
    let (mut g, x) = two_consumers();
    let relu = g
        .nodes()
        .find(|(id, n)| n.op_type == "Relu" && id.0 < 100)
        .unwrap()
        .0;
    let mut p = Patch::new();
    p.insert_on_edge(
        x,
        vec![Use {
            node: relu,
            slot: Slot::Input(3),
        }],
        Node::new("Abs"),
        vec![],
        0,
        "abs".into(),
    );
    let e = g.apply(p).unwrap_err().to_string();
    assert!(e.contains("does not exist"), "{e}");
}

/// A patch of two edits: the first is fine and its search walks the whole
/// chain; the second closes a cycle through nodes the first search already
/// visited, and must still be found (each search has its own marks).
#[test]
fn a_cycle_behind_an_earlier_edit_of_the_same_patch_is_rejected() {
    // x0 -> Identity -> x -> Relu -> r -> Neg -> n -> Abs -> a (output),
    // x -> Sigmoid -> s (output)
    let mut b = GraphBuilder::new();
    let x0 = b.input("x0", DataType::Float, dims(&["2", "3"]));
    let x = b.op("Identity", &[x0], vec![]);
    let r = b.op("Relu", &[x], vec![]);
    let n = b.op("Neg", &[r], vec![]);
    let a = b.op("Abs", &[n], vec![]);
    let s = b.op("Sigmoid", &[x], vec![]);
    b.output(a, "a", DataType::Float, Some(dims(&["2", "3"])));
    b.output(s, "s", DataType::Float, Some(dims(&["2", "3"])));
    let mut g = b.into_graph();
    let before = g.node_count();
    let mut p = Patch::new();
    // Readers of x read Exp(x) instead: computed from Identity, which no
    // reader reaches; the search walks Relu, Neg, Abs and Sigmoid.
    let e = p.add_node(
        Node::new("Exp"),
        vec![Some(PatchValue::Existing(x))],
        vec!["e".into()],
    );
    p.replace(x, PatchValue::NewNode { node: e, output: 0 });
    // Neg reads Tanh(a) instead of r: a is computed from Neg itself.
    let t = p.add_node(
        Node::new("Tanh"),
        vec![Some(PatchValue::Existing(a))],
        vec!["t".into()],
    );
    p.redirect_uses(
        r,
        vec![reader_of(&g, r, "Neg")],
        PatchValue::NewNode { node: t, output: 0 },
    );
    let err = g.apply(p).unwrap_err().to_string();
    assert!(err.contains("cycle"), "{err}");
    assert_eq!(g.node_count(), before);
    g.validate().expect("unchanged");
}
