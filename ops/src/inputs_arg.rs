//! The input options shared by `optimize`, `bench` and `compare`: parsed
//! here, resolved by [`infopt_verify::inputs`].

pub use infopt_verify::inputs::{InputSource, Inputs, describe};

use crate::shape_args;

/// The input options shared by `bench` and `compare`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
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
    /// Arrays held by the caller instead of `inputs` (the Python API's dict of
    /// numpy arrays), with what the reports call them.
    #[serde(skip)]
    pub arrays: Option<(Vec<infopt_runtime::HostTensor>, String)>,
}

/// Generated integer inputs are drawn from [0, VOCAB).
pub const DEFAULT_VOCAB: u64 = 16;

impl Default for InputSettings {
    fn default() -> Self {
        InputSettings {
            input_shapes: Vec::new(),
            inputs: None,
            seed: None,
            vocab: DEFAULT_VOCAB,
            arrays: None,
        }
    }
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
        match &self.arrays {
            Some((arrays, origin)) => {
                Inputs::given(shape_args, arrays.clone(), origin.clone(), self.vocab)
            }
            None => Inputs::new(
                shape_args,
                self.inputs.as_deref(),
                self.seed.unwrap_or(0),
                self.vocab,
            ),
        }
    }
}
