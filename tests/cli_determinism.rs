//! Determinism: `infopt optimize` writes the same bytes whatever the thread counts, the
//! working directory and the output path (the external-data file keeps its own name, so
//! models with external data are written under the same file name in two folders).

mod common;

use std::path::{Path, PathBuf};

use common::{fixture, s};

/// Runs optimize from `cwd` with `threads` for every thread pool we know of.
fn optimize(model: &Path, out: &Path, cwd: &Path, threads: &str) -> Vec<u8> {
    let o = common::infopt_command()
        // Verification does not change the output; skipping it lets models tract
        // cannot run (Loop, custom ops) take part without ONNX Runtime.
        .args(["optimize", s(model), "-o", s(out), "--no-verify"])
        .current_dir(cwd)
        .env("RAYON_NUM_THREADS", threads)
        .env("TRACT_NUM_THREADS", threads)
        .env("OMP_NUM_THREADS", threads)
        .output()
        .expect("run infopt");
    assert!(
        o.status.success(),
        "{}: {}",
        model.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read(out).unwrap()
}

fn data_of(out: &Path) -> Option<Vec<u8>> {
    let mut p = out.as_os_str().to_owned();
    p.push(".data");
    std::fs::read(PathBuf::from(p)).ok()
}

#[test]
fn optimize_output_bytes_do_not_depend_on_threads_cwd_or_output_path() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    for name in [
        "cnn_bn_relu.onnx",
        "transformer_block.onnx",
        "dynamic_reshape.onnx",
        "if_subgraph.onnx",
        "loop_subgraph.onnx",
        "opset11.onnx",
        "ms_domain.onnx",
        "kitchen_sink.onnx",
        "external_data.onnx",
        "exported/bert_tiny.onnx",
        "exported/resnet_block.onnx",
    ] {
        let model = fixture(name);
        let stem = Path::new(name).file_stem().unwrap().to_str().unwrap();
        let external = name.starts_with("external");
        let out1 = a.path().join(format!("{stem}.opt.onnx"));
        // A different folder, and a different file name unless the model has external
        // data (whose file name is recorded inside the model, as it must be).
        let out2 = b.path().join(if external {
            format!("{stem}.opt.onnx")
        } else {
            format!("other-{stem}.onnx")
        });
        let first = optimize(&model, &out1, a.path(), "1");
        let second = optimize(&model, &out2, b.path(), "2");
        assert!(first == second, "{name}: output bytes differ between runs");
        assert_eq!(
            data_of(&out1),
            data_of(&out2),
            "{name}: external data differs"
        );
    }
}
