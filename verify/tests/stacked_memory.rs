//! A stacked `.npz` is read one sample at a time: memory does not grow
//! with the number of samples in the file. (Its own test binary, so that
//! no other test allocates while resident memory is measured.)

use std::io::Write;

use infopt_runtime::{DType, DimSpec, IoSpec};
use infopt_verify::dataset;

/// Resident memory of this process, in bytes.
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("procfs");
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("statm");
    pages * 4096
}

#[test]
fn a_stacked_archive_streams_with_flat_memory() {
    // 128 samples of [3, 128, 128] float32: 24 MiB of data, written a
    // sample at a time so the test itself never holds it.
    const SAMPLES: usize = 128;
    const ITEM: usize = 3 * 128 * 128;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stack.npz");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    zip.start_file("x.npy", opts).unwrap();
    let mut header =
        format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({SAMPLES}, 3, 128, 128), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    zip.write_all(b"\x93NUMPY\x01\x00").unwrap();
    zip.write_all(&(header.len() as u16).to_le_bytes()).unwrap();
    zip.write_all(header.as_bytes()).unwrap();
    for i in 0..SAMPLES {
        let item: Vec<u8> = (0..ITEM)
            .flat_map(|k| ((i * 7 + k % 13) as f32).to_le_bytes())
            .collect();
        zip.write_all(&item).unwrap();
    }
    zip.finish().unwrap();

    let inputs = [IoSpec {
        name: "x".into(),
        dtype: DType::F32,
        dims: Some([1, 3, 128, 128].map(DimSpec::Known).to_vec()),
    }];
    let before = rss();
    let mut ds = dataset::open(&path).unwrap();
    assert_eq!(ds.sample_count(), Some(SAMPLES));
    let mut peak = rss();
    let mut seen = 0;
    while let Some(s) = ds.next_sample(&inputs).unwrap() {
        assert_eq!(s.tensors[0].to_f64_vec()[0], (seen * 7) as f64);
        seen += 1;
        peak = peak.max(rss());
    }
    assert_eq!(seen, SAMPLES);
    // One sample is 192 KiB; the file 24 MiB (read whole and decoded, it
    // would be twice that).
    let grown = peak.saturating_sub(before);
    assert!(
        grown < 8 << 20,
        "reading {SAMPLES} stacked samples grew resident memory by {grown} bytes"
    );
}
