//! `ranges.json`: the range table a calibration run produces and `quantize-int8` reads.
//!
//! ```json
//! {
//!   "schema_version": 1,
//!   "model_sha256": "9f86d0…",
//!   "method": { "name": "percentile", "percentile": 99.99 },
//!   "histogram_bins": 2048,
//!   "tensors": {
//!     "conv1_out": { "amax": 3.91, "min": -4.2, "max": 5.7, "method": "percentile",
//!                    "samples": 64, "elements": 802816, "non_finite": 0 }
//!   }
//! }
//! ```
//! Tensors are sorted by name; floats are written in their shortest round-tripping form,
//! so a table read back is bit-identical to the one written.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::amax::Amax;
use crate::error::{CalibError, Result};
use crate::methods::Method;
use crate::observer::{RangeCollector, TensorStats, parallel_pieces};

/// The schema this crate writes and the newest it reads.
pub const SCHEMA_VERSION: u32 = 1;

/// Ranges of every calibrated tensor, with what produced them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RangeTable {
    pub schema_version: u32,
    /// SHA-256 of the model file the ranges were collected on (lower-case hex), so a table
    /// is not applied to another model by mistake.
    pub model_sha256: String,
    /// The method and its parameters.
    pub method: Method,
    /// Histogram bins used by the observers.
    pub histogram_bins: usize,
    pub tensors: BTreeMap<String, TensorRange>,
}

/// One tensor's range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorRange {
    /// Symmetric clipping threshold: `scale = amax / 127`.
    pub amax: f32,
    /// Smallest and largest finite value observed (0 when none was).
    pub min: f32,
    pub max: f32,
    /// Name of the method that chose `amax` (a table may mix methods, e.g. after edits).
    pub method: String,
    /// Observations (model runs) of this tensor.
    pub samples: u64,
    /// Finite elements counted.
    #[serde(default)]
    pub elements: u64,
    /// NaN/inf elements skipped.
    #[serde(default)]
    pub non_finite: u64,
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl RangeTable {
    /// Applies `method` to every tensor of `collector`; `model` is the model file's bytes.
    pub fn from_collector(
        collector: &RangeCollector,
        method: Method,
        model: &[u8],
    ) -> Result<RangeTable> {
        RangeTable::from_collector_hashed(collector, method, sha256_hex(model))
    }

    /// [`from_collector`](Self::from_collector) with the model's SHA-256 (lower-case
    /// hex, see [`sha256_hex`]) already computed, e.g. while the file was read.
    pub fn from_collector_hashed(
        collector: &RangeCollector,
        method: Method,
        model_sha256: String,
    ) -> Result<RangeTable> {
        RangeTable::from_collector_bounded(collector, method, model_sha256, &|_| None)
    }

    /// [`from_collector_hashed`](Self::from_collector_hashed), where
    /// `full_range(name)` says which tensors keep their whole range under
    /// [`Method::Auto`], and why (see [`crate::full_range`]); each range
    /// records the method that chose it.
    pub fn from_collector_bounded(
        collector: &RangeCollector,
        method: Method,
        model_sha256: String,
        full_range: &(dyn Fn(&str) -> Option<&'static str> + Sync),
    ) -> Result<RangeTable> {
        method.validate()?;
        let range_of = |name: &str, stats: &TensorStats| {
            let none = stats.elements == 0;
            let (amax, chosen) = method.choose_keeping(stats, full_range(name));
            TensorRange {
                amax,
                min: if none { 0.0 } else { stats.min },
                max: if none { 0.0 } else { stats.max },
                method: chosen.to_string(),
                samples: stats.observations,
                elements: stats.elements,
                non_finite: stats.non_finite,
            }
        };
        // Each tensor's choice is its own: split over the CPU's threads
        // (auto weighs four candidates on every histogram, 0.5 s for
        // EfficientNet-B0's 239 tensors on one thread). The table is the
        // same whatever the split.
        let all: Vec<(&str, &TensorStats)> = collector.iter().collect();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let ranges = parallel_pieces(&all, threads, &|(n, st)| range_of(n, st));
        let tensors = all.iter().map(|(n, _)| n.to_string()).zip(ranges).collect();
        Ok(RangeTable {
            schema_version: SCHEMA_VERSION,
            model_sha256,
            method,
            histogram_bins: collector.bins(),
            tensors,
        })
    }

    /// The table as pretty JSON (ends with a newline).
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a range table always serializes");
        s.push('\n');
        s
    }

    /// Parses a table; `path` only names the source in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<RangeTable> {
        // Read the version first, so a newer file gets a version error rather than a
        // confusing complaint about a field this version does not know.
        #[derive(Deserialize)]
        struct Version {
            schema_version: Option<u32>,
        }
        let version: Version = serde_json::from_str(text).map_err(|e| json_error(path, &e))?;
        match version.schema_version {
            Some(SCHEMA_VERSION) => {}
            Some(v) => {
                return Err(CalibError::parse(
                    path,
                    0,
                    format!(
                        "range table schema_version {v} is not supported (this infopt reads {SCHEMA_VERSION}); recalibrate or upgrade infopt"
                    ),
                ));
            }
            None => {
                return Err(CalibError::parse(
                    path,
                    0,
                    "not a range table: no schema_version (TensorRT caches and ONNX Runtime tables are read with `cache::read_ranges`)",
                ));
            }
        }
        let table: RangeTable = serde_json::from_str(text).map_err(|e| json_error(path, &e))?;
        for (name, r) in &table.tensors {
            if !(r.amax.is_finite() && r.amax >= 0.0) {
                return Err(CalibError::parse(
                    path,
                    0,
                    format!(
                        "tensor '{name}': amax must be finite and >= 0, got {}",
                        r.amax
                    ),
                ));
            }
        }
        Ok(table)
    }

    pub fn read(path: &Path) -> Result<RangeTable> {
        let text = std::fs::read_to_string(path).map_err(|source| CalibError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        RangeTable::from_json(&text, path)
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        std::fs::write(path, self.to_json()).map_err(|source| CalibError::Write {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The per-tensor thresholds for `quantize-int8`. Tensors with `amax` 0 (no finite
    /// value, or only zeros) are left out: they have no usable scale.
    pub fn to_amax(&self) -> Amax {
        Amax(
            self.tensors
                .iter()
                .filter(|(_, r)| r.amax > 0.0)
                .map(|(n, r)| (n.clone(), r.amax))
                .collect(),
        )
    }

    /// `Err` naming both hashes when the table was collected on another model.
    pub fn check_model(&self, model: &[u8], table_path: &Path) -> Result<()> {
        let actual = sha256_hex(model);
        if actual == self.model_sha256 {
            Ok(())
        } else {
            Err(CalibError::parse(
                table_path,
                0,
                format!(
                    "ranges were collected on a model with sha256 {}, this model's is {actual}; recalibrate on this model",
                    self.model_sha256
                ),
            ))
        }
    }
}

/// A serde_json error as a one-line parse error with its line.
pub(crate) fn json_error(path: &Path, e: &serde_json::Error) -> CalibError {
    let msg = e.to_string();
    // serde_json appends " at line L column C"; the line goes into the location instead.
    let msg = match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg,
    };
    CalibError::parse(path, e.line(), format!("{msg} (column {})", e.column()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_runtime::HostTensor;

    fn collector() -> RangeCollector {
        let mut c = RangeCollector::new();
        c.observe(
            "b",
            &HostTensor::from_vec(vec![3], vec![-1.5f32, 0.1, 2.75]).unwrap(),
        );
        c.observe(
            "a",
            &HostTensor::from_vec(vec![2], vec![0.3f32, f32::NAN]).unwrap(),
        );
        c.observe("a", &HostTensor::from_vec(vec![1], vec![0.7f32]).unwrap());
        c
    }

    #[test]
    fn round_trips_bit_identically() {
        let t = RangeTable::from_collector(&collector(), Method::PERCENTILE, b"abc").unwrap();
        assert_eq!(
            t.model_sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(t.tensors.len(), 2);
        let a = &t.tensors["a"];
        assert_eq!(
            (a.min, a.max, a.samples, a.elements, a.non_finite),
            (0.3, 0.7, 2, 2, 1)
        );
        assert_eq!(t.tensors["b"].method, "percentile");
        let amax = t.to_amax();
        assert_eq!(amax.len(), 2);
        assert_eq!(amax.get("a"), Some(t.tensors["a"].amax));
        let json = t.to_json();
        assert!(json.contains("\"schema_version\": 1"), "{json}");
        assert!(json.contains("\"percentile\": 99.99"), "{json}");
        let back = RangeTable::from_json(&json, Path::new("ranges.json")).unwrap();
        assert_eq!(back, t);
        // On disk too.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ranges.json");
        t.write(&p).unwrap();
        assert_eq!(RangeTable::read(&p).unwrap(), t);
        assert!(t.check_model(b"abc", &p).is_ok());
        let err = t.check_model(b"abd", &p).unwrap_err().to_string();
        assert!(err.contains("recalibrate"), "{err}");
    }

    #[test]
    fn malformed_tables_get_one_line_errors_with_line_numbers() {
        let p = Path::new("r.json");
        let t = RangeTable::from_collector(&collector(), Method::MinMax, b"m").unwrap();
        let json = t.to_json();
        let bad = json.replacen("\"amax\": ", "\"amax\": \"x\", \"y\": ", 1);
        let err = RangeTable::from_json(&bad, p).unwrap_err().to_string();
        assert!(err.starts_with("r.json:"), "{err}");
        assert!(!err.contains('\n'), "{err}");
        let line = err.split(':').nth(1).unwrap().parse::<usize>().unwrap();
        assert!(line > 1, "{err}");
        let newer = json.replace("\"schema_version\": 1", "\"schema_version\": 9");
        let err = RangeTable::from_json(&newer, p).unwrap_err().to_string();
        assert!(err.contains("schema_version 9"), "{err}");
        let err = RangeTable::from_json("{\"x\": 1.0}", p)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no schema_version"), "{err}");
        let err = RangeTable::from_json("{", p).unwrap_err().to_string();
        assert!(err.starts_with("r.json:1:"), "{err}");
        let negative = json.replacen("\"amax\": ", "\"amax\": -", 1);
        let err = RangeTable::from_json(&negative, p).unwrap_err().to_string();
        assert!(err.contains("amax must be finite"), "{err}");
    }
}
