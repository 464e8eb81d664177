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

/// The size mutations do what their names say: an inserted sized operator
/// is wired in (read by a node or a graph output) and reads constants of
/// its own; external data points outside the model's folder; every kind
/// leaves a message that still decodes.
#[test]
fn size_mutations_insert_wired_operators_and_point_outside() {
    use infopt_fuzz::{rng::Rng, sizes};
    use prost::Message;
    let corpus = corpus();
    let seed = corpus
        .iter()
        .find(|s| s.name == "cnn_bn_relu.onnx")
        .expect("fixture");
    let mut inserted_ops = std::collections::BTreeSet::new();
    for i in 0..200 {
        let mut rng = Rng::for_case(11, i);
        let mut m = seed.proto.clone();
        let g = m.graph.as_mut().unwrap();
        assert_eq!(sizes::mutate(g, &mut rng, 1), "inserted sized op");
        let node = g
            .node
            .iter()
            .find(|n| {
                n.name
                    .as_deref()
                    .is_some_and(|x| x.starts_with("fuzz_sized_"))
            })
            .expect("inserted");
        inserted_ops.insert(node.op_type.clone().unwrap());
        let y = &node.output[0];
        let read = g.node.iter().any(|n| n.input.contains(y))
            || g.output.iter().any(|o| o.name.as_ref() == Some(y));
        assert!(read, "case {i}: {y} is read by nothing");
        for input in node.input.iter().filter(|n| n.starts_with("fuzz_sized_")) {
            assert!(
                g.initializer.iter().any(|t| t.name.as_ref() == Some(input)),
                "case {i}: {input}"
            );
        }
        let mut m2 = seed.proto.clone();
        let g2 = m2.graph.as_mut().unwrap();
        assert_eq!(sizes::mutate(g2, &mut rng, 5), "external data");
        let external: Vec<&str> = g2
            .initializer
            .iter()
            .flat_map(|t| &t.external_data)
            .filter(|e| e.key.as_deref() == Some("location"))
            .filter_map(|e| e.value.as_deref())
            .collect();
        assert_eq!(external.len(), 1, "case {i}");
        for kind in 0..7 {
            let mut m3 = seed.proto.clone();
            sizes::mutate(m3.graph.as_mut().unwrap(), &mut rng, kind);
            let bytes = m3.encode_to_vec();
            assert!(infopt_ir::proto::ModelProto::decode(bytes.as_slice()).is_ok());
        }
    }
    // Every operator the module inserts turns up in 200 cases.
    assert_eq!(inserted_ops.len(), 15, "{inserted_ops:?}");
}
