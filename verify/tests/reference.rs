//! Judging candidates against a kept reference (the original run once on
//! the judged samples) gives the figures of running both models on every
//! sample, and the memory budget only moves where the samples come from.

use std::path::Path;

use infopt_ir::Model;
use infopt_runtime::InputShapes;
use infopt_verify::evaluate::{self, Pair, Reference};
use infopt_verify::{BackendKind, BackendOptions, ChosenBackend};

mod common;
use common::{Samples, W, classifier};

fn tract() -> ChosenBackend {
    ChosenBackend::build(BackendKind::Tract, &BackendOptions::default()).unwrap()
}

fn pair<'a>(
    chosen: &'a ChosenBackend,
    original: &'a Model,
    candidate: &'a Model,
    shapes: &'a InputShapes,
) -> Pair<'a> {
    Pair {
        chosen,
        original,
        candidate,
        dir: Path::new("."),
        shapes,
    }
}

/// The figures a judgement reports, as JSON (every field compared).
fn figures(h: &evaluate::HeldOut) -> serde_json::Value {
    serde_json::to_value(h).unwrap()
}

#[test]
fn a_candidate_judged_against_the_kept_reference_gets_the_figures_of_running_both() {
    let chosen = tract();
    let shapes = InputShapes::default();
    let original = classifier(&W, false);
    let mut perturbed = W;
    for (i, w) in perturbed.iter_mut().enumerate() {
        *w += 0.08 * ((i as f32) * 1.3).sin();
    }
    let candidate = classifier(&perturbed, false);
    let classifiers = evaluate::Heads::classifiers(vec!["probs".to_string()]);
    let p = pair(&chosen, &original, &candidate, &shapes);
    // 3 samples skipped (the calibration ones), 9 judged.
    let streamed = evaluate::held_out(&p, &mut Samples::new(12), 3, 20, &classifiers).unwrap();
    let reference = Reference::collect(&p, &mut Samples::new(12), 3, 20, usize::MAX).unwrap();
    assert_eq!(reference.len(), 9);
    assert_eq!(reference.skipped, 3);
    assert!(reference.covers(20), "the data ended: every sample is kept");
    let kept = evaluate::held_out_against(
        &chosen,
        &candidate,
        Path::new("."),
        &shapes,
        &reference,
        20,
        &classifiers,
    )
    .unwrap();
    assert_eq!(figures(&kept.held_out), figures(&streamed));
    assert_eq!(kept.runs, 9);
    assert_eq!(kept.loads, 1, "one session of the candidate");
    // The candidate really differs: the figures are not trivially equal.
    let cosine = streamed.outputs[1].cosine;
    assert!(cosine < 0.99999 && cosine > 0.5, "{cosine}");
    // The first 4 samples only, as a probe.
    let streamed4 = evaluate::held_out(&p, &mut Samples::new(12), 3, 4, &classifiers).unwrap();
    let kept4 = evaluate::held_out_against(
        &chosen,
        &candidate,
        Path::new("."),
        &shapes,
        &reference,
        4,
        &classifiers,
    )
    .unwrap();
    assert_eq!(kept4.held_out.samples, 4);
    assert_eq!(figures(&kept4.held_out), figures(&streamed4));
}

#[test]
fn the_memory_budget_keeps_a_prefix_and_says_what_it_covers() {
    let chosen = tract();
    let shapes = InputShapes::default();
    let original = classifier(&W, false);
    let p = pair(&chosen, &original, &original, &shapes);
    // Each sample takes 16 bytes of input and 24 of outputs: 100 bytes keep 2.
    let r = Reference::collect(&p, &mut Samples::new(10), 0, 8, 100).unwrap();
    assert_eq!(r.len(), 2);
    assert!(r.covers(2));
    assert!(!r.covers(3), "the third sample was left out for memory");
    // A budget of nothing still keeps the first sample.
    let r = Reference::collect(&p, &mut Samples::new(10), 0, 8, 0).unwrap();
    assert_eq!(r.len(), 1);
    // No sample after the skipped ones: an empty reference.
    let r = Reference::collect(&p, &mut Samples::new(3), 3, 8, usize::MAX).unwrap();
    assert!(r.is_empty());
    assert_eq!(r.skipped, 3);
}

#[test]
fn samples_shared_among_sessions_give_the_figures_and_outputs_of_one_session() {
    let chosen = tract();
    let shapes = InputShapes::default();
    let original = classifier(&W, false);
    let mut perturbed = W;
    for (i, w) in perturbed.iter_mut().enumerate() {
        *w -= 0.05 * ((i as f32) * 0.7).cos();
    }
    let candidate = classifier(&perturbed, false);
    let classifiers = evaluate::Heads::classifiers(vec!["probs".to_string()]);
    let p = pair(&chosen, &original, &candidate, &shapes);
    let reference = Reference::collect(&p, &mut Samples::new(40), 0, 40, usize::MAX).unwrap();
    let judge = |sessions: usize, limit: usize| {
        evaluate::held_out_against_side_by_side(
            &chosen,
            sessions,
            &candidate,
            Path::new("."),
            &shapes,
            &reference,
            limit,
            &classifiers,
            true,
        )
        .unwrap()
    };
    let one = judge(1, 40);
    assert_eq!(one.loads, 1);
    for (sessions, limit) in [(2, 40), (3, 40), (4, 7), (8, 3)] {
        let shared = judge(sessions, limit);
        let alone = judge(1, limit);
        assert_eq!(
            figures(&shared.held_out),
            figures(&alone.held_out),
            "{sessions} sessions, {limit} samples"
        );
        assert_eq!(shared.runs, limit);
        // Outputs kept in sample order, for a caller's metric.
        assert_eq!(shared.outputs.len(), limit);
        for (a, b) in shared.outputs.iter().zip(&alone.outputs) {
            assert_eq!(a[0].as_slice::<f32>(), b[0].as_slice::<f32>());
        }
        // One session per worker that got a sample, never more than samples.
        assert!(
            shared.loads >= 1 && shared.loads <= sessions.min(limit),
            "{} loads",
            shared.loads
        );
    }
    // The outputs differ between samples: order is really checked.
    assert_ne!(
        one.outputs[0][0].as_slice::<f32>(),
        one.outputs[1][0].as_slice::<f32>()
    );
}

#[test]
fn the_original_run_side_by_side_keeps_the_reference_of_one_session() {
    let chosen = tract();
    let shapes = InputShapes::default();
    let original = classifier(&W, false);
    let mut perturbed = W;
    perturbed[3] += 0.2;
    let candidate = classifier(&perturbed, false);
    let classifiers = evaluate::Heads::classifiers(vec!["probs".to_string()]);
    let p = pair(&chosen, &original, &original, &shapes);
    let judged = |r: &Reference| {
        evaluate::held_out_against(
            &chosen,
            &candidate,
            Path::new("."),
            &shapes,
            r,
            50,
            &classifiers,
        )
        .unwrap()
    };
    // (skip, limit, budget): every sample; a limit; a budget that keeps 2
    // (16 bytes of input and 24 of outputs a sample).
    for (skip, limit, budget) in [(3, 50, usize::MAX), (0, 5, usize::MAX), (2, 50, 100)] {
        let one = Reference::collect(&p, &mut Samples::new(12), skip, limit, budget).unwrap();
        let shared = Reference::collect_side_by_side(
            &p,
            &mut Samples::new(12),
            (skip, limit, budget),
            &chosen,
            3,
        )
        .unwrap();
        assert_eq!(shared.len(), one.len(), "{skip} {limit} {budget}");
        assert_eq!(shared.skipped, one.skipped);
        for l in 1..=one.len() + 1 {
            assert_eq!(shared.covers(l), one.covers(l), "covers({l})");
        }
        for (a, b) in shared.expected(50).iter().zip(one.expected(50)) {
            assert_eq!(a[0].as_slice::<f32>(), b[0].as_slice::<f32>());
        }
        assert_eq!(
            figures(&judged(&shared).held_out),
            figures(&judged(&one).held_out)
        );
    }
}
