//! A folder of images as a deterministic sequence of calibration samples.

use std::path::{Path, PathBuf};

use half::f16;
use infopt_runtime::HostTensor;

use super::preprocess::preprocess;
use super::spec::{ImageDType, ImageSpec, Layout};
use crate::error::{CalibError, Result};

/// Extensions read from the folder (compared case-insensitively); others are skipped.
pub const IMAGE_EXTENSIONS: [&str; 5] = ["png", "jpg", "jpeg", "bmp", "webp"];

/// Whether `path` is a file with one of [`IMAGE_EXTENSIONS`] (any case).
pub fn is_image_file(path: &Path) -> bool {
    let image = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()));
    image && path.is_file()
}

/// The images of one folder (not recursive), in sorted file-name order.
#[derive(Debug, Clone)]
pub struct ImageFolder {
    spec: ImageSpec,
    files: Vec<PathBuf>,
}

impl ImageFolder {
    /// Lists `dir`; an empty folder is an error (calibrating on nothing is a mistake).
    pub fn open(dir: &Path, spec: ImageSpec) -> Result<ImageFolder> {
        spec.validate()?;
        let read_err = |source| CalibError::Read {
            path: dir.to_path_buf(),
            source,
        };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(read_err)? {
            let path = entry.map_err(read_err)?.path();
            if is_image_file(&path) {
                files.push(path);
            }
        }
        if files.is_empty() {
            return Err(CalibError::Config(format!(
                "{}: no images ({}) in this folder",
                dir.display(),
                IMAGE_EXTENSIONS.map(|e| format!(".{e}")).join(", ")
            )));
        }
        files.sort();
        Ok(ImageFolder { spec, files })
    }

    pub fn spec(&self) -> &ImageSpec {
        &self.spec
    }

    /// The image files, in the order they are used.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Number of samples (batches of `spec.batch` images).
    pub fn len(&self) -> usize {
        let (n, b) = (self.files.len(), self.spec.batch);
        if self.spec.drop_last {
            n / b
        } else {
            n.div_ceil(b)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sample `index`: one tensor named `spec.input`, shape `[N, C, H, W]` (or
    /// `[N, H, W, C]`), `N` = `spec.batch` except for a smaller last batch.
    pub fn sample(&self, index: usize) -> Result<Vec<HostTensor>> {
        let b = self.spec.batch;
        let start = index * b;
        let end = (start + b).min(self.files.len());
        let files = self.files.get(start..end).unwrap_or_default();
        if files.is_empty() || index >= self.len() {
            return Err(CalibError::Config(format!(
                "sample {index} is out of range: the folder gives {} sample(s)",
                self.len()
            )));
        }
        let mut values = Vec::new();
        for f in files {
            values.extend(preprocess(&decode(f)?, &self.spec));
        }
        let [h, w] = self.spec.size.map(|d| d as usize);
        let c = self.spec.channels.count();
        let n = files.len();
        let shape = match self.spec.layout {
            Layout::Nchw => vec![n, c, h, w],
            Layout::Nhwc => vec![n, h, w, c],
        };
        let tensor = match self.spec.dtype {
            ImageDType::F32 => HostTensor::from_vec(shape, values),
            ImageDType::F16 => {
                HostTensor::from_vec(shape, values.into_iter().map(f16::from_f32).collect())
            }
            // Values are whole pixel values 0..=255 here (validated: no scale/mean/std).
            ImageDType::U8 => {
                HostTensor::from_vec(shape, values.into_iter().map(|v| v as u8).collect())
            }
        }
        .expect("shape and element count agree by construction");
        Ok(vec![tensor.named(self.spec.input.clone())])
    }

    /// Every sample in order.
    pub fn samples(&self) -> impl Iterator<Item = Result<Vec<HostTensor>>> + '_ {
        (0..self.len()).map(|i| self.sample(i))
    }
}

/// Decodes one file, whatever its extension says (the content decides the format).
fn decode(path: &Path) -> Result<image::DynamicImage> {
    let err = |message: String| CalibError::Image {
        path: path.to_path_buf(),
        message: message.lines().next().unwrap_or_default().to_string(),
    };
    image::ImageReader::open(path)
        .map_err(|e| err(e.to_string()))?
        .with_guessed_format()
        .map_err(|e| err(e.to_string()))?
        .decode()
        .map_err(|e| err(e.to_string()))
}
