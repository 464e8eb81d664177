//! `infopt inspect` facts on the fixtures.

use std::path::Path;
use std::process::Command;

fn inspect_json(model: &str) -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/models")
        .join(model);
    let out = Command::new(env!("CARGO_BIN_EXE_infopt"))
        .args(["inspect", "--json"])
        .arg(&path)
        .output()
        .expect("run infopt");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

#[test]
fn cnn_histogram_and_io() {
    let j = inspect_json("cnn_bn_relu.onnx");
    assert_eq!(j["schema_version"], 1);
    assert_eq!(j["inputs"][0]["name"], "input");
    assert_eq!(
        j["inputs"][0]["shape"],
        serde_json::json!(["batch", 3, 32, 32])
    );
    assert_eq!(j["outputs"][0]["name"], "logits");
    let ops = j["ops"].as_object().unwrap();
    assert_eq!(ops["Conv"], 4);
    assert_eq!(ops["BatchNormalization"], 4);
    assert_eq!(
        j["nodes"],
        ops.values().map(|v| v.as_u64().unwrap()).sum::<u64>()
    );
    assert!(j["parameters"].as_u64().unwrap() > 1000);
}

#[test]
fn subgraphs_counted_separately() {
    let j = inspect_json("if_subgraph.onnx");
    assert_eq!(j["subgraphs"], 2);
    assert!(j["subgraph_nodes"].as_u64().unwrap() >= 2);
    assert_eq!(j["ops"]["If"], 1);
}

#[test]
fn external_data_and_custom_domains() {
    let j = inspect_json("external_data.onnx");
    assert_eq!(
        j["external_data_files"],
        serde_json::json!(["external_data.bin"])
    );
    assert!(j["external_tensors"].as_u64().unwrap() >= 2);
    let j = inspect_json("custom_domain.onnx");
    assert_eq!(j["custom_domains"], serde_json::json!(["com.example"]));
}
