//! Where calibration data comes from ([`DataSource`]) and how it opens as a
//! dataset.

use std::path::Path;

use infopt_runtime::{InputShapes, IoSpec};
use infopt_verify::dataset::{self, Dataset, Sample};
use infopt_verify::{ChosenBackend, ErrorKind, VerifyError};

use crate::images::{ImageFolder, ImageSpec};

/// Where calibration data comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum DataSource {
    /// A folder of `.npz` / `.npy` samples, or one stacked `.npz`
    /// (see `infopt_verify::dataset`).
    Arrays(std::path::PathBuf),
    /// A folder of images with the preprocessing of a YAML file.
    Images {
        dir: std::path::PathBuf,
        spec: std::path::PathBuf,
    },
    /// Seeded random inputs: smoke tests only, meaningless for accuracy.
    Random { seed: u64, count: usize, vocab: u64 },
    /// Samples the caller holds (the Python API's iterable), without files.
    Streamed(Streamed),
}

/// Samples held by the caller, opened as a fresh dataset each time one is
/// needed: INT8 reads the first sample for the input sizes, then the
/// calibration samples, then the held-out ones, each from the start.
pub trait OpenSamples: Send + Sync {
    fn open(&self) -> Box<dyn Dataset>;
}

/// A caller's samples as a [`DataSource`]: shared, compared by identity.
#[derive(Clone)]
pub struct Streamed(pub std::sync::Arc<dyn OpenSamples>);

impl std::fmt::Debug for Streamed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Streamed(..)")
    }
}

impl PartialEq for Streamed {
    fn eq(&self, other: &Streamed) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Generated integer inputs of `random:N` are drawn from `[0, GENERATED_VOCAB)`
/// unless the command says otherwise (`--vocab`), as verification draws them.
pub const GENERATED_VOCAB: u64 = 16;

impl DataSource {
    /// `random:N` drawing as the command's generated inputs do: `seed`
    /// (`--seed`, or the pipeline's verify seed) and integer inputs from
    /// `[0, vocab)` (`--vocab`); other sources are returned as they are.
    /// Before this, `--seed` and `--vocab` changed the verification's inputs
    /// but not the random calibration samples.
    pub fn generated_with(self, seed: u64, vocab: u64) -> DataSource {
        match self {
            DataSource::Random { count, .. } => DataSource::Random { seed, count, vocab },
            other => other,
        }
    }

    /// `random`, `random:N`, a path; `preprocess` makes a folder an image folder.
    pub fn parse(data: &str, preprocess: Option<&Path>) -> Result<DataSource, String> {
        if let Some(rest) = data.strip_prefix("random") {
            let count = match rest.strip_prefix(':') {
                None if rest.is_empty() => 64,
                Some(n) => n.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                    format!("--data {data}: expected random or random:N with N >= 1")
                })?,
                _ => return Ok(DataSource::Arrays(data.into())),
            };
            return Ok(DataSource::Random {
                seed: 0,
                count,
                vocab: GENERATED_VOCAB,
            });
        }
        let path = std::path::PathBuf::from(data);
        if !path.exists() {
            return Err(format!(
                "--data {data}: no such file or folder (give a folder of .npz/.npy samples, a stacked .npz, an image folder with --preprocess, or random:N)"
            ));
        }
        Ok(match preprocess {
            Some(spec) => DataSource::Images {
                dir: path,
                spec: spec.to_path_buf(),
            },
            None => DataSource::Arrays(path),
        })
    }
}

/// An image folder as a dataset.
struct ImageSamples {
    folder: ImageFolder,
    next: usize,
}

impl Dataset for ImageSamples {
    fn describe(&self) -> String {
        format!(
            "{} images ({} samples) in {}",
            self.folder.files().len(),
            self.folder.len(),
            self.folder
                .files()
                .first()
                .and_then(|f| f.parent())
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        )
    }
    fn meaningful(&self) -> bool {
        true
    }
    fn sample_count(&self) -> Option<usize> {
        Some(self.folder.len())
    }
    fn skip_sample(&mut self, _inputs: &[IoSpec]) -> Result<bool, String> {
        let more = self.next < self.folder.len();
        self.next += usize::from(more);
        Ok(more)
    }
    fn next_sample(&mut self, inputs: &[IoSpec]) -> Result<Option<Sample>, String> {
        if self.next >= self.folder.len() {
            return Ok(None);
        }
        let index = self.next;
        self.next += 1;
        let b = self.folder.spec().batch;
        let origin = self
            .folder
            .files()
            .get(index * b)
            .map(|f| f.display().to_string())
            .unwrap_or_default();
        let arrays = self.folder.sample(index).map_err(|e| e.to_string())?;
        let tensors = infopt_verify::inputs::fit_inputs(inputs, &arrays, &origin)?;
        Ok(Some(Sample {
            index,
            origin,
            tensors,
        }))
    }
}

/// Opens the dataset for `model` (random data needs the model loaded).
pub fn open_dataset(
    source: &DataSource,
    chosen: &ChosenBackend,
    model_bytes: &[u8],
    dir: &Path,
    shapes: &InputShapes,
) -> Result<Box<dyn Dataset>, VerifyError> {
    if let Some(files) = open_files(source).map_err(VerifyError::usage)? {
        return Ok(files);
    }
    match source {
        DataSource::Arrays(_) | DataSource::Images { .. } | DataSource::Streamed(_) => {
            Err(VerifyError::usage("no dataset opened"))
        }
        DataSource::Random { seed, count, vocab } => {
            let loaded = chosen
                .backend
                .load(model_bytes, Some(dir), shapes)
                .map_err(|e| VerifyError::runtime(e, ErrorKind::CannotVerify))?;
            Ok(Box::new(
                dataset::RandomSamples::new(loaded, *seed, *vocab, *count).plainer_where_needed(),
            ))
        }
    }
}

/// The message for a folder of images given as arrays (no `--preprocess`),
/// where opening it found no samples: the most common calibration data, and
/// without this the error spoke only of .npz and .npy files.
fn images_without_preprocess(dir: &Path) -> Option<String> {
    let read = std::fs::read_dir(dir).ok()?;
    let images = read
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| crate::images::is_image_file(p))
        .count();
    (images > 0).then(|| {
        format!(
            "{}: the folder holds {images} images and no .npz/.npy samples: give --preprocess FILE.yaml saying how an image becomes the model's input (input name, size, scale, mean/std, layout: docs/quantization.md \"Calibration data\")",
            dir.display()
        )
    })
}

/// Opens a dataset of files (arrays or images); `None` for random data,
/// which needs the model loaded (see [`open_dataset`]).
pub fn open_files(source: &DataSource) -> Result<Option<Box<dyn Dataset>>, String> {
    match source {
        DataSource::Arrays(p) => dataset::open(p)
            .map(Some)
            .map_err(|e| images_without_preprocess(p).unwrap_or(e)),
        DataSource::Images { dir: images, spec } => {
            let text = std::fs::read_to_string(spec)
                .map_err(|e| format!("--preprocess {}: {e}", spec.display()))?;
            let spec = ImageSpec::from_yaml(&text, &spec.display().to_string())
                .map_err(|e| e.to_string())?;
            let folder = ImageFolder::open(images, spec).map_err(|e| e.to_string())?;
            Ok(Some(Box::new(ImageSamples { folder, next: 0 })))
        }
        DataSource::Streamed(s) => Ok(Some(s.0.open())),
        DataSource::Random { .. } => Ok(None),
    }
}
