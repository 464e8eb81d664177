//! A bounded fuzz run inside `cargo test`: mutated fixture models through
//! load → default pipeline → save, no panic, no hang, every error one line.
//! The long run is `cargo run --release -p infopt-fuzz -- --cases 1000000`.

use std::time::Duration;

use infopt_fuzz::{FuzzConfig, corpus, corpus_from, fuzz, make_case};

#[test]
fn bounded_run_finds_no_panic_hang_or_multi_line_error() {
    let report = fuzz(FuzzConfig {
        seed: 7,
        cases: 3000,
        time_budget: Duration::from_secs(60),
        case_limit: Duration::from_secs(20),
        threads: 2,
        max_hangs: 1,
        trace: None,
        corpus_dirs: Vec::new(),
    });
    eprintln!("{}", report.summary());
    let findings: Vec<String> = report
        .panics
        .iter()
        .chain(&report.hangs)
        .chain(&report.multi_line)
        .map(|f| {
            format!(
                "case {} ({} {:?}): {}",
                f.case, f.model, f.mutations, f.what
            )
        })
        .collect();
    assert!(findings.is_empty(), "{findings:#?}");
    assert!(report.cases >= 200, "{}", report.summary());
    // The mutations are neither all fatal nor all harmless.
    assert!(
        report.saved > 0 && report.rejected > 0,
        "{}",
        report.summary()
    );
}

/// Cases are reproducible from their number.
#[test]
fn cases_are_deterministic() {
    let corpus = corpus();
    for i in [0, 1, 99] {
        assert_eq!(make_case(&corpus, 3, i), make_case(&corpus, 3, i));
    }
    assert_ne!(make_case(&corpus, 3, 1).2, make_case(&corpus, 3, 2).2);
}

/// `--corpus DIR` seeds: the folder's models, in name order; a folder
/// without models or with a file that is not one is an error naming it.
#[test]
fn corpus_folders_seed_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = infopt_fuzz::repo_root().join("fixtures/models");
    for name in ["cnn_bn_relu.onnx", "transformer_block.onnx"] {
        std::fs::copy(fixtures.join(name), dir.path().join(name)).unwrap();
    }
    let seeds = corpus_from(&[dir.path().to_path_buf()]).unwrap();
    let names: Vec<&str> = seeds.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["cnn_bn_relu.onnx", "transformer_block.onnx"]);
    std::fs::write(dir.path().join("junk.onnx"), b"\xff\xff not a model").unwrap();
    let e = corpus_from(&[dir.path().to_path_buf()]).err().unwrap();
    assert!(
        e.contains("junk.onnx") && e.contains("not an ONNX model"),
        "{e}"
    );
    let empty = tempfile::tempdir().unwrap();
    let e = corpus_from(&[empty.path().to_path_buf()]).err().unwrap();
    assert!(e.contains("no .onnx file"), "{e}");
}
