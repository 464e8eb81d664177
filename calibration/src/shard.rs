//! Calibration spread over machines: shard `K` of `N` observes a fixed slice of the
//! data and writes its statistics (a *part*); merging the `N` parts gives the statistics
//! of one run over all the data, exactly, so the range table (and TensorRT cache) made
//! from them is byte for byte the one a single machine writes.
//!
//! Exact because every statistic is a function of the multiset of values seen: min and
//! max, counts, and histograms anchored at powers of two (see [`crate::histogram`]), whose
//! merge re-bins by exact factors of two. Floats are written in their shortest
//! round-tripping form, so a part read back holds the very bits that were observed.
//!
//! A part carries what decides whether it may be merged with others: the model's
//! SHA-256, the settings that change the statistics or the ranges (method, bins, input
//! shapes, preprocessing, backend, data), the shard index and count, the number of
//! samples in the whole dataset, and a SHA-256 of its statistics, so a part from another
//! model or setting, a missing or repeated shard, or an edited file is refused by name.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::histogram::AbsHistogram;
use crate::methods::Method;
use crate::observer::{RangeCollector, TensorStats};
use crate::table::sha256_hex;

/// `format` of a part file.
pub const PART_FORMAT: &str = "infopt-calibration-part";
/// The part schema this crate writes and reads.
pub const PART_SCHEMA_VERSION: u32 = 1;
/// Most shards a calibration may be split into.
pub const MAX_SHARDS: usize = 100_000;

/// Shard `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// Parses `K/N` (1 <= K <= N).
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || {
            format!(
                "--shard {text}: expected K/N with 1 <= K <= N <= {MAX_SHARDS} (shard K of N, e.g. 3/8)"
            )
        };
        let (k, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count): (usize, usize) = (
            k.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if index == 0 || index > count || count > MAX_SHARDS {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// The samples of this shard among `total`: contiguous, in dataset order, sizes
    /// differing by at most one, together covering `0..total` once.
    pub fn range(&self, total: usize) -> Range<usize> {
        let at = |k: usize| (total as u128 * k as u128 / self.count as u128) as usize;
        at(self.index - 1)..at(self.index)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// What the statistics and the ranges depend on besides the model and the data: parts
/// merge only when these are equal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartSettings {
    /// The range method and its parameters (the merge applies it).
    pub method: Method,
    pub histogram_bins: usize,
    /// False for min-max, which bins nothing.
    pub histograms: bool,
    /// The input shapes the samples were run at (`--input-shape`), as resolved.
    pub input_shapes: String,
    /// Where the samples come from: `arrays`, `images` (with the SHA-256 of the
    /// preprocessing file), or `random:N` (seeded).
    pub data: String,
    /// The backend that ran the model, with its version: another one computes other
    /// intermediate values.
    pub backend: String,
}

impl PartSettings {
    pub fn sha256(&self) -> String {
        sha256_hex(
            serde_json::to_string(self)
                .expect("settings always serialize")
                .as_bytes(),
        )
    }

    /// The first setting that differs from `other`, for messages.
    fn first_difference(&self, other: &PartSettings) -> String {
        let pair = |what: &str, a: String, b: String| format!("{what} {a} vs {b}");
        if self.method != other.method {
            let m = |m: &Method| serde_json::to_string(m).unwrap_or_default();
            return pair("method", m(&self.method), m(&other.method));
        }
        if self.histogram_bins != other.histogram_bins {
            return pair(
                "histogram bins",
                self.histogram_bins.to_string(),
                other.histogram_bins.to_string(),
            );
        }
        if self.input_shapes != other.input_shapes {
            return pair(
                "input shapes",
                self.input_shapes.clone(),
                other.input_shapes.clone(),
            );
        }
        if self.data != other.data {
            return pair("data", self.data.clone(), other.data.clone());
        }
        if self.backend != other.backend {
            return pair("backend", self.backend.clone(), other.backend.clone());
        }
        "settings".into()
    }
}

/// One tensor's statistics as written in a part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartTensor {
    /// Smallest and largest finite value (absent when none was seen).
    pub min: Option<f32>,
    pub max: Option<f32>,
    pub observations: u64,
    pub elements: u64,
    pub non_finite: u64,
    /// The histogram's top edge is `2^top_exponent` (absent: only zeros seen).
    pub top_exponent: Option<i32>,
    /// Non-empty histogram bins as `[index, count]`.
    pub bins: Vec<(usize, u64)>,
}

/// Where the shard's samples sit in the whole dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartData {
    /// Samples in the whole dataset (after `--samples`).
    pub total_samples: usize,
    /// This shard's samples: `first..end`.
    pub first: usize,
    pub end: usize,
    /// What the data was, for people.
    pub description: String,
    /// False for random data.
    pub meaningful: bool,
}

/// The statistics of one shard: `infopt calibrate --shard K/N -o part-K.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part {
    pub format: String,
    pub schema_version: u32,
    pub model_sha256: String,
    /// SHA-256 of `settings` (JSON): the quick equality check.
    pub settings_sha256: String,
    pub settings: PartSettings,
    pub shard: Shard,
    pub data: PartData,
    /// Samples observed.
    pub samples: usize,
    /// Tensors that keep their whole range under `auto`, with the reason.
    pub full_range: BTreeMap<String, String>,
    /// SHA-256 of `tensors` (JSON): a part edited or damaged after it was written is
    /// refused.
    pub stats_sha256: String,
    pub tensors: BTreeMap<String, PartTensor>,
}

fn stats_digest(tensors: &BTreeMap<String, PartTensor>) -> String {
    sha256_hex(
        serde_json::to_string(tensors)
            .expect("statistics always serialize")
            .as_bytes(),
    )
}

impl Part {
    /// The part of `collector` (the statistics of `shard`'s samples).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        collector: &RangeCollector,
        settings: PartSettings,
        model_sha256: String,
        shard: Shard,
        data: PartData,
        samples: usize,
        full_range: &BTreeMap<String, &'static str>,
    ) -> Part {
        let tensors: BTreeMap<String, PartTensor> = collector
            .iter()
            .map(|(name, s)| {
                let seen = s.elements > 0;
                let t = PartTensor {
                    min: seen.then_some(s.min),
                    max: seen.then_some(s.max),
                    observations: s.observations,
                    elements: s.elements,
                    non_finite: s.non_finite,
                    top_exponent: s.histogram.top_exponent(),
                    bins: s.histogram.nonzero(),
                };
                (name.to_string(), t)
            })
            .collect();
        Part {
            format: PART_FORMAT.into(),
            schema_version: PART_SCHEMA_VERSION,
            model_sha256,
            settings_sha256: settings.sha256(),
            settings,
            shard,
            data,
            samples,
            full_range: full_range
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
            stats_sha256: stats_digest(&tensors),
            tensors,
        }
    }

    /// The part as JSON (compact: a part holds up to `bins` counts per tensor).
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string(self).expect("a part always serializes");
        s.push('\n');
        s
    }

    /// Writes the part atomically (a temporary file renamed).
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        std::fs::write(&tmp, self.to_json())
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                format!("{}: {e}", path.display())
            })
    }

    /// Reads and checks a part; errors are one line naming the file.
    pub fn read(path: &Path) -> Result<Part, String> {
        let shown = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{shown}: not a calibration part (invalid JSON: {e})"))?;
        if value.get("format").and_then(|f| f.as_str()) != Some(PART_FORMAT) {
            return Err(format!(
                "{shown}: not a calibration part (no \"format\": \"{PART_FORMAT}\"; parts are written by infopt calibrate --shard K/N)"
            ));
        }
        let version = value.get("schema_version").and_then(|v| v.as_u64());
        if version != Some(u64::from(PART_SCHEMA_VERSION)) {
            return Err(format!(
                "{shown}: part schema version {} is not the {PART_SCHEMA_VERSION} this infopt reads; calibrate the shards with the same infopt",
                version.map_or("(none)".into(), |v| v.to_string())
            ));
        }
        let part: Part = serde_json::from_value(value)
            .map_err(|e| format!("{shown}: damaged calibration part ({e})"))?;
        let damaged = |why: String| {
            Err(format!(
                "{shown}: damaged calibration part ({why}); calibrate shard {} again",
                part.shard
            ))
        };
        if part.shard.index == 0 || part.shard.index > part.shard.count {
            return damaged(format!("shard {}", part.shard));
        }
        if stats_digest(&part.tensors) != part.stats_sha256 {
            return damaged(
                "its statistics do not match their SHA-256: edited or truncated".into(),
            );
        }
        if part.settings.sha256() != part.settings_sha256 {
            return damaged("its settings do not match their SHA-256".into());
        }
        let expected = part.shard.range(part.data.total_samples);
        if (part.data.first..part.data.end) != expected || part.samples != expected.len() {
            return damaged(format!(
                "samples {}..{} ({} observed) are not shard {}'s {}..{} of {}",
                part.data.first,
                part.data.end,
                part.samples,
                part.shard,
                expected.start,
                expected.end,
                part.data.total_samples
            ));
        }
        Ok(part)
    }

    /// The statistics as a collector.
    fn collector(&self, shown: &str) -> Result<RangeCollector, String> {
        let bins = self.settings.histogram_bins;
        let mut tensors = BTreeMap::new();
        for (name, t) in &self.tensors {
            let bad =
                |why: &str| format!("{shown}: damaged calibration part (tensor `{name}`: {why})");
            let histogram = AbsHistogram::from_parts(bins, t.top_exponent, &t.bins)
                .map_err(|e| bad(&e.to_string()))?;
            let (min, max) = match (t.min, t.max, t.elements) {
                (None, None, 0) => (f32::INFINITY, f32::NEG_INFINITY),
                (Some(lo), Some(hi), n) if n > 0 && lo <= hi => (lo, hi),
                _ => return Err(bad("min, max and the element count disagree")),
            };
            let counted = histogram.total();
            if (self.settings.histograms && counted != t.elements)
                || (!self.settings.histograms && counted != 0)
            {
                return Err(bad("the histogram does not count the elements"));
            }
            tensors.insert(
                name.clone(),
                TensorStats {
                    min,
                    max,
                    observations: t.observations,
                    elements: t.elements,
                    non_finite: t.non_finite,
                    histogram,
                },
            );
        }
        RangeCollector::from_stats(bins, self.settings.histograms, tensors)
            .map_err(|e| format!("{shown}: damaged calibration part ({e})"))
    }
}

/// The statistics of every shard, merged.
#[derive(Debug)]
pub struct Merged {
    pub collector: RangeCollector,
    pub settings: PartSettings,
    pub model_sha256: String,
    pub full_range: BTreeMap<String, &'static str>,
    /// Samples over all shards.
    pub samples: usize,
    pub shards: usize,
    /// The data, as the first shard described it.
    pub description: String,
    pub meaningful: bool,
}

/// Merges the parts at `paths` (any order). Refuses, naming the file: a part from
/// another model (than `model_sha256` when given, else than the first part), with other
/// settings, of another split, a shard given twice, or a missing one.
pub fn merge(paths: &[PathBuf], model_sha256: Option<&str>) -> Result<Merged, String> {
    let Some(first_path) = paths.first() else {
        return Err("--merge needs the part files of every shard".into());
    };
    let mut parts: Vec<(String, Part)> = Vec::with_capacity(paths.len());
    for p in paths {
        parts.push((p.display().to_string(), Part::read(p)?));
    }
    let (first_name, first) = &parts[0];
    let _ = first_path;
    if let Some(want) = model_sha256
        && first.model_sha256 != want
    {
        return Err(format!(
            "{first_name} was calibrated on another model (SHA-256 {}…, this model's is {}…)",
            short(&first.model_sha256),
            short(want)
        ));
    }
    let mut by_index: BTreeMap<usize, &str> = BTreeMap::new();
    for (name, part) in &parts {
        if part.model_sha256 != first.model_sha256 {
            return Err(format!(
                "{name} was calibrated on another model than {first_name} (SHA-256 {}… vs {}…)",
                short(&part.model_sha256),
                short(&first.model_sha256)
            ));
        }
        if part.settings_sha256 != first.settings_sha256 {
            return Err(format!(
                "{name} was calibrated with other settings than {first_name} ({}); calibrate every shard with the same options",
                part.settings.first_difference(&first.settings)
            ));
        }
        if part.shard.count != first.shard.count
            || part.data.total_samples != first.data.total_samples
        {
            return Err(format!(
                "{name} is shard {} of {} samples, {first_name} shard {} of {}: parts of different splits",
                part.shard, part.data.total_samples, first.shard, first.data.total_samples
            ));
        }
        if let Some(other) = by_index.insert(part.shard.index, name) {
            return Err(format!(
                "shard {} is given twice ({other} and {name})",
                part.shard
            ));
        }
    }
    let count = first.shard.count;
    let missing: Vec<String> = (1..=count)
        .filter(|k| !by_index.contains_key(k))
        .map(|k| format!("{k}/{count}"))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "shard{} {} {} missing: give every part of the {count} (calibrate --shard {} -o ...)",
            if missing.len() == 1 { "" } else { "s" },
            list(&missing),
            if missing.len() == 1 { "is" } else { "are" },
            missing[0]
        ));
    }
    // Shard order: the merge is exact in any order, this one is just fixed.
    parts.sort_by_key(|(_, p)| p.shard.index);
    let mut collector: Option<RangeCollector> = None;
    let mut samples = 0;
    for (name, part) in &parts {
        let c = part.collector(name)?;
        samples += part.samples;
        match collector.as_mut() {
            None => collector = Some(c),
            Some(all) => all.merge(c).map_err(|e| format!("{name}: {e}"))?,
        }
    }
    let first = &parts[0].1;
    let mut full_range = BTreeMap::new();
    for (tensor, why) in &first.full_range {
        let Some(why) = crate::full_range::reason_named(why) else {
            return Err(format!(
                "{}: damaged calibration part (unknown full-range reason {why:?} for `{tensor}`)",
                parts[0].0
            ));
        };
        full_range.insert(tensor.clone(), why);
    }
    Ok(Merged {
        collector: collector.expect("at least one part"),
        settings: first.settings.clone(),
        model_sha256: first.model_sha256.clone(),
        full_range,
        samples,
        shards: count,
        description: first.data.description.clone(),
        meaningful: first.data.meaningful,
    })
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// "1/7, 3/7" with at most 10 named.
fn list(items: &[String]) -> String {
    if items.len() <= 10 {
        items.join(", ")
    } else {
        format!("{}, ... ({} in all)", items[..10].join(", "), items.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_every_sample_once_in_order() {
        for total in [0usize, 1, 5, 7, 1024, 1000] {
            for count in [1usize, 2, 3, 7, 8, 13] {
                let mut next = 0;
                for index in 1..=count {
                    let r = Shard { index, count }.range(total);
                    assert_eq!(r.start, next, "{index}/{count} of {total}");
                    assert!(r.len() <= total.div_ceil(count));
                    next = r.end;
                }
                assert_eq!(next, total);
            }
        }
    }

    #[test]
    fn shard_parses_k_of_n_and_refuses_the_rest() {
        assert_eq!(Shard::parse("3/8"), Ok(Shard { index: 3, count: 8 }));
        assert_eq!(Shard::parse("1/1"), Ok(Shard { index: 1, count: 1 }));
        for bad in ["0/3", "4/3", "3", "a/b", "1/0", "-1/2", "1/100001"] {
            let e = Shard::parse(bad).unwrap_err();
            assert!(
                e.starts_with(&format!("--shard {bad}: expected K/N")),
                "{e}"
            );
        }
    }

    #[test]
    fn a_collector_round_trips_through_a_part_exactly() {
        let mut c = RangeCollector::with_bins(256).unwrap();
        let xs: Vec<f32> = (0..5000)
            .map(|i| ((i * 7919) % 1000) as f32 * 1.37e-3 - 0.3)
            .chain([-0.0, 0.0, f32::NAN, f32::INFINITY, 1e-40])
            .collect();
        let t = |xs: Vec<f32>| infopt_runtime::HostTensor::from_vec(vec![xs.len()], xs).unwrap();
        c.observe("t", &t(xs));
        c.observe("zeros", &t(vec![0.0; 3]));
        let settings = PartSettings {
            method: Method::ENTROPY,
            histogram_bins: 256,
            histograms: true,
            input_shapes: String::new(),
            data: "arrays".into(),
            backend: "tract".into(),
        };
        let part = Part::new(
            &c,
            settings,
            "ab".repeat(32),
            Shard { index: 1, count: 1 },
            PartData {
                total_samples: 1,
                first: 0,
                end: 1,
                description: "test".into(),
                meaningful: true,
            },
            1,
            &BTreeMap::new(),
        );
        let back: Part = serde_json::from_str(&part.to_json()).unwrap();
        assert_eq!(back, part);
        assert_eq!(back.collector("p").unwrap(), c);
    }
}
