//! `infopt build-engine MODEL --matrix`: the engines of a release as a CI matrix, each
//! entry with the command that builds it and an artifact name keyed by what decides the
//! engine.

mod common;

use std::path::Path;

use common::*;

fn matrix(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["build-engine"];
    all.extend(args);
    all.push("--matrix");
    let o = infopt(&all);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    // One line: `echo "matrix=$(infopt ... --matrix)" >> $GITHUB_OUTPUT` needs it.
    assert_eq!(text.lines().count(), 1, "{text}");
    serde_json::from_str(&text).unwrap()
}

fn entries(m: &serde_json::Value) -> &Vec<serde_json::Value> {
    m["include"].as_array().unwrap()
}

#[test]
fn the_default_matrix_is_every_compute_capability_tensorrt_rtx_targets() {
    let model = fixture("gpt2_mlp.onnx");
    let m = matrix(&[s(&model), "--fp16", "--workspace", "1G"]);
    let e = entries(&m);
    let names: Vec<&str> = e.iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "rtx1.7-sm80-fp16",
            "rtx1.7-sm86-fp16",
            "rtx1.7-sm89-fp16",
            "rtx1.7-sm120-fp16",
            "rtx1.7-sm121-fp16"
        ]
    );
    let first = &e[0];
    let key = first["key"].as_str().unwrap();
    assert_eq!(key.len(), 64);
    let artifact = model
        .with_file_name(format!("gpt2_mlp-rtx1.7-sm80-fp16-{}.engine", &key[..12]))
        .display()
        .to_string();
    assert_eq!(first["artifact"], artifact.as_str());
    assert_eq!(
        first["command"],
        format!(
            "infopt build-engine {} --workspace 1G --fp16 --trt-flavor rtx --compute-capability 80 -o {artifact}",
            model.display()
        )
    );
    assert_eq!(first["flavor"], "rtx");
    assert_eq!(first["trt_version"], "1.7");
    assert_eq!(first["compute_capability"], 80);
    assert_eq!(first["needs_gpu"], false);
    // Keys differ per entry and do not change between runs.
    let mut keys: Vec<&str> = e.iter().map(|x| x["key"].as_str().unwrap()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), e.len());
    assert_eq!(
        matrix(&[s(&model), "--fp16", "--workspace", "1G"]),
        m,
        "the plan is not deterministic"
    );
    // Another job option is another engine.
    let other = matrix(&[s(&model), "--fp16", "--workspace", "2G"]);
    assert_ne!(entries(&other)[0]["key"], first["key"]);
}

#[test]
fn int8_entries_carry_the_ranges_and_their_content_is_in_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let model = fixture("cnn_bn_relu.onnx");
    let ranges = dir.path().join("ranges.json");
    let calibrate = |data: &str| {
        let o = infopt(&["calibrate", s(&model), "--data", data, "-o", s(&ranges)]);
        assert!(o.status.success(), "{}", stderr(&o));
    };
    calibrate("random:3");
    let args = [
        s(&model),
        "--precisions",
        "fp16,int8",
        "--ranges",
        s(&ranges),
        "--compute-capability",
        "86",
        "--trt-flavor",
        "rtx,trt11",
        "--input-shape",
        "input:1x3x32x32",
    ];
    let m = matrix(&args);
    let e = entries(&m);
    let names: Vec<&str> = e.iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "rtx1.7-sm86-fp16",
            "rtx1.7-sm86-int8",
            "trt11-sm86-fp16",
            "trt11-sm86-int8"
        ]
    );
    for x in e {
        let cmd = x["command"].as_str().unwrap();
        let int8 = x["precision"] == "int8";
        assert_eq!(cmd.contains("--ranges"), int8, "{cmd}");
        assert_eq!(cmd.contains(" --int8 "), int8, "{cmd}");
        // TensorRT 11 builds for the GPU it runs on: no --compute-capability.
        let rtx = x["flavor"] == "rtx";
        assert_eq!(cmd.contains("--compute-capability 86"), rtx, "{cmd}");
        assert_eq!(x["needs_gpu"], !rtx);
    }
    // New ranges: new int8 engines, the same float ones.
    calibrate("random:4");
    let again = matrix(&args);
    for (a, b) in e.iter().zip(entries(&again)) {
        assert_eq!(a["key"] == b["key"], a["precision"] == "fp16", "{a} {b}");
    }
}

#[test]
fn a_matrix_that_cannot_be_built_is_refused_with_the_fix() {
    let model = fixture("gpt2_mlp.onnx");
    let err = |args: &[&str]| {
        let mut all = vec!["build-engine", s(&model), "--matrix"];
        all.extend(args);
        let o = infopt(&all);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(o.stdout.is_empty());
        stderr(&o).trim_end().to_string()
    };
    assert_eq!(
        err(&["--trt-flavor", "trt11"]),
        "error: TensorRT 11 builds for the GPU it runs on: give --compute-capability SM,SM (the GPUs your build machines have)"
    );
    assert_eq!(
        err(&["--precisions", "int8"]),
        "error: the int8 engines need ranges: give --ranges ranges.json (from infopt calibrate --merge) or --calib-data PATH"
    );
    assert_eq!(
        err(&["--precisions", "fp8"]),
        "error: --precisions: `fp8` is not one of fp32, fp16, bf16, int8"
    );
    assert_eq!(
        err(&["--compute-capability", "75"]),
        "error: --compute-capability 75 is not supported by TensorRT-RTX 1.7.0; supported: 80, 86, 89, 120, 121"
    );
}

/// With TensorRT-RTX installed, an entry's command builds the engine it names.
#[test]
fn an_entry_command_builds_its_artifact() {
    let lib = std::env::var_os("TENSORRT_RTX_LIB")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/lib");
            std::fs::read_dir(venv).ok()?.flatten().find_map(|e| {
                let d = e.path().join("site-packages/tensorrt_rtx_libs");
                d.join("libtensorrt_rtx.so.1").is_file().then_some(d)
            })
        });
    let Some(lib) = lib else {
        assert!(
            std::env::var_os("INFOPT_REQUIRE_TRT_RTX").is_none(),
            "INFOPT_REQUIRE_TRT_RTX is set but TensorRT-RTX was not found"
        );
        eprintln!("skipping: TensorRT-RTX not installed");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    std::fs::copy(fixture("cnn_bn_relu.onnx"), &model).unwrap();
    let m = matrix(&[
        s(&model),
        "--fp16",
        "--input-shape",
        "input:1x3x32x32",
        "--compute-capability",
        "86",
        "--no-verify",
        "--runs",
        "0",
    ]);
    let entry = &entries(&m)[0];
    let words: Vec<&str> = entry["command"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(&words[..2], ["infopt", "build-engine"]);
    let o = common::infopt_command()
        .args(&words[1..])
        .env("TENSORRT_RTX_LIB", &lib)
        .env_remove("INFOPT_TRT_SHIM")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let artifact = Path::new(entry["artifact"].as_str().unwrap());
    assert!(artifact.is_file(), "{} was not written", artifact.display());
}
