//! Datasets: every layout yields its samples in a deterministic order,
//! batches join along the first axis, and bad data gets one line naming the
//! file and the input.

use std::io::Write;
use std::path::Path;

use infopt_runtime::{DType, DimSpec, IoSpec};
use infopt_verify::dataset::{self, batches};

/// An `.npy` image of a float32 C-order array.
fn npy_f32(shape: &[usize], data: &[f32]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_text = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape_text}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

fn write_npz(path: &Path, arrays: &[(&str, Vec<u8>)]) {
    let file = std::fs::File::create(path).unwrap();
    let mut zip = zip::ZipWriter::new(file);
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, bytes) in arrays {
        zip.start_file(format!("{name}.npy"), opts).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
}

fn spec(name: &str, dims: &[usize]) -> IoSpec {
    IoSpec {
        name: name.into(),
        dtype: DType::F32,
        dims: Some(dims.iter().map(|&d| DimSpec::Known(d)).collect()),
    }
}

fn first_values(ds: &mut dyn dataset::Dataset, inputs: &[IoSpec]) -> Vec<f64> {
    let mut out = Vec::new();
    while let Some(s) = ds.next_sample(inputs).unwrap() {
        out.push(s.tensors[0].to_f64_vec()[0]);
    }
    out
}

#[test]
fn folder_of_npz_samples_in_name_order() {
    let dir = tempfile::tempdir().unwrap();
    for (i, name) in ["b.npz", "a.npz", "c.npz"].iter().enumerate() {
        write_npz(
            &dir.path().join(name),
            &[
                ("x", npy_f32(&[1, 2], &[i as f32, 0.0])),
                ("y", npy_f32(&[3], &[1.0, 2.0, 3.0])),
            ],
        );
    }
    let inputs = [spec("x", &[1, 2]), spec("y", &[3])];
    let mut ds = dataset::open(dir.path()).unwrap();
    assert_eq!(ds.sample_count(), Some(3));
    assert!(ds.meaningful());
    // a.npz (1), b.npz (0), c.npz (2).
    assert_eq!(first_values(ds.as_mut(), &inputs), vec![1.0, 0.0, 2.0]);
}

#[test]
fn stacked_npz_and_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stack.npz");
    let data: Vec<f32> = (0..10).map(|v| v as f32).collect();
    write_npz(&path, &[("x", npy_f32(&[5, 2], &data))]);
    // The model input has a batch axis of 1: samples keep it.
    let inputs = [spec("x", &[1, 2])];
    let mut ds = dataset::open(&path).unwrap();
    assert_eq!(ds.sample_count(), Some(5));
    let mut seen = Vec::new();
    let n = batches(ds.as_mut(), &inputs, 2, Some(5), |batch, samples| {
        seen.push((batch[0].shape().to_vec(), samples.len()));
        Ok(())
    })
    .unwrap();
    assert_eq!(n, 5);
    assert_eq!(
        seen,
        vec![(vec![2, 2], 2), (vec![2, 2], 2), (vec![1, 2], 1)]
    );
    // Without a batch axis in the input, the sample axis is dropped.
    let mut ds = dataset::open(&path).unwrap();
    let s = ds.next_sample(&[spec("x", &[2])]).unwrap().unwrap();
    assert_eq!(s.tensors[0].shape(), &[2]);
    assert!(s.origin.ends_with("stack.npz[0]"), "{}", s.origin);
    // --samples limits.
    let mut ds = dataset::open(&path).unwrap();
    let n = batches(ds.as_mut(), &inputs, 1, Some(3), |_, _| Ok(())).unwrap();
    assert_eq!(n, 3);
}

#[test]
fn bad_data_is_one_line_naming_file_and_input() {
    let dir = tempfile::tempdir().unwrap();
    write_npz(
        &dir.path().join("0.npz"),
        &[("x", npy_f32(&[1, 3], &[0.0; 3]))],
    );
    let inputs = [spec("x", &[1, 2])];
    let mut ds = dataset::open(dir.path()).unwrap();
    let e = ds.next_sample(&inputs).unwrap_err();
    assert!(
        e.contains("0.npz") && e.contains("`x`") && e.contains("[1, 3]"),
        "{e}"
    );
    assert!(!e.contains('\n'));

    let missing = [spec("x", &[1, 3]), spec("mask", &[1, 3])];
    let mut ds = dataset::open(dir.path()).unwrap();
    let e = ds.next_sample(&missing).unwrap_err();
    assert!(e.contains("0.npz") && e.contains("mask"), "{e}");

    std::fs::write(dir.path().join("1.npy"), npy_f32(&[1, 3], &[0.0; 3])).unwrap();
    let e = dataset::open(dir.path()).err().unwrap();
    assert!(e.contains("mixes .npz and .npy"), "{e}");

    let empty = tempfile::tempdir().unwrap();
    let e = dataset::open(empty.path()).err().unwrap();
    assert!(e.contains("no .npz"), "{e}");
}

#[test]
fn folder_of_npy_files_is_one_sample_per_file_for_one_input() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..4 {
        std::fs::write(
            dir.path().join(format!("img{i}.npy")),
            npy_f32(&[1, 2], &[i as f32, 1.0]),
        )
        .unwrap();
    }
    let mut ds = dataset::open(dir.path()).unwrap();
    assert_eq!(
        first_values(ds.as_mut(), &[spec("images", &[1, 2])]),
        vec![0.0, 1.0, 2.0, 3.0]
    );
    let mut ds = dataset::open(dir.path()).unwrap();
    let e = ds
        .next_sample(&[spec("a", &[1, 2]), spec("b", &[1, 2])])
        .unwrap_err();
    assert!(e.contains("one input"), "{e}");
}
