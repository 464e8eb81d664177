//! Job files: the pipeline's keys are read by infopt-passes, the job's
//! sections (`verify:`, `gates:`) here; one file, one format. (Moved from
//! passes/tests/config.rs with their assertions when the sections left
//! `passes`.)

use infopt_ops::job_file::JobFile;

fn parse(yaml: &str) -> Result<JobFile, String> {
    JobFile::from_yaml(yaml, "test.yaml").map_err(|e| e.to_string())
}

#[test]
fn verification_is_on_by_default() {
    let cfg = parse("version: 1\ntarget: onnxruntime\npasses:\n  - eliminate-dead\n").unwrap();
    assert!(cfg.verify.enabled);
}

#[test]
fn strict_booleans_in_the_verify_section() {
    // YAML 1.1 "yes" is not a boolean under strict booleans.
    let err = parse("version: 1\npasses: [eliminate-dead]\nverify: {enabled: yes}\n").unwrap_err();
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn unknown_verify_key_is_an_error_with_location() {
    let err = parse("version: 1\npasses: [eliminate-dead]\nverify:\n  rtoll: 0.1\n").unwrap_err();
    assert!(err.contains("rtoll") && err.contains("line 4"), "{err}");
    assert!(err.contains("did you mean `rtol`?"), "{err}");
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
