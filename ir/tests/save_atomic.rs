//! Writing a model and its external data never leaves a mismatched pair: a
//! failure (or a crash) at any step leaves the previous output intact or the
//! new one complete. Temporary files are exclusive and unpredictable; a
//! symlink planted at the output is replaced, not followed.

use std::path::{Path, PathBuf};

use infopt_ir::proto::ModelProto;
use infopt_ir::save::{FailPoint, SaveStep};
use infopt_ir::{Model, SaveOptions, Tensor};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/models/external_data.onnx")
}

/// The fixture with every float initializer scaled by `k` (so versions differ).
fn version(k: f32) -> Model {
    let mut m = Model::load(&fixture()).unwrap();
    let ids: Vec<_> = m.graph.initializers().map(|(v, _)| v).collect();
    for v in ids {
        let t = m.graph.value(v).initializer.clone().unwrap();
        let raw = t.raw_bytes().unwrap();
        let values: Vec<f32> = raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()) * k)
            .collect();
        let mut new = Tensor::from_f32(t.dims().to_vec(), &values);
        new.external = t.external.clone();
        m.graph.value_mut(v).initializer = Some(new);
    }
    m
}

/// What the model at `path` means, with every tensor inline.
fn content(path: &Path) -> ModelProto {
    Model::load(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .to_proto()
        .unwrap()
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A folder holding `out.onnx` (version 1) and its data, written by a save.
fn previous_output() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.onnx");
    let s = version(1.0).save(&out, &SaveOptions::default()).unwrap();
    assert!(s.external_tensors >= 2);
    assert_eq!(listing(tmp.path()), ["out.onnx", "out.onnx.data"]);
    (tmp, out)
}

#[test]
fn a_failure_at_any_step_leaves_the_old_pair_or_the_new_one() {
    let old = version(1.0).to_proto().unwrap();
    let new = version(2.0).to_proto().unwrap();
    assert_ne!(old, new);
    for crash in [false, true] {
        for step in SaveStep::ALL {
            let (tmp, out) = previous_output();
            let options = SaveOptions {
                fail_at: Some(FailPoint { step, crash }),
                ..Default::default()
            };
            let err = version(2.0).save(&out, &options).unwrap_err().to_string();
            assert!(err.contains("injected failure"), "{step:?}: {err}");
            let committed = matches!(step, SaveStep::SyncDirAfterModel | SaveStep::RemoveOldData);
            let now = content(&out);
            if committed {
                assert_eq!(now, new, "{step:?} crash={crash}: the new pair");
            } else {
                assert_eq!(now, old, "{step:?} crash={crash}: the old pair");
            }
            let files = listing(tmp.path());
            if !crash {
                // Cleaned up: no temporary file, no orphan data file.
                let expected: &[&str] = match step {
                    // Committed; the old data file stays (removed by the next save).
                    SaveStep::SyncDirAfterModel | SaveStep::RemoveOldData => {
                        &["out.onnx", "out.onnx.1.data", "out.onnx.data"]
                    }
                    _ => &["out.onnx", "out.onnx.data"],
                };
                assert_eq!(files, expected, "{step:?}");
            }
            // Whatever was left, saving again works and is complete.
            version(3.0).save(&out, &SaveOptions::default()).unwrap();
            assert_eq!(content(&out), version(3.0).to_proto().unwrap());
        }
    }
}

#[test]
fn successive_saves_alternate_the_data_file_and_remove_the_old_one() {
    let (tmp, out) = previous_output();
    let s = version(2.0).save(&out, &SaveOptions::default()).unwrap();
    assert_eq!(s.external_file, Some(tmp.path().join("out.onnx.1.data")));
    assert_eq!(listing(tmp.path()), ["out.onnx", "out.onnx.1.data"]);
    assert_eq!(content(&out), version(2.0).to_proto().unwrap());
    version(3.0).save(&out, &SaveOptions::default()).unwrap();
    assert_eq!(listing(tmp.path()), ["out.onnx", "out.onnx.data"]);
    assert_eq!(content(&out), version(3.0).to_proto().unwrap());
    // Inline: the old data file goes once the inline model is in place.
    let inline = SaveOptions {
        external: infopt_ir::ExternalDataPolicy::Inline,
        ..Default::default()
    };
    version(4.0).save(&out, &inline).unwrap();
    assert_eq!(listing(tmp.path()), ["out.onnx"]);
    assert_eq!(content(&out), version(4.0).to_proto().unwrap());
}

#[test]
fn an_unreadable_previous_output_gets_a_fresh_data_name() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.onnx");
    std::fs::write(&out, b"not a model").unwrap();
    std::fs::write(tmp.path().join("out.onnx.data"), b"someone's data").unwrap();
    let s = version(1.0).save(&out, &SaveOptions::default()).unwrap();
    let data = s.external_file.unwrap();
    let name = data.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("out.onnx.data.") && name.len() == "out.onnx.data.".len() + 16,
        "{name}"
    );
    assert_eq!(
        std::fs::read(tmp.path().join("out.onnx.data")).unwrap(),
        b"someone's data"
    );
    assert_eq!(content(&out), version(1.0).to_proto().unwrap());
}

#[cfg(unix)]
#[test]
fn a_symlink_planted_at_the_output_is_replaced_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, b"keep me").unwrap();
    let out = tmp.path().join("out.onnx");
    std::os::unix::fs::symlink(&victim, &out).unwrap();
    std::os::unix::fs::symlink(&victim, tmp.path().join("out.onnx.data")).unwrap();
    // The temporary names of earlier versions (`.NAME.infopt-tmp-PID`).
    for name in ["out.onnx", "out.onnx.data"] {
        let planted = tmp
            .path()
            .join(format!(".{name}.infopt-tmp-{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, planted).unwrap();
    }
    version(1.0).save(&out, &SaveOptions::default()).unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
    assert!(!std::fs::symlink_metadata(&out).unwrap().is_symlink());
    assert_eq!(content(&out), version(1.0).to_proto().unwrap());
}

#[test]
fn write_atomically_leaves_no_temporary_file() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("report.json");
    infopt_ir::save::write_atomically(&p, |w| std::io::Write::write_all(w, b"{}")).unwrap();
    let e = infopt_ir::save::write_atomically(&p, |_| Err(std::io::Error::other("boom")));
    assert!(e.is_err());
    assert_eq!(std::fs::read(&p).unwrap(), b"{}");
    assert_eq!(listing(tmp.path()), ["report.json"]);
}
