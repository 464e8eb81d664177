//! Candidates judged together, as one union run once per sample, get the
//! figures each gets judged alone, and the union computes their shared
//! prefix once.

use std::path::Path;

use infopt_ir::union::{UnionBuilder, union_of};
use infopt_runtime::InputShapes;
use infopt_verify::evaluate::{self, Pair, Reference};
use infopt_verify::{BackendKind, BackendOptions, ChosenBackend};

mod common;
use common::{Samples, W, classifier};

fn perturbed(scale: f32) -> [f32; 12] {
    let mut w = W;
    for (i, v) in w.iter_mut().enumerate() {
        *v += scale * ((i as f32) * 1.3).sin();
    }
    w
}

#[test]
fn candidates_judged_together_get_the_figures_each_gets_alone() {
    let chosen = ChosenBackend::build(BackendKind::Tract, &BackendOptions::default()).unwrap();
    let shapes = InputShapes::default();
    let original = classifier(&W, true);
    let (a, b) = (
        classifier(&perturbed(0.08), true),
        classifier(&perturbed(-0.05), true),
    );
    // The same model twice: its outputs are the same values in the union.
    let candidates = [&a, &b, &a];
    let heads = evaluate::Heads::classifiers(vec!["probs".to_string()]);
    let p = Pair {
        chosen: &chosen,
        original: &original,
        candidate: &original,
        dir: Path::new("."),
        shapes: &shapes,
    };
    let reference = Reference::collect(&p, &mut Samples::new(12), 0, 12, usize::MAX).unwrap();
    let union = union_of(&candidates).unwrap();
    // The Relu is shared; MatMul, Add and Softmax are each candidate's
    // (their weights differ), and the repeated candidate adds nothing but
    // an Identity per output (ONNX names each graph output once).
    assert_eq!(union.models, 3);
    assert_eq!(union.outputs_each, 2);
    assert_eq!(union.nodes, 1 + 3 + 3 + 2);
    assert_eq!(union.nodes_apart, 12);
    let together = evaluate::held_out_together(
        &chosen,
        &union,
        Path::new("."),
        &shapes,
        &reference,
        12,
        &heads,
    )
    .unwrap();
    assert_eq!(together.len(), 3);
    assert_eq!(together[0].loads, 1, "one session for the three");
    assert_eq!(together[1].loads + together[2].loads, 0);
    for (candidate, judged) in candidates.iter().zip(&together) {
        let alone = evaluate::held_out_against(
            &chosen,
            candidate,
            Path::new("."),
            &shapes,
            &reference,
            12,
            &heads,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(&judged.held_out).unwrap(),
            serde_json::to_value(&alone.held_out).unwrap()
        );
        assert_eq!(judged.runs, 12);
    }
    // The candidates really differ from the original and each other.
    let cosine = |j: &evaluate::Judged| j.held_out.outputs[1].cosine;
    assert!(cosine(&together[0]) < 0.99999 && cosine(&together[0]) != cosine(&together[1]));
}

#[test]
fn a_union_counts_what_a_model_would_add_before_it_joins() {
    let (a, b) = (
        classifier(&perturbed(0.08), true),
        classifier(&perturbed(-0.05), true),
    );
    let mut union = UnionBuilder::new(&a).unwrap();
    assert_eq!(union.nodes(), 4);
    assert_eq!(union.nodes_added_by(&a), Some(0));
    assert_eq!(union.nodes_added_by(&b), Some(3));
    assert_eq!(union.nodes(), 4, "counting changes nothing");
    assert!(union.add(&b));
    assert_eq!((union.nodes(), union.models()), (7, 2));
}
