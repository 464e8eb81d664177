//! Writes what the model would see for the first sample of an image folder: the
//! preprocessed tensor's shape on stdout and its values as raw little-endian f32 in OUT.
//! For checking a preprocessing declaration against another pipeline (PIL, OpenCV, …).
//!
//! ```text
//! cargo run -p infopt-calibration --example preprocess_dump -- calib.yaml images/ out.f32
//! ```

use std::path::Path;

use infopt_calibration::{ImageFolder, ImageSpec};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [yaml, dir, out] = args.as_slice() else {
        return Err("usage: preprocess_dump SPEC.yaml IMAGE_DIR OUT.f32".into());
    };
    let spec = ImageSpec::from_yaml(&std::fs::read_to_string(yaml)?, yaml)?;
    let folder = ImageFolder::open(Path::new(dir), spec)?;
    let sample = folder.sample(0)?;
    let t = &sample[0];
    let bytes: Vec<u8> = t
        .to_f64_vec()
        .iter()
        .flat_map(|&v| (v as f32).to_le_bytes())
        .collect();
    std::fs::write(out, bytes)?;
    println!(
        "{:?} {:?} {}",
        t.shape(),
        t.dtype(),
        folder.files()[0].display()
    );
    Ok(())
}
