//! Pipeline YAML: valid files parse, mistakes are reported with line, column and a hint.

use infopt_passes::Target;
use infopt_passes::config::{PassConfig, PipelineConfig, Step};

fn parse(yaml: &str) -> Result<PipelineConfig, String> {
    PipelineConfig::from_yaml(yaml, "test.yaml").map_err(|e| e.to_string())
}

#[test]
fn steps_parse_in_all_forms() {
    let cfg = parse(
        "version: 1\ntarget: onnxruntime\npasses:\n  - eliminate-dead\n  - eliminate-identity: {}\n  - fixed-point:\n      max_iterations: 3\n      passes: [eliminate-duplicates, eliminate-dead]\n",
    )
    .unwrap();
    assert_eq!(cfg.target, Target::Onnxruntime);
    let pass = |n: &str| PassConfig::from_name(n).unwrap();
    assert_eq!(cfg.passes[0], Step::Pass(pass("eliminate-dead")));
    assert_eq!(cfg.passes[1], Step::Pass(pass("eliminate-identity")));
    assert_eq!(
        cfg.passes[2],
        Step::FixedPoint {
            max_iterations: 3,
            passes: vec![pass("eliminate-duplicates"), pass("eliminate-dead")]
        }
    );
}

#[test]
fn unknown_pass_has_location_and_suggestion() {
    let err =
        parse("version: 1\npasses:\n  - eliminate-dead\n  - eliminate-idenity\n").unwrap_err();
    assert!(
        err.contains("unknown pass 'eliminate-idenity'; did you mean 'eliminate-identity'?"),
        "{err}"
    );
    assert!(err.contains("line 4"), "{err}");
}

#[test]
fn unknown_key_is_an_error_with_location() {
    let err = parse("version: 1\npasses: [eliminate-dead]\nverfy: {enabled: false}\n").unwrap_err();
    assert!(err.contains("verfy"), "{err}");
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn options_on_a_pass_without_options_are_rejected() {
    let err = parse("version: 1\npasses:\n  - eliminate-dead: {aggressive: true}\n").unwrap_err();
    assert!(err.contains("aggressive"), "{err}");
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn nested_fixed_points_and_zero_budget_are_rejected() {
    let err = parse("version: 1\npasses:\n  - fixed-point: {passes: [{fixed-point: {passes: [eliminate-dead]}}]}\n").unwrap_err();
    assert!(err.contains("cannot be nested"), "{err}");
    let err = parse(
        "version: 1\npasses:\n  - fixed-point: {max_iterations: 0, passes: [eliminate-dead]}\n",
    )
    .unwrap_err();
    assert!(err.contains("max_iterations must be at least 1"), "{err}");
}

#[test]
fn strict_booleans_and_version() {
    // (Strict booleans in the job's `verify:` section: tests/job_file.rs.)
    let err = parse("version: 2\npasses: [eliminate-dead]\n").unwrap_err();
    assert!(err.contains("pipeline version 2 is not supported"), "{err}");
}
