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
    assert!(cfg.verify.enabled);
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
    // YAML 1.1 "yes" is not a boolean under strict booleans.
    let err = parse("version: 1\npasses: [eliminate-dead]\nverify: {enabled: yes}\n").unwrap_err();
    assert!(err.contains("line 3"), "{err}");
    let err = parse("version: 2\npasses: [eliminate-dead]\n").unwrap_err();
    assert!(err.contains("pipeline version 2 is not supported"), "{err}");
}

#[test]
fn gates_parse_in_all_forms() {
    let cfg = parse(
        "version: 1\npasses: [eliminate-dead]\ngates:\n  min_cosine: 0.999\n  max_abs: { logits: 1.0e-3, \"*\": 0.01 }\n  min_topk_agreement: { min: 0.99, k: 5, output: logits }\n  max_latency_ratio: 1.05\n  max_file_size: 10M\n  max_nodes: 500\n  forbid_ops: [com.microsoft, Loop]\n  max_opset: 17\n",
    )
    .unwrap();
    let g = &cfg.gates;
    assert_eq!(g.min_cosine.for_output("y"), Some(0.999));
    assert_eq!(g.max_abs.for_output("logits"), Some(1e-3));
    assert_eq!(g.max_abs.for_output("other"), Some(0.01));
    let t = g.min_topk_agreement.as_ref().unwrap();
    assert_eq!((t.min, t.k, t.output.as_deref()), (0.99, 5, Some("logits")));
    let l = g.max_latency_ratio.as_ref().unwrap();
    assert_eq!((l.max, l.quantile), (1.05, 0.5));
    assert_eq!(g.max_file_size.as_ref().unwrap().0, "10M");
    assert_eq!(g.max_nodes, Some(500));
    assert_eq!(g.forbid_ops, vec!["com.microsoft", "Loop"]);
    assert_eq!(g.max_opset, Some(17));
    let cfg = parse("version: 1\npasses: [eliminate-dead]\ngates: { min_topk_agreement: 0.9, max_file_size: 1024, max_latency_ratio: { max: 1.1, quantile: 0.1 } }\n").unwrap();
    let l = cfg.gates.max_latency_ratio.as_ref().unwrap();
    assert_eq!((l.max, l.quantile), (1.1, 0.1));
    assert_eq!(cfg.gates.min_topk_agreement.unwrap().k, 1);
    assert_eq!(cfg.gates.max_file_size.unwrap().0, "1024");
    assert!(
        parse("version: 1\npasses: [eliminate-dead]\n")
            .unwrap()
            .gates
            .is_empty()
    );
}

#[test]
fn unknown_gate_key_is_an_error_with_location() {
    let err =
        parse("version: 1\npasses: [eliminate-dead]\ngates:\n  min_cosin: 0.9\n").unwrap_err();
    assert!(err.contains("min_cosin") && err.contains("line 4"), "{err}");
    assert!(err.contains("did you mean `min_cosine`?"), "{err}");
    let err = parse(
        "version: 1\npasses: [eliminate-dead]\ngates:\n  min_topk_agreement: { min: 0.9, k: 0 }\n",
    )
    .unwrap_err();
    assert!(err.contains("k must be at least 1"), "{err}");
}
