//! Lossless load/save on every fixture model.

use std::path::{Path, PathBuf};

use infopt_ir::{ExternalDataPolicy, Model, SaveOptions};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/models")
}

fn fixture_models() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![fixtures_dir()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("fixtures folder") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "onnx") {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(
        out.len() >= 10,
        "expected the committed fixtures, found {out:?}"
    );
    out
}

fn uses_external_data(m: &Model) -> bool {
    m.graph.initializers().any(|(_, t)| t.external.is_some())
}

#[test]
fn every_fixture_round_trips_byte_identically() {
    let tmp = tempfile::tempdir().unwrap();
    for path in fixture_models() {
        let name = path.file_name().unwrap();
        let mut model = Model::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        model
            .graph
            .validate()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let first_dir = tmp.path().join("a");
        let second_dir = tmp.path().join("b");
        std::fs::create_dir_all(&first_dir).unwrap();
        std::fs::create_dir_all(&second_dir).unwrap();
        let first = first_dir.join(name);
        model.save(&first, &SaveOptions::default()).unwrap();
        let original = std::fs::read(&path).unwrap();
        let saved = std::fs::read(&first).unwrap();
        if !uses_external_data(&model) {
            // Our encoder writes fields in tag order, as protobuf does, so a
            // model written by the onnx package comes back byte for byte.
            assert!(
                original == saved,
                "{}: load+save changed the bytes",
                path.display()
            );
        }
        // Re-saving what we wrote is deterministic.
        let mut again = Model::load(&first).unwrap();
        let second = second_dir.join(name);
        again.save(&second, &SaveOptions::default()).unwrap();
        assert_eq!(
            saved,
            std::fs::read(&second).unwrap(),
            "{}: second save differs",
            path.display()
        );
        // Same function: the inline protos agree.
        assert_eq!(
            model.to_proto().unwrap(),
            again.to_proto().unwrap(),
            "{}",
            path.display()
        );
    }
}

#[test]
fn external_data_stays_external_and_matches() {
    let src = fixtures_dir().join("external_data.onnx");
    let mut model = Model::load(&src).unwrap();
    let n_external = model
        .graph
        .initializers()
        .filter(|(_, t)| t.external.is_some())
        .count();
    assert!(n_external >= 2);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("m.onnx");
    let summary = model.save(&out, &SaveOptions::default()).unwrap();
    assert_eq!(summary.external_tensors, n_external);
    assert!(tmp.path().join("m.onnx.data").exists());
    let reloaded = Model::load(&out).unwrap();
    for ((_, a), (_, b)) in model
        .graph
        .initializers()
        .zip(reloaded.graph.initializers())
    {
        assert_eq!(a.raw_bytes().unwrap(), b.raw_bytes().unwrap());
    }
    assert_eq!(model.to_proto().unwrap(), reloaded.to_proto().unwrap());

    // Inline: one file, same content.
    let inline = tmp.path().join("inline.onnx");
    let mut m2 = Model::load(&src).unwrap();
    let s = m2
        .save(
            &inline,
            &SaveOptions {
                external: ExternalDataPolicy::Inline,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(s.external_file.is_none());
    assert_eq!(
        Model::load(&inline).unwrap().to_proto().unwrap(),
        model.to_proto().unwrap()
    );
}

#[test]
fn threshold_moves_large_tensors_out() {
    let src = fixtures_dir().join("cnn_bn_relu.onnx");
    let mut model = Model::load(&src).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cnn.onnx");
    let opts = SaveOptions {
        external: ExternalDataPolicy::Threshold(256),
        ..Default::default()
    };
    let s = model.save(&out, &opts).unwrap();
    let big = model
        .graph
        .initializers()
        .filter(|(_, t)| t.payload_bytes() >= 256)
        .count();
    assert_eq!(s.external_tensors, big);
    assert!(big > 0);
    let reloaded = Model::load(&out).unwrap();
    assert_eq!(reloaded.to_proto().unwrap(), model.to_proto().unwrap());
}

#[test]
fn too_large_for_protobuf_switches_to_external_data() {
    let src = fixtures_dir().join("cnn_bn_relu.onnx");
    let mut model = Model::load(&src).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("big.onnx");
    let opts = SaveOptions {
        size_limit: 8000,
        ..Default::default()
    };
    let s = model.save(&out, &opts).unwrap();
    assert!(s.external_tensors > 0 && s.model_bytes <= 8000, "{s:?}");
    // With inline forced, the same limit is an error that says what to do.
    let opts = SaveOptions {
        size_limit: 8000,
        external: ExternalDataPolicy::Inline,
        ..Default::default()
    };
    let err = model
        .save(&tmp.path().join("x.onnx"), &opts)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("over protobuf's 2 GiB limit") && err.contains("--external-data"),
        "{err}"
    );
}

#[test]
fn refuses_to_overwrite_its_input() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("m.onnx");
    std::fs::copy(fixtures_dir().join("if_subgraph.onnx"), &path).unwrap();
    let before = std::fs::read(&path).unwrap();
    let mut model = Model::load(&path).unwrap();
    let err = model
        .save(&path, &SaveOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("refusing to overwrite the input file"),
        "{err}"
    );
    assert_eq!(before, std::fs::read(&path).unwrap());
}

#[cfg(unix)]
#[test]
fn symlink_out_of_the_model_folder_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let model_dir = tmp.path().join("model");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&model_dir).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let src = fixtures_dir();
    std::fs::copy(
        src.join("external_data.onnx"),
        model_dir.join("external_data.onnx"),
    )
    .unwrap();
    std::fs::copy(
        src.join("external_data.bin"),
        outside.join("external_data.bin"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        outside.join("external_data.bin"),
        model_dir.join("external_data.bin"),
    )
    .unwrap();
    let err = Model::load(&model_dir.join("external_data.onnx"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("outside the model's folder (through a symlink)"),
        "{err}"
    );
}

/// Two nodes a rewrite gave one name (ONNX Runtime refuses such a graph):
/// the saved model keeps the first name and suffixes the repeat.
#[test]
fn repeated_node_names_are_made_unique_on_save() {
    use infopt_ir::DataType;
    use infopt_ir::builder::{GraphBuilder, dims};
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2"]));
    let a = b.op("Relu", &[x], vec![]);
    let c = b.op("Relu", &[a], vec![]);
    let d = b.op("Relu", &[c], vec![]);
    b.output(d, "y", DataType::Float, Some(dims(&["2"])));
    let mut m = b.build(17);
    let ids: Vec<_> = m.graph.node_ids();
    for (i, &n) in ids.iter().enumerate() {
        let name = if i < 2 { "dup" } else { "dup_1" };
        m.graph.node_mut(n).name = Some(name.to_string());
    }
    let bytes = m.to_bytes().unwrap();
    let saved =
        infopt_ir::load::model_from_bytes(bytes.into(), Path::new("."), Path::new("dup.onnx"))
            .unwrap();
    let names: Vec<String> = saved
        .graph
        .node_ids()
        .iter()
        .map(|&n| saved.graph.node(n).name.clone().unwrap_or_default())
        .collect();
    assert_eq!(names, ["dup", "dup_2", "dup_1"]);
}
