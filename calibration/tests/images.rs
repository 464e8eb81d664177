//! Image folders end to end: files written in every supported format, read back in sorted
//! order, batched, converted, and broken files reported by name.

use std::path::Path;

use image::{DynamicImage, ImageFormat, Rgb, RgbImage};
use infopt_calibration::ImageFolder;
use infopt_calibration::images::ImageSpec;
use infopt_runtime::DType;

fn flat(path: &Path, colour: [u8; 3], format: ImageFormat) {
    let img = DynamicImage::ImageRgb8(RgbImage::from_pixel(6, 4, Rgb(colour)));
    img.save_with_format(path, format).unwrap();
}

fn spec(extra: &str) -> ImageSpec {
    let yaml =
        format!("images:\n  input: pixels\n  size: [2, 3]\n  scale: 0.5\n  layout: nhwc\n{extra}");
    ImageSpec::from_yaml(&yaml, "calib.yaml").unwrap()
}

/// Four images whose sorted order is a, b, c, d; lossless formats carry exact colours.
fn folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    flat(&d.join("b.png"), [20, 20, 20], ImageFormat::Png);
    flat(&d.join("a.bmp"), [10, 10, 10], ImageFormat::Bmp);
    flat(&d.join("c.JPG"), [128, 128, 128], ImageFormat::Jpeg);
    flat(&d.join("d.webp"), [40, 40, 40], ImageFormat::WebP);
    std::fs::write(d.join("notes.txt"), "not an image").unwrap();
    dir
}

#[test]
fn samples_follow_sorted_names_and_batch() {
    let dir = folder();
    let f = ImageFolder::open(dir.path(), spec("  batch: 3\n")).unwrap();
    let names: Vec<String> = f
        .files()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["a.bmp", "b.png", "c.JPG", "d.webp"]);
    assert_eq!(f.len(), 2);
    let samples: Vec<_> = f.samples().collect::<Result<_, _>>().unwrap();
    let first = &samples[0][0];
    assert_eq!(first.name(), Some("pixels"));
    assert_eq!(first.shape(), &[3, 2, 3, 3]);
    let v = first.as_slice::<f32>().unwrap();
    // Image a is 10 everywhere, b 20, scaled by 0.5; c is a JPEG of flat grey (lossy,
    // but flat colour survives within a step).
    assert!(v[..18].iter().all(|&x| x == 5.0));
    assert!(v[18..36].iter().all(|&x| x == 10.0));
    assert!(
        v[36..].iter().all(|&x| (x - 64.0).abs() <= 1.0),
        "{:?}",
        &v[36..]
    );
    // The last batch holds the one remaining image...
    assert_eq!(samples[1][0].shape(), &[1, 2, 3, 3]);
    assert!(
        samples[1][0]
            .as_slice::<f32>()
            .unwrap()
            .iter()
            .all(|&x| x == 20.0)
    );
    // ...unless incomplete batches are dropped.
    let f = ImageFolder::open(dir.path(), spec("  batch: 3\n  drop_last: true\n")).unwrap();
    assert_eq!(f.len(), 1);
    assert!(f.sample(1).is_err());
}

#[test]
fn dtypes_and_layouts() {
    let dir = folder();
    let f16 = ImageFolder::open(dir.path(), spec("  dtype: f16\n")).unwrap();
    let t = &f16.sample(0).unwrap()[0];
    assert_eq!((t.dtype(), t.shape()), (DType::F16, &[1, 2, 3, 3][..]));
    assert_eq!(t.to_f64_vec()[0], 5.0);
    let yaml = "images:\n  input: raw\n  size: [4, 4]\n  dtype: u8\n  channels: gray\n  resize: letterbox\n  pad: 0\n";
    let spec = ImageSpec::from_yaml(yaml, "c.yaml").unwrap();
    let u8s = ImageFolder::open(dir.path(), spec).unwrap();
    let t = &u8s.sample(1).unwrap()[0];
    assert_eq!((t.dtype(), t.shape()), (DType::U8, &[1, 1, 4, 4][..]));
    let v = t.as_slice::<u8>().unwrap();
    // 6×4 letterboxed into 4×4 is 4 wide and 3 (2.67 rounded) high, placed at row
    // (4 - 3) / 2 = 0: three rows of b's grey (20), then one row of padding.
    assert_eq!(&v[..12], &[20; 12]);
    assert_eq!(&v[12..], &[0; 4]);
}

#[test]
fn broken_and_missing_inputs_are_named() {
    let dir = folder();
    std::fs::write(dir.path().join("e.png"), b"\x89PNG\r\n\x1a\nbroken").unwrap();
    let f = ImageFolder::open(dir.path(), spec("")).unwrap();
    assert_eq!(f.len(), 5);
    let err = f.sample(4).unwrap_err().to_string();
    assert!(err.contains("e.png: cannot decode image"), "{err}");
    assert!(!err.contains('\n'), "{err}");
    let empty = tempfile::tempdir().unwrap();
    let err = ImageFolder::open(empty.path(), spec(""))
        .unwrap_err()
        .to_string();
    assert!(err.contains("no images (.png, .jpg"), "{err}");
    let err = ImageFolder::open(&dir.path().join("nope"), spec(""))
        .unwrap_err()
        .to_string();
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn an_image_folder_without_preprocess_is_told_to_give_it() {
    use infopt_calibration::data_source::{DataSource, open_files};
    let dir = folder();
    let path = dir.path().to_str().unwrap();
    let source = DataSource::parse(path, None).unwrap();
    let err = open_files(&source).err().unwrap();
    assert_eq!(
        err,
        format!(
            "{path}: the folder holds 4 images and no .npz/.npy samples: give --preprocess FILE.yaml saying how an image becomes the model's input (input name, size, scale, mean/std, layout: docs/quantization.md \"Calibration data\")"
        )
    );
    // A folder of neither keeps the arrays' message.
    let empty = tempfile::tempdir().unwrap();
    let source = DataSource::parse(empty.path().to_str().unwrap(), None).unwrap();
    let err = open_files(&source).err().unwrap();
    assert!(
        err.ends_with("the folder has no .npz, .npy or sample sub-folders"),
        "{err}"
    );
}
