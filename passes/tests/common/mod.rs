//! Shared helpers for pass tests: run passes, compare op histograms, and check
//! numerical equivalence by running both models in tract.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use infopt_ir::Model;
use infopt_ir::stats::GraphStats;
use infopt_passes::{DriverOptions, Flow, PipelineConfig, PipelineRun, Target, run_pipeline};
use infopt_runtime::compare::{Tolerance, all_within_tolerance, compare_outputs};
use infopt_runtime::inputs::{InputGen, generate_for_model};
use infopt_runtime::{Backend, InputShapes, TractBackend};

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/models")
        .join(rel)
}

pub fn load(rel: &str) -> Model {
    Model::load(&fixture(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Runs the named passes in order with validation after each.
pub fn run_passes(model: &mut Model, names: &[&str]) -> PipelineRun {
    run_passes_for(model, names, Target::Portable)
}

pub fn run_passes_for(model: &mut Model, names: &[&str], target: Target) -> PipelineRun {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let config = PipelineConfig::from_pass_names(&names, target).expect("pass names");
    let options = DriverOptions {
        validate: true,
        ..Default::default()
    };
    run_pipeline(model, &config, &options, &mut |_, _| Ok(Flow::Continue)).expect("pipeline")
}

pub fn ops(model: &Model) -> BTreeMap<String, usize> {
    GraphStats::of_model(model).ops
}

pub fn histogram(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// Runs both models in tract on the same seeded inputs and asserts that every
/// output agrees within `atol + rtol*|b|`.
pub fn assert_equivalent(
    before: &Model,
    after: &Model,
    shapes: &InputShapes,
    atol: f64,
    rtol: f64,
) {
    let dir = before
        .source
        .as_ref()
        .and_then(|s| s.path.as_ref())
        .and_then(|p| p.parent().map(|d| d.to_path_buf()));
    let b = TractBackend
        .load(&before.to_bytes().unwrap(), dir.as_deref(), shapes)
        .expect("original loads in tract");
    let a = TractBackend
        .load(&after.to_bytes().unwrap(), dir.as_deref(), shapes)
        .expect("result loads in tract");
    for seed in [1u64, 2] {
        let mut opts = InputGen::with_seed(seed);
        for spec in b.inputs() {
            // A BERT token-type table has two rows.
            if spec.name.contains("token_type") {
                opts = opts.with_vocab_for(spec.name.clone(), 2);
            }
        }
        let inputs = generate_for_model(b.as_ref(), &opts).unwrap();
        let expected = b.run(&inputs).unwrap();
        let actual = a.run(&inputs).unwrap();
        let agreement = compare_outputs(&actual, &expected, Tolerance { atol, rtol });
        assert!(
            all_within_tolerance(&agreement),
            "outputs differ: {agreement:#?}"
        );
    }
}

pub fn default_shapes() -> InputShapes {
    InputShapes::new().with_default_dim(2)
}

/// Serialized bytes of a model, for "unchanged" checks.
pub fn bytes(model: &Model) -> Vec<u8> {
    model.to_bytes().unwrap()
}
