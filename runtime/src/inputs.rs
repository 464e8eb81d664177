//! Seeded, deterministic input generation.
//!
//! Each input draws from its own SplitMix64 stream, seeded from the run seed and the
//! input's name, so an input's values depend only on (seed, name, dtype, shape): adding,
//! removing or reordering other inputs does not change them, and every platform produces
//! the same bits.
//!
//! Values: floats uniform in [-1, 1) (drawn in f32 for f16/bf16, then rounded); integers
//! uniform in [0, vocab) (token ids, indices: small and non-negative, so they are valid for
//! a Gather on a table of at least `vocab` rows); booleans all `true` (masks that keep
//! everything).

use std::collections::BTreeMap;

use half::{bf16, f16};

use crate::backend::{IoSpec, LoadedModel};
use crate::error::{Result, RuntimeError};
use crate::tensor::{DType, HostTensor, TensorData, element_count};

/// Options of [`generate_inputs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputGen {
    pub seed: u64,
    /// Integers are drawn from `[0, vocab)` (clamped to the type's range). Must be ≥ 1.
    pub vocab: u64,
    /// Per-input range, by input name, overriding `vocab` (e.g. `token_type_ids` → 2).
    pub vocab_overrides: BTreeMap<String, u64>,
}

impl Default for InputGen {
    fn default() -> Self {
        InputGen {
            seed: 0,
            vocab: 16,
            vocab_overrides: BTreeMap::new(),
        }
    }
}

impl InputGen {
    pub fn with_seed(seed: u64) -> InputGen {
        InputGen {
            seed,
            ..InputGen::default()
        }
    }

    /// Sets the integer range of one input, builder style.
    pub fn with_vocab_for(mut self, input: impl Into<String>, vocab: u64) -> InputGen {
        self.vocab_overrides.insert(input.into(), vocab);
        self
    }

    /// The integer range used for `input`.
    pub fn vocab_of(&self, input: &str) -> u64 {
        self.vocab_overrides
            .get(input)
            .copied()
            .unwrap_or(self.vocab)
    }
}

/// SplitMix64: a tiny, statistically decent 64-bit generator with a fixed definition.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1), on the 2^-23 grid (every value exact in f32).
    pub fn next_f32(&mut self) -> f32 {
        let bits = (self.next_u64() >> 40) as u32; // 24 bits
        (bits as f32) * (1.0 / (1u32 << 23) as f32) - 1.0
    }

    /// Uniform in [-1, 1), on the 2^-52 grid.
    pub fn next_f64(&mut self) -> f64 {
        let bits = self.next_u64() >> 11; // 53 bits
        (bits as f64) * (1.0 / (1u64 << 52) as f64) - 1.0
    }

    /// Uniform in [0, n) for n ≥ 1 (Lemire's multiply-shift; the bias is below 2^-32 for
    /// the small ranges used here).
    pub fn next_below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// FNV-1a of the name, to separate the streams of different inputs.
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// One tensor of the given dtype and shape, filled from the stream of (seed, name).
pub fn generate_tensor(
    name: &str,
    dtype: DType,
    shape: &[usize],
    opts: &InputGen,
) -> Result<HostTensor> {
    let vocab = opts.vocab_of(name);
    if vocab == 0 {
        return Err(RuntimeError::InvalidArgument(format!(
            "input `{name}`: the integer input range (vocab) must be at least 1"
        )));
    }
    let n = element_count(shape).ok_or_else(|| RuntimeError::InvalidTensor {
        name: name.to_string(),
        message: format!("shape {shape:?} overflows the address space"),
    })?;
    let mut rng = SplitMix64::new(SplitMix64::new(opts.seed ^ name_hash(name)).next_u64());
    macro_rules! ints {
        ($t:ty, $variant:ident) => {{
            let hi = vocab.min(<$t>::MAX as u64);
            TensorData::$variant((0..n).map(|_| rng.next_below(hi) as $t).collect())
        }};
    }
    let data = match dtype {
        DType::F32 => TensorData::F32((0..n).map(|_| rng.next_f32()).collect()),
        DType::F64 => TensorData::F64((0..n).map(|_| rng.next_f64()).collect()),
        DType::F16 => TensorData::F16((0..n).map(|_| f16::from_f32(rng.next_f32())).collect()),
        DType::BF16 => TensorData::BF16((0..n).map(|_| bf16::from_f32(rng.next_f32())).collect()),
        DType::I8 => ints!(i8, I8),
        DType::I16 => ints!(i16, I16),
        DType::I32 => ints!(i32, I32),
        DType::I64 => ints!(i64, I64),
        DType::U8 => ints!(u8, U8),
        DType::U16 => ints!(u16, U16),
        DType::U32 => ints!(u32, U32),
        DType::U64 => ints!(u64, U64),
        DType::Bool => TensorData::Bool(vec![true; n]),
    };
    HostTensor::new(Some(name.to_string()), shape.to_vec(), data)
}

/// One named tensor per spec, with the matching concrete shape.
pub fn generate_inputs(
    specs: &[IoSpec],
    shapes: &[Vec<usize>],
    opts: &InputGen,
) -> Result<Vec<HostTensor>> {
    if specs.len() != shapes.len() {
        return Err(RuntimeError::InvalidArgument(format!(
            "{} input specs but {} shapes",
            specs.len(),
            shapes.len()
        )));
    }
    specs
        .iter()
        .zip(shapes)
        .map(|(s, dims)| generate_tensor(&s.name, s.dtype, dims, opts))
        .collect()
}

/// Inputs for a loaded model, with the concrete shapes it was loaded for.
pub fn generate_for_model(model: &dyn LoadedModel, opts: &InputGen) -> Result<Vec<HostTensor>> {
    generate_inputs(model.inputs(), &model.input_shapes(), opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference_values() {
        // Reference outputs of SplitMix64 seeded with 0 (Vigna's splitmix64.c).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn ranges() {
        let mut r = SplitMix64::new(42);
        for _ in 0..10_000 {
            let f = r.next_f32();
            assert!((-1.0..1.0).contains(&f));
            let d = r.next_f64();
            assert!((-1.0..1.0).contains(&d));
            assert!(r.next_below(16) < 16);
        }
    }

    #[test]
    fn int_range_clamps_to_type() {
        let opts = InputGen {
            seed: 1,
            vocab: 1000,
            ..InputGen::default()
        };
        let t = generate_tensor("ids", DType::I8, &[256], &opts).unwrap();
        assert!(t.as_slice::<i8>().unwrap().iter().all(|&v| v >= 0));
        let opts = opts.with_vocab_for("types", 2);
        let t = generate_tensor("types", DType::I64, &[64], &opts).unwrap();
        assert!(
            t.as_slice::<i64>()
                .unwrap()
                .iter()
                .all(|&v| v == 0 || v == 1)
        );
        assert!(
            generate_tensor(
                "x",
                DType::I8,
                &[1],
                &InputGen {
                    vocab: 0,
                    ..InputGen::default()
                }
            )
            .is_err()
        );
    }
}
