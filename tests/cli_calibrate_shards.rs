//! Calibration over many machines: `calibrate --shard K/N` on each, `calibrate --merge`
//! of the parts in any order gives the range table and TensorRT cache of one run over
//! all the data, byte for byte; parts that do not belong together are refused by name;
//! `optimize --int8 --ranges` takes the merged table without calibrating again.

mod common;

use std::path::{Path, PathBuf};

use common::*;

/// `n` samples of cnn_bn_relu's `input` [1,3,32,32], one .npz file each (with a few
/// outliers, so the histogram methods have something to clip).
fn sample_folder(dir: &Path, n: usize) -> PathBuf {
    let folder = dir.join("calib");
    std::fs::create_dir_all(&folder).unwrap();
    let mut state = 2024u32;
    for i in 0..n {
        let data: Vec<f32> = (0..3 * 32 * 32)
            .map(|j| {
                state = state.wrapping_mul(1664525).wrapping_add(1013904223);
                let x = (state >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0;
                if j == i * 37 { x * 9.0 } else { x }
            })
            .collect();
        let path = folder.join(format!("{i:04}.npz"));
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        zip.start_file("input.npy", opts).unwrap();
        std::io::Write::write_all(&mut zip, &npy_f32(&[1, 3, 32, 32], &data)).unwrap();
        zip.finish().unwrap();
    }
    folder
}

fn run_ok(args: &[&str]) -> String {
    let o = infopt(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stderr(&o)
}

/// The one-machine range table and cache, then N parts merged in a scrambled order:
/// equal bytes.
fn assert_shards_match_single(data: &str, method: &str, counts: &[usize]) {
    let dir = tempfile::tempdir().unwrap();
    let model = fixture("cnn_bn_relu.onnx");
    let single = dir.path().join("single.json");
    let single_cache = dir.path().join("single.cache");
    run_ok(&[
        "calibrate",
        s(&model),
        "--data",
        data,
        "--method",
        method,
        "-o",
        s(&single),
        "--trt-cache",
        s(&single_cache),
    ]);
    for &n in counts {
        let mut parts: Vec<PathBuf> = (1..=n)
            .map(|k| {
                let part = dir.path().join(format!("part-{n}-{k}.json"));
                let shard = format!("{k}/{n}");
                // Shards batch differently: statistics do not depend on batching.
                let batch = if k % 2 == 0 { "2" } else { "1" };
                let e = run_ok(&[
                    "calibrate",
                    s(&model),
                    "--data",
                    data,
                    "--method",
                    method,
                    "--shard",
                    &shard,
                    "--batch",
                    batch,
                    "-o",
                    s(&part),
                ]);
                assert!(e.contains(&format!("shard {shard}: calibrated ")), "{e}");
                part
            })
            .collect();
        // Any order: reversed, then the middle first.
        parts.reverse();
        parts.rotate_left(n / 2);
        let merged = dir.path().join(format!("merged-{n}.json"));
        let merged_cache = dir.path().join(format!("merged-{n}.cache"));
        let mut args = vec!["calibrate", "--merge"];
        args.extend(parts.iter().map(|p| s(p)));
        args.extend(["-o", s(&merged), "--trt-cache", s(&merged_cache)]);
        let e = run_ok(&args);
        assert!(
            e.contains(&format!(
                "merged {n} part{}: ",
                if n == 1 { "" } else { "s" }
            )),
            "{e}"
        );
        assert_eq!(
            std::fs::read(&merged).unwrap(),
            std::fs::read(&single).unwrap(),
            "{n} shards ({method}): the merged ranges differ from one run's"
        );
        assert_eq!(
            std::fs::read(&merged_cache).unwrap(),
            std::fs::read(&single_cache).unwrap(),
            "{n} shards ({method}): the merged TensorRT cache differs from one run's"
        );
    }
}

#[test]
fn shards_of_a_sample_folder_merge_to_the_single_run_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let data = sample_folder(dir.path(), 13);
    assert_shards_match_single(s(&data), "entropy", &[1, 3, 7]);
}

#[test]
fn shards_merge_exactly_for_every_method_and_more_shards_than_samples() {
    let dir = tempfile::tempdir().unwrap();
    let stacked = stacked(dir.path(), 5);
    // 7 shards of 5 samples: two are empty, and still merge.
    assert_shards_match_single(s(&stacked), "auto", &[7]);
    assert_shards_match_single(s(&stacked), "percentile", &[3]);
    assert_shards_match_single("random:6", "minmax", &[1, 4]);
}

/// Parts of one calibration (3 shards of random:9) and the directory they are in.
fn three_parts(dir: &Path, extra: &[&str]) -> Vec<PathBuf> {
    let model = fixture("cnn_bn_relu.onnx");
    (1..=3)
        .map(|k| {
            let part = dir.join(format!("part-{k}{}.json", extra.join("")));
            let shard = format!("{k}/3");
            let mut args = vec![
                "calibrate",
                s(&model),
                "--data",
                "random:9",
                "--shard",
                &shard,
                "-o",
                s(&part),
            ];
            args.extend(extra);
            run_ok(&args);
            part
        })
        .collect()
}

fn merge_error(parts: &[&Path], model: Option<&Path>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ranges.json");
    let mut args = vec!["calibrate"];
    if let Some(m) = model {
        args.push(s(m));
    }
    args.push("--merge");
    args.extend(parts.iter().map(|p| s(p)));
    args.extend(["-o", s(&out)]);
    let o = infopt(&args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!out.exists(), "a refused merge wrote {}", out.display());
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    e.trim_end().to_string()
}

#[test]
fn parts_that_do_not_belong_together_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = three_parts(d, &[]);
    let name = |p: &Path| p.display().to_string();

    // A missing shard, named with the command that makes it.
    assert_eq!(
        merge_error(&[&p[2], &p[0]], None),
        "error: shard 2/3 is missing: give every part of the 3 (calibrate --shard 2/3 -o ...)"
    );
    // The same shard twice.
    assert_eq!(
        merge_error(&[&p[0], &p[1], &p[0]], None),
        format!(
            "error: shard 1/3 is given twice ({} and {})",
            name(&p[0]),
            name(&p[0])
        )
    );
    // Another setting: the method.
    let pct = three_parts(d, &["--method", "percentile"]);
    let e = merge_error(&[&p[0], &pct[1], &p[2]], None);
    assert!(
        e.starts_with(&format!(
            "error: {} was calibrated with other settings than {} (method {{\"name\":\"percentile\"",
            name(&pct[1]),
            name(&p[0])
        )) && e.ends_with("calibrate every shard with the same options"),
        "{e}"
    );
    // Another setting: the input shapes.
    let shaped = three_parts(d, &["--input-shape", "input:2x3x32x32"]);
    let e = merge_error(&[&p[0], &p[1], &shaped[2]], None);
    assert!(
        e.contains("other settings")
            && e.contains("(input shapes input=2x3x32x32, other dims 1 vs other dims 1)"),
        "{e}"
    );
    // Another split of the data.
    let model = fixture("cnn_bn_relu.onnx");
    let quarter = d.join("quarter.json");
    run_ok(&[
        "calibrate",
        s(&model),
        "--data",
        "random:9",
        "--shard",
        "2/4",
        "-o",
        s(&quarter),
    ]);
    assert_eq!(
        merge_error(&[&p[0], &quarter, &p[2]], None),
        format!(
            "error: {} is shard 2/4 of 9 samples, {} shard 1/3 of 9: parts of different splits",
            name(&quarter),
            name(&p[0])
        )
    );
    // Another model, among the parts and against the model given.
    let other = d.join("other.json");
    run_ok(&[
        "calibrate",
        s(&fixture("seq_linear.onnx")),
        "--data",
        "random:9",
        "--shard",
        "2/3",
        "-o",
        s(&other),
    ]);
    let e = merge_error(&[&p[0], &other, &p[2]], None);
    assert!(
        e.starts_with(&format!(
            "error: {} was calibrated on another model than {} (SHA-256 ",
            name(&other),
            name(&p[0])
        )),
        "{e}"
    );
    let e = merge_error(&[&p[0], &p[1], &p[2]], Some(&fixture("seq_linear.onnx")));
    assert!(
        e.starts_with(&format!(
            "error: {} was calibrated on another model (SHA-256 ",
            name(&p[0])
        )),
        "{e}"
    );
    // An edited part, a truncated one, and a file that is no part at all.
    let edited = d.join("edited.json");
    let text = std::fs::read_to_string(&p[1]).unwrap();
    let at = text.find("\"elements\":").unwrap() + "\"elements\":".len();
    std::fs::write(&edited, format!("{}1{}", &text[..at], &text[at..])).unwrap();
    assert_eq!(
        merge_error(&[&p[0], &edited, &p[2]], None),
        format!(
            "error: {}: damaged calibration part (its statistics do not match their SHA-256: edited or truncated); calibrate shard 2/3 again",
            name(&edited)
        )
    );
    let truncated = d.join("truncated.json");
    std::fs::write(&truncated, &text[..text.len() / 2]).unwrap();
    let e = merge_error(&[&p[0], &truncated, &p[2]], None);
    assert!(
        e.starts_with(&format!(
            "error: {}: not a calibration part (invalid JSON: ",
            name(&truncated)
        )),
        "{e}"
    );
    let ranges = d.join("ranges.json");
    run_ok(&[
        "calibrate",
        s(&model),
        "--data",
        "random:3",
        "-o",
        s(&ranges),
    ]);
    assert_eq!(
        merge_error(&[&ranges], None),
        format!(
            "error: {}: not a calibration part (no \"format\": \"infopt-calibration-part\"; parts are written by infopt calibrate --shard K/N)",
            name(&ranges)
        )
    );
}

#[test]
fn shard_arguments_are_checked_before_any_work() {
    let model = fixture("cnn_bn_relu.onnx");
    for bad in ["0/3", "4/3", "3", "x/2"] {
        let o = infopt(&[
            "calibrate",
            s(&model),
            "--data",
            "random:3",
            "--shard",
            bad,
            "-o",
            "/nonexistent/part.json",
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert_eq!(
            stderr(&o),
            format!(
                "error: --shard {bad}: expected K/N with 1 <= K <= N <= 100000 (shard K of N, e.g. 3/8)\n"
            )
        );
    }
}

#[test]
fn optimize_int8_takes_the_merged_ranges_without_calibrating() {
    let dir = tempfile::tempdir().unwrap();
    let parts = three_parts(dir.path(), &[]);
    let merged = dir.path().join("ranges.json");
    let mut args = vec!["calibrate", "--merge"];
    args.extend(parts.iter().map(|p| s(p)));
    args.extend(["-o", s(&merged)]);
    run_ok(&args);
    let out = dir.path().join("m.int8.onnx");
    let o = infopt(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "--int8",
        "--ranges",
        s(&merged),
        "-o",
        s(&out),
    ]);
    let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(o.status.success(), "{all}");
    assert!(!all.contains("calibrated"), "{all}");
    assert!(
        all.contains("note: quantize-int8 (portable): 4 layers in INT8"),
        "{all}"
    );
    assert!(out.exists());
}

/// A range table quantizes every layer with no search and no data to judge
/// on: a model that then misses its target is said so, with the fixes that
/// apply (the data the ranges came from, --precision), not the verifier's
/// pass-by-pass hint; the note says what it was judged on.
#[test]
fn optimize_int8_from_ranges_that_miss_says_what_would_fix_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = sample_folder(dir.path(), 4);
    let table = dir.path().join("ranges.json");
    let model = fixture("cnn_bn_relu.onnx");
    run_ok(&[
        "calibrate",
        s(&model),
        "--data",
        s(&data),
        "--method",
        "minmax",
        "-o",
        s(&table),
    ]);
    // Ranges a hundred times too narrow: every activation clips.
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&table).unwrap()).unwrap();
    for (_, t) in json["tensors"].as_object_mut().unwrap() {
        let amax = t["amax"].as_f64().unwrap();
        t["amax"] = serde_json::json!(amax / 100.0);
    }
    std::fs::write(&table, serde_json::to_string(&json).unwrap()).unwrap();
    let out = dir.path().join("m.int8.onnx");
    let o = infopt(&[
        "optimize",
        s(&model),
        "--int8",
        "--ranges",
        s(&table),
        "-o",
        s(&out),
    ]);
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = error_lines(&o);
    assert_eq!(err.len(), 1, "{}", stderr(&o));
    assert!(
        err[0].starts_with("error: the INT8 model misses its accuracy target (cosine >= 0.99"),
        "{}",
        err[0]
    );
    assert!(
        err[0].ends_with("output not written: with --ranges every layer is quantized and no search keeps the harmful ones in float: give --calib-data (the data the ranges came from) instead, keep layers in float with --precision NAME_OR_OP=fp32, or --no-verify to write it anyway"),
        "{}",
        err[0]
    );
    assert!(
        said.contains("note: verification of the INT8 model uses its accuracy target (cosine >= 0.99 per output) on generated inputs: with --ranges there are no calibration samples to judge it on"),
        "{said}"
    );
    assert!(!out.exists());
    // build-engine says the same fixes.
    let onnx = dir.path().join("e.onnx");
    let o = infopt(&[
        "build-engine",
        s(&model),
        "--int8",
        "--ranges",
        s(&table),
        "--input-shape",
        "input:1x3x32x32",
        "--emit-onnx",
        s(&onnx),
    ]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = error_lines(&o);
    assert_eq!(err.len(), 1, "{}", stderr(&o));
    assert!(
        err[0].ends_with("no engine built (with --ranges every layer is quantized and no search keeps the harmful ones in float: give --calib-data (the data the ranges came from) instead, keep layers in float with --precision NAME_OR_OP=fp32, or --no-verify)"),
        "{}",
        err[0]
    );
}
