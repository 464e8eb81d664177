//! The input options shared by `optimize`, `bench` and `compare`: parsed
//! here, resolved by [`infopt_verify::inputs`].

pub use infopt_verify::inputs::{InputSource, Inputs, describe};

use crate::shape_args;

/// The input options shared by `bench` and `compare`.
#[derive(Debug, Clone)]
pub struct InputSettings {
    /// Input shape `NAME:1x3x224x224`, or symbol values `NAME:batch=1,seq=128` (repeatable).
    /// Symbols nothing binds take 1 (bench, compare); optimize verifies with
    /// distinct values 2, 3, ... per symbol.
    pub input_shapes: Vec<String>,
    /// Run on these arrays instead of generated ones: an .npz, one .npy, or a folder of
    /// .npy files, named after the model inputs. Their shapes fix the input shapes.
    pub inputs: Option<std::path::PathBuf>,
    /// Seed of the generated inputs (default 0; for optimize, the pipeline's verify.seed).
    pub seed: Option<u64>,
    /// Generated integer inputs are drawn from [0, VOCAB) (token ids, indices);
    /// `*token_type*` inputs from [0, 2); `*mask*` inputs are all ones.
    pub vocab: u64,
}

impl InputSettings {
    /// Parses the shape arguments and reads the input file (if any). Errors are usage
    /// errors, as one line.
    pub fn resolve(&self) -> Result<Inputs, String> {
        let shape_args = self
            .input_shapes
            .iter()
            .map(|a| shape_args::parse(a))
            .collect::<Result<Vec<_>, _>>()?;
        Inputs::new(
            shape_args,
            self.inputs.as_deref(),
            self.seed.unwrap_or(0),
            self.vocab,
        )
    }
}
