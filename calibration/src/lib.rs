//! infopt-calibration: the data side of INT8 post-training quantization.
//!
//! * [`observer`]: [`RangeCollector`] receives every intermediate float tensor of every
//!   calibration run and keeps, per tensor, min/max and an |x| histogram that merges
//!   exactly ([`histogram`]): memory is `O(tensors × bins)` and the ranges do not depend
//!   on batch size, sample order or how partial collectors are merged.
//! * [`methods`]: [`Method`] turns those statistics into `amax` (MinMax, Percentile,
//!   Entropy as TensorRT does it, MSE); the formulas are in [`METHODS_DOC`].
//! * [`table`]: `ranges.json`, the versioned range table (amax, min, max, method and its
//!   parameters, sample counts, the model's SHA-256).
//! * [`cache`]: TensorRT calibration caches (write and read) and the files ONNX Runtime's
//!   `write_calibration_table` produces (read).
//! * [`Amax`]: what the `quantize-int8` pass reads; [`RangeTable::to_amax`] and
//!   [`ImportedRanges::to_amax`] reduce a table or an imported cache to it.
//! * [`derived`]: bounds for tensors a range table cannot name (made by the passes
//!   after it was computed), through the op that computes each.
//! * [`quantize`]: the `quantize-int8` pass (Q/DQ placement per target; register it with
//!   [`quantize::register`]).
//! * [`images`]: an image folder turned into model inputs, with the preprocessing declared
//!   in YAML.
//!
//! ```
//! use infopt_calibration::{Method, RangeCollector, RangeTable};
//! use infopt_runtime::HostTensor;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut collector = RangeCollector::new();
//! let t = HostTensor::from_vec(vec![4], vec![-1.0f32, 0.5, 2.0, -0.25])?;
//! collector.observe("conv1_out", &t);
//! let table = RangeTable::from_collector(&collector, Method::ENTROPY, b"model bytes")?;
//! assert!(table.tensors["conv1_out"].amax <= 2.0);
//! # Ok(()) }
//! ```

pub mod amax;
pub mod cache;
pub mod data_shapes;
pub mod data_source;
pub mod derived;
pub mod error;
pub mod full_range;
pub mod histogram;
pub mod images;
pub mod int8;
pub mod methods;
pub mod observer;
pub mod quantizable;
pub mod quantize;
pub mod run;
pub mod score_branch;
pub mod shard;
pub mod table;

pub use amax::Amax;
pub use cache::{CacheFormat, CalibratorName, ImportedRange, ImportedRanges, TrtCacheHeader};
pub use error::{CalibError, Result};
pub use histogram::{AbsHistogram, DEFAULT_BINS};
pub use images::{ImageFolder, ImageSpec};

pub use methods::Method;
pub use observer::{RangeCollector, TensorStats};
pub use table::{RangeTable, TensorRange};

/// The range methods and their formulas, for `infopt passes explain quantize-int8`.
pub const METHODS_DOC: &str = "\
Range methods (symmetric INT8: scale = amax / 127, q = clamp(round(x / scale), -127, 127)).
Statistics: per tensor min, max and a histogram of |x| with B bins (default 2048) over
[0, 2^e), 2^e the power of two above max|x|; bin width w = 2^e / B; h[0..n) the counts up
to the last non-empty bin; N = sum(h); m = max|x|. Growing the range merges bins by exact
factors of two, so counts (and every amax below) do not depend on batch size or order.
Every method returns at most m.

  minmax      amax = m.
  percentile  (p, default 99.99) k = smallest bin with h[0] + ... + h[k] >= p/100 * N;
              amax = min((k + 1) * w, m).
  entropy     TensorRT's KL-divergence calibration (levels L = 128, start_bin = 128).
              For i = i0 .. n, i0 the first bin >= start_bin * m / 2048 (start_bin
              counts bins of TensorRT's 2048-bin grid over [0, m]: the search starts at m/16):
                P = h[0..i) with the outliers h[i] + ... + h[n-1] added to P[i-1];
                Q = h[0..i) merged into L levels (bin j in level floor(j * L / i)), each
                    level's count spread evenly over its non-empty bins, empty bins 0;
                normalize P and Q; D(i) = sum over P_j > 0 of P_j * ln(P_j / Q_j)
                (infinite if some Q_j = 0 < P_j).
              i* = argmin D (ties: larger i); amax = min((i* + 0.5) * w, m).
              A candidate whose last bin is empty while outliers exist has D = infinity, so
              a sparse tail beyond 16x the bulk is not clipped (use percentile or mse).
  mse         (start_bin = 128) candidates a = (i + 0.5) * w for i = i0 .. n-1 (i0 as above);
              with s = a / 127 and bin centres c_j = (j + 0.5) * w:
              MSE(a) = sum_j h[j] * (c_j - s * min(round(c_j / s), 127))^2 / N;
              amax = min(argmin MSE (ties: smaller a), m).
  auto        per tensor, from the data. Outputs of bounded ops (Sigmoid, HardSigmoid,
              Softmax, Tanh, Clip with constant bounds): amax = m (their whole range
              carries meaning, a gate at 1 is no outlier). Others: the amax of minmax,
              percentile, entropy and mse with the least quantization error
              E(a) = sum_j h[j] * (x_j - s * min(round(x_j / s), 127))^2, x_j = min(c_j, m)
              (ties: that order). The range table names the winner per tensor.
";
