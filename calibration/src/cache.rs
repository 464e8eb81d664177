//! TensorRT calibration caches, and reading every range format users bring along.
//!
//! **TensorRT cache** (what `IInt8Calibrator::writeCalibrationCache` receives, what
//! Polygraphy's `--calibration-cache` and trtexec's `--calib` store): a text file whose first
//! line is `TRT-<version>-<calibrator>`, `<version>` being TensorRT's version as an integer
//! (`major·10000 + minor·100 + patch` from TensorRT 10 on, e.g. `100300` for 10.3.0;
//! `major·1000 + minor·100 + patch` before, e.g. `8601` for 8.6.1) and `<calibrator>` the
//! algorithm (`EntropyCalibration2`, `EntropyCalibration`, `MinMaxCalibration`,
//! `LegacyCalibration`). Then one line per tensor, `name: hhhhhhhh`, the big-endian hex of
//! the IEEE-754 bits of the f32 `scale = amax / 127` (`3c010204` is 1/127: amax 1.0).
//! TensorRT discards a cache whose header names another calibrator than the one it was
//! given, and trtexec always uses EntropyCalibration2: that is our default header whatever
//! method chose the ranges.
//!
//! **ONNX Runtime** `write_calibration_table` writes three files: `calibration.json`
//! (`{name: {"lowest": v, "highest": v, "CLS": "TensorData", …}}`, where `v` is a number or
//! `{"data": number, "dtype": …, "CLS": "numpy.array"}`), `calibration.cache` (no header;
//! `name value` lines, `value = max(highest, lowest)` in decimal) and
//! `calibration.flatbuffers` (a `TrtTable` of key/value strings holding the same decimal
//! value). All three are read.
//!
//! [`read_ranges`] also takes infopt's own `ranges.json` and plain JSON maps
//! `{name: amax}` or `{name: [min, max]}`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::amax::Amax;
use crate::error::{CalibError, Result};
use crate::table::{RangeTable, json_error};

/// INT8 scale denominator of TensorRT's symmetric quantization.
const QMAX: f32 = 127.0;

/// The calibration algorithm named in a TensorRT cache header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CalibratorName {
    EntropyCalibration2,
    EntropyCalibration,
    MinMaxCalibration,
    LegacyCalibration,
}

impl CalibratorName {
    pub const ALL: [CalibratorName; 4] = [
        CalibratorName::EntropyCalibration2,
        CalibratorName::EntropyCalibration,
        CalibratorName::MinMaxCalibration,
        CalibratorName::LegacyCalibration,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CalibratorName::EntropyCalibration2 => "EntropyCalibration2",
            CalibratorName::EntropyCalibration => "EntropyCalibration",
            CalibratorName::MinMaxCalibration => "MinMaxCalibration",
            CalibratorName::LegacyCalibration => "LegacyCalibration",
        }
    }

    pub fn parse(s: &str) -> Option<CalibratorName> {
        CalibratorName::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// The first line of a TensorRT cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrtCacheHeader {
    /// TensorRT's version as an integer, e.g. 100300 for 10.3.0.
    pub version: u32,
    pub calibrator: CalibratorName,
}

impl Default for TrtCacheHeader {
    /// TensorRT 10.3.0, EntropyCalibration2.
    fn default() -> Self {
        TrtCacheHeader {
            version: 100300,
            calibrator: CalibratorName::EntropyCalibration2,
        }
    }
}

impl fmt::Display for TrtCacheHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TRT-{}-{}", self.version, self.calibrator.as_str())
    }
}

/// TensorRT's integer version for `major.minor.patch` (`"10.3.0"` → 100300, `"8.6.1"` →
/// 8601); a missing patch is 0.
pub fn trt_version_code(version: &str) -> Result<u32> {
    let bad = || {
        CalibError::Config(format!(
            "TensorRT version '{version}' is not major.minor[.patch] (e.g. 10.3.0)"
        ))
    };
    let parts: Vec<u32> = version
        .trim()
        .split('.')
        .map(|p| p.parse::<u32>().map_err(|_| bad()))
        .collect::<Result<_>>()?;
    let (major, minor, patch) = match parts[..] {
        [a, b] => (a, b, 0),
        [a, b, c] => (a, b, c),
        _ => return Err(bad()),
    };
    if minor > 99 || patch > 99 {
        return Err(bad());
    }
    Ok(if major >= 10 {
        major * 10000 + minor * 100 + patch
    } else {
        major * 1000 + minor * 100 + patch
    })
}

/// The cache line value for `amax`: hex of the f32 bits of `amax / 127`.
pub fn scale_hex(amax: f32) -> String {
    format!("{:08x}", (amax / QMAX).to_bits())
}

/// A TensorRT calibration cache for every tensor of `table`, in name order.
pub fn trt_cache_text(table: &RangeTable, header: TrtCacheHeader) -> String {
    let mut s = format!("{header}\n");
    for (name, r) in &table.tensors {
        s.push_str(&format!("{name}: {}\n", scale_hex(r.amax)));
    }
    s
}

pub fn write_trt_cache(table: &RangeTable, header: TrtCacheHeader, path: &Path) -> Result<()> {
    std::fs::write(path, trt_cache_text(table, header)).map_err(|source| CalibError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Which format [`read_ranges`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum CacheFormat {
    TensorRt(TrtCacheHeader),
    /// ONNX Runtime's `calibration.cache` (`name value` lines).
    OrtText,
    /// ONNX Runtime's `calibration.flatbuffers`.
    OrtFlatbuffers,
    /// A JSON map: ONNX Runtime's `calibration.json`, `{name: amax}` or `{name: [min, max]}`.
    JsonMap,
    /// infopt's `ranges.json`.
    RangeTable,
}

/// One tensor's range as a file states it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImportedRange {
    /// Symmetric threshold (for min/max forms: `max(|min|, |max|)`).
    pub amax: f32,
    /// Present when the file gives them.
    pub min: Option<f32>,
    pub max: Option<f32>,
}

impl ImportedRange {
    fn amax(amax: f32) -> ImportedRange {
        ImportedRange {
            amax,
            min: None,
            max: None,
        }
    }
    fn min_max(min: f32, max: f32) -> ImportedRange {
        ImportedRange {
            amax: min.abs().max(max.abs()),
            min: Some(min),
            max: Some(max),
        }
    }
}

/// Ranges read from a file, by tensor name.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedRanges {
    pub format: CacheFormat,
    pub ranges: BTreeMap<String, ImportedRange>,
}

impl ImportedRanges {
    /// The per-tensor thresholds for `quantize-int8`; zero ranges are left out (no
    /// usable scale).
    pub fn to_amax(&self) -> Amax {
        Amax(
            self.ranges
                .iter()
                .filter(|(_, r)| r.amax > 0.0)
                .map(|(n, r)| (n.clone(), r.amax))
                .collect(),
        )
    }
}

/// Reads ranges from any supported file (format detected from the content).
pub fn read_ranges(path: &Path) -> Result<ImportedRanges> {
    let bytes = std::fs::read(path).map_err(|source| CalibError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_ranges(&bytes, path)
}

/// Parses ranges from `bytes`; `path` only names the source in errors.
pub fn parse_ranges(bytes: &[u8], path: &Path) -> Result<ImportedRanges> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return parse_ort_flatbuffers(bytes, path);
    };
    let trimmed = text.trim_start();
    let ranges = if trimmed.starts_with("TRT-") {
        return parse_trt_cache(text, path);
    } else if trimmed.starts_with('{') {
        if text.contains("\"schema_version\"") {
            let table = RangeTable::from_json(text, path)?;
            let ranges = table
                .tensors
                .into_iter()
                .map(|(n, r)| {
                    let range = ImportedRange {
                        amax: r.amax,
                        min: Some(r.min),
                        max: Some(r.max),
                    };
                    (n, range)
                })
                .collect();
            return Ok(ImportedRanges {
                format: CacheFormat::RangeTable,
                ranges,
            });
        }
        let map: BTreeMap<String, JsonEntry> =
            serde_json::from_str(text).map_err(|e| json_error(path, &e))?;
        let ranges = map.into_iter().map(|(n, e)| (n, e.0)).collect();
        (CacheFormat::JsonMap, ranges)
    } else if looks_like_flatbuffer(bytes) {
        return parse_ort_flatbuffers(bytes, path);
    } else {
        (CacheFormat::OrtText, parse_ort_text(text, path)?)
    };
    let (format, ranges) = ranges;
    check_ranges(&ranges, path)?;
    Ok(ImportedRanges { format, ranges })
}

fn check_ranges(ranges: &BTreeMap<String, ImportedRange>, path: &Path) -> Result<()> {
    for (name, r) in ranges {
        if !r.amax.is_finite() {
            return Err(CalibError::parse(
                path,
                0,
                format!("tensor '{name}': range {} is not finite", r.amax),
            ));
        }
    }
    Ok(())
}

fn parse_trt_cache(text: &str, path: &Path) -> Result<ImportedRanges> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (i, first) = lines.next().unwrap_or((0, ""));
    let header = parse_header(first.trim())
        .ok_or_else(|| {
            CalibError::parse(
                path,
                i + 1,
                format!(
                    "'{}' is not a TensorRT cache header; expected TRT-<version>-<calibrator>, e.g. TRT-100300-EntropyCalibration2",
                    first.trim()
                ),
            )
        })?;
    let mut ranges = BTreeMap::new();
    for (i, line) in lines {
        let line = line.trim_end();
        let err = |msg: String| CalibError::parse(path, i + 1, msg);
        let (name, hex) = line
            .rsplit_once(": ")
            .ok_or_else(|| err(format!("expected 'tensor_name: hex_scale', got '{line}'")))?;
        let hex = hex.trim();
        let bits = (hex.len() <= 8)
            .then(|| u32::from_str_radix(hex, 16).ok())
            .flatten()
            .ok_or_else(|| {
                err(format!(
                    "tensor '{name}': '{hex}' is not the hex of a float32 scale (up to 8 hex digits)"
                ))
            })?;
        let scale = f32::from_bits(bits);
        if !(scale.is_finite() && scale >= 0.0) {
            return Err(err(format!(
                "tensor '{name}': scale {scale} must be finite and >= 0"
            )));
        }
        if ranges
            .insert(name.to_string(), ImportedRange::amax(scale * QMAX))
            .is_some()
        {
            return Err(err(format!("tensor '{name}' appears twice")));
        }
    }
    Ok(ImportedRanges {
        format: CacheFormat::TensorRt(header),
        ranges,
    })
}

fn parse_header(line: &str) -> Option<TrtCacheHeader> {
    let rest = line.strip_prefix("TRT-")?;
    let (version, name) = rest.split_once('-')?;
    Some(TrtCacheHeader {
        version: version.parse().ok()?,
        calibrator: CalibratorName::parse(name)?,
    })
}

fn parse_ort_text(text: &str, path: &Path) -> Result<BTreeMap<String, ImportedRange>> {
    let mut ranges = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        let err = |msg: String| CalibError::parse(path, i + 1, msg);
        let (name, value) = line.rsplit_once(' ').ok_or_else(|| {
            err(format!(
                "expected 'tensor_name value' (ONNX Runtime calibration.cache) or a TRT- header, got '{line}'"
            ))
        })?;
        let v: f32 = value
            .parse()
            .map_err(|_| err(format!("tensor '{name}': '{value}' is not a number")))?;
        // ORT stores max(highest, lowest); its TensorRT provider uses it as a symmetric
        // range, so a negative value (an all-negative tensor) is taken by magnitude.
        if ranges
            .insert(name.to_string(), ImportedRange::amax(v.abs()))
            .is_some()
        {
            return Err(err(format!("tensor '{name}' appears twice")));
        }
    }
    Ok(ranges)
}

/// One value of a JSON range map.
struct JsonEntry(ImportedRange);

impl<'de> serde::Deserialize<'de> for JsonEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(EntryVisitor)
    }
}

struct EntryVisitor;

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = JsonEntry;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a range: amax, [min, max] or {\"lowest\": min, \"highest\": max}")
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<JsonEntry, E> {
        Ok(JsonEntry(ImportedRange::amax((v as f32).abs())))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<JsonEntry, E> {
        self.visit_f64(v as f64)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<JsonEntry, E> {
        self.visit_f64(v as f64)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<JsonEntry, A::Error> {
        let min: f64 = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(0, &"[min, max]"))?;
        let max: f64 = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(1, &"[min, max]"))?;
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(de::Error::invalid_length(3, &"[min, max]"));
        }
        Ok(JsonEntry(ImportedRange::min_max(min as f32, max as f32)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<JsonEntry, A::Error> {
        let (mut lowest, mut highest) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "lowest" => lowest = Some(map.next_value::<OrtNumber>()?.0),
                "highest" => highest = Some(map.next_value::<OrtNumber>()?.0),
                // hist, hist_edges, bins, avg, std, CLS: not needed for a range.
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        match (lowest, highest) {
            (Some(lo), Some(hi)) => Ok(JsonEntry(ImportedRange::min_max(lo as f32, hi as f32))),
            _ => Err(de::Error::custom(
                "range object needs both \"lowest\" and \"highest\"",
            )),
        }
    }
}

/// A number as ONNX Runtime's JSON encoder writes it: plain, or a numpy array object
/// `{"data": x | [x], "dtype": …, "CLS": "numpy.array"}` holding one value.
struct OrtNumber(f64);

impl<'de> serde::Deserialize<'de> for OrtNumber {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(OrtNumberVisitor)
    }
}

struct OrtNumberVisitor;

impl<'de> Visitor<'de> for OrtNumberVisitor {
    type Value = OrtNumber;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number or a one-value numpy array object {\"data\": x}")
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<OrtNumber, E> {
        Ok(OrtNumber(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<OrtNumber, E> {
        Ok(OrtNumber(v as f64))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<OrtNumber, E> {
        Ok(OrtNumber(v as f64))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<OrtNumber, A::Error> {
        let v: OrtNumber = seq
            .next_element()?
            .ok_or_else(|| de::Error::custom("empty array where one range value was expected"))?;
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(de::Error::custom(
                "per-channel ranges (several values) are not supported; expected one value",
            ));
        }
        Ok(v)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<OrtNumber, A::Error> {
        let mut data = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "data" {
                data = Some(map.next_value::<OrtNumber>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        data.ok_or_else(|| de::Error::custom("numpy array object without \"data\""))
    }
}

/// ORT's flatbuffer starts with the root table offset; the text formats start with a
/// printable character.
fn looks_like_flatbuffer(bytes: &[u8]) -> bool {
    bytes.len() >= 8
        && bytes[..4]
            .iter()
            .any(|b| !b.is_ascii_graphic() && *b != b' ')
}

/// Reads ONNX Runtime's `calibration.flatbuffers`: root `TrtTable { dict: [KeyValue] }`,
/// `KeyValue { key: string, value: string }` (the value a decimal number).
fn parse_ort_flatbuffers(bytes: &[u8], path: &Path) -> Result<ImportedRanges> {
    let bad = |what: &str| {
        CalibError::parse(
            path,
            0,
            format!(
                "not a readable calibration file: {what} (expected a TensorRT cache, JSON, or ONNX Runtime's calibration.cache/.flatbuffers)"
            ),
        )
    };
    let fb = Flat(bytes);
    let root = fb.u32(0).ok_or_else(|| bad("too short"))? as usize;
    let dict = fb
        .field_target(root, 0)
        .ok_or_else(|| bad("no dict vector"))?;
    let len = fb.u32(dict).ok_or_else(|| bad("truncated vector"))? as usize;
    let mut ranges = BTreeMap::new();
    for k in 0..len {
        let slot = dict + 4 + 4 * k;
        let entry = slot + fb.u32(slot).ok_or_else(|| bad("truncated vector"))? as usize;
        let key = fb
            .string(entry, 0)
            .ok_or_else(|| bad("entry without key"))?;
        let value = fb
            .string(entry, 1)
            .ok_or_else(|| bad("entry without value"))?;
        let v: f32 = value.trim().parse().map_err(|_| {
            CalibError::parse(
                path,
                0,
                format!("tensor '{key}': '{value}' is not a number"),
            )
        })?;
        ranges.insert(key.to_string(), ImportedRange::amax(v.abs()));
    }
    check_ranges(&ranges, path)?;
    Ok(ImportedRanges {
        format: CacheFormat::OrtFlatbuffers,
        ranges,
    })
}

/// Bounds-checked little-endian reads over a flatbuffer.
struct Flat<'a>(&'a [u8]);

impl<'a> Flat<'a> {
    fn u32(&self, at: usize) -> Option<u32> {
        let b = self.0.get(at..at.checked_add(4)?)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u16(&self, at: usize) -> Option<u16> {
        let b = self.0.get(at..at.checked_add(2)?)?;
        Some(u16::from_le_bytes([b[0], b[1]]))
    }
    /// Where the offset field `field` of the table at `table` points.
    fn field_target(&self, table: usize, field: usize) -> Option<usize> {
        let soffset = self.u32(table)? as i32 as i64;
        let vtable = usize::try_from(table as i64 - soffset).ok()?;
        let vt_len = self.u16(vtable)? as usize;
        let slot = 4 + 2 * field;
        if slot + 2 > vt_len {
            return None;
        }
        let off = self.u16(vtable + slot)? as usize;
        if off == 0 {
            return None;
        }
        let at = table + off;
        Some(at + self.u32(at)? as usize)
    }
    fn string(&self, table: usize, field: usize) -> Option<&'a str> {
        let at = self.field_target(table, field)?;
        let len = self.u32(at)? as usize;
        let b = self.0.get(at + 4..at.checked_add(4 + len)?)?;
        std::str::from_utf8(b).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Method;
    use crate::table::TensorRange;

    fn table(entries: &[(&str, f32)]) -> RangeTable {
        RangeTable {
            schema_version: crate::table::SCHEMA_VERSION,
            model_sha256: String::new(),
            method: Method::MinMax,
            histogram_bins: 2048,
            tensors: entries
                .iter()
                .map(|&(n, a)| {
                    let r = TensorRange {
                        amax: a,
                        min: -a,
                        max: a,
                        method: "minmax".into(),
                        samples: 1,
                        elements: 1,
                        non_finite: 0,
                    };
                    (n.to_string(), r)
                })
                .collect(),
        }
    }

    #[test]
    fn versions_encode_like_tensorrt() {
        assert_eq!(trt_version_code("10.3.0").unwrap(), 100300);
        assert_eq!(trt_version_code("8.6.1").unwrap(), 8601);
        assert_eq!(trt_version_code("10.13").unwrap(), 101300);
        assert!(trt_version_code("ten").is_err());
        assert!(trt_version_code("10.3.0.1").is_err());
    }

    #[test]
    fn writes_the_tensorrt_format() {
        let t = table(&[
            ("input", 1.0),
            ("(Unnamed Layer* 3) [Convolution]_output", 2.0),
        ]);
        let text = trt_cache_text(&t, TrtCacheHeader::default());
        // 1/127 = 0x3c010204 and 2/127 = 0x3c810204 as float32 bits.
        assert_eq!(
            text,
            "TRT-100300-EntropyCalibration2\n(Unnamed Layer* 3) [Convolution]_output: 3c810204\ninput: 3c010204\n"
        );
        let h = TrtCacheHeader {
            version: 8601,
            calibrator: CalibratorName::MinMaxCalibration,
        };
        assert!(trt_cache_text(&t, h).starts_with("TRT-8601-MinMaxCalibration\n"));
    }

    #[test]
    fn tensorrt_cache_round_trips() {
        let t = table(&[("a", 3.5), ("b:0", 0.0123), ("c", 0.0)]);
        let text = trt_cache_text(&t, TrtCacheHeader::default());
        let back = parse_ranges(text.as_bytes(), Path::new("calib.cache")).unwrap();
        assert_eq!(
            back.format,
            CacheFormat::TensorRt(TrtCacheHeader::default())
        );
        for (name, r) in &t.tensors {
            let a = back.ranges[name].amax;
            assert!(
                (a - r.amax).abs() <= r.amax * 1e-6,
                "{name}: {a} vs {}",
                r.amax
            );
        }
        // Short hex (no zero padding) is accepted too, as is a trailing CRLF.
        let r = parse_ranges(b"TRT-8601-EntropyCalibration2\r\nx: 0\r\n", Path::new("c")).unwrap();
        assert_eq!(r.ranges["x"].amax, 0.0);
        assert!(r.to_amax().is_empty());
        assert_eq!(back.to_amax().len(), 2);
    }

    #[test]
    fn malformed_caches_name_file_and_line() {
        let cases: [(&str, &str); 5] = [
            (
                "TRT-100300-Entropy\nx: 3c010204\n",
                "c.cache:1: 'TRT-100300-Entropy' is not",
            ),
            (
                "TRT-100300-EntropyCalibration2\nx 3c010204\n",
                "c.cache:2: expected 'tensor_name: hex_scale'",
            ),
            (
                "TRT-100300-EntropyCalibration2\nx: 3c01zz04\n",
                "c.cache:2: tensor 'x': '3c01zz04'",
            ),
            (
                "TRT-100300-EntropyCalibration2\nx: 7f800000\n",
                "c.cache:2: tensor 'x': scale inf",
            ),
            (
                "TRT-100300-EntropyCalibration2\n\nx: 1\nx: 2\n",
                "c.cache:4: tensor 'x' appears twice",
            ),
        ];
        for (text, want) in cases {
            let err = parse_ranges(text.as_bytes(), Path::new("c.cache"))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(want), "{err}");
            assert!(!err.contains('\n'));
        }
        let err = parse_ranges(b"a 1.0\nb x\n", Path::new("calibration.cache")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("calibration.cache:2: tensor 'b'"),
            "{err}"
        );
        let err = parse_ranges(b"{\"a\": \"x\"}", Path::new("c.json")).unwrap_err();
        assert!(
            err.to_string().starts_with("c.json:1: invalid type"),
            "{err}"
        );
        let err = parse_ranges(b"{\n\"a\": {\"lowest\": 1}\n}", Path::new("c.json")).unwrap_err();
        assert!(err.to_string().contains("needs both"), "{err}");
    }

    #[test]
    fn reads_plain_json_maps() {
        let r = parse_ranges(
            br#"{"a": 2.5, "b": [-3, 1.5], "c": 4}"#,
            Path::new("r.json"),
        )
        .unwrap();
        assert_eq!(r.format, CacheFormat::JsonMap);
        assert_eq!(r.ranges["a"].amax, 2.5);
        assert_eq!(r.ranges["b"], ImportedRange::min_max(-3.0, 1.5));
        assert_eq!(r.ranges["b"].amax, 3.0);
        assert_eq!(r.ranges["c"].amax, 4.0);
    }

    #[test]
    fn reads_our_own_range_table() {
        let t = table(&[("a", 1.25)]);
        let r = parse_ranges(t.to_json().as_bytes(), Path::new("ranges.json")).unwrap();
        assert_eq!(r.format, CacheFormat::RangeTable);
        assert_eq!(r.ranges["a"].amax, 1.25);
    }
}
