//! Command-line spellings of TensorRT build settings: sizes (`1G`, `512M`, `1.5G`),
//! shapes (`NAME:MIN/OPT/MAX`), and the equivalent `trtexec` command for a build, so a
//! user can reproduce (or compare against) what infopt asked TensorRT to do.
//!
//! Errors are one line, `String`s the CLI wraps in its usage error.

use std::path::Path;

use super::config::{EngineBuildConfig, LayerOverride, LayerPrecision, Profile};
use super::flavor::FlavorSpec;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

/// Parses a byte size: a plain count (`1073741824`) or a number with a binary unit
/// (`K`, `M`, `G`, `T`, optionally followed by `iB` or `B`, any case): `1G`, `512M`,
/// `1.5G`, `64KiB`. The result must be a whole number of bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let s = text.trim();
    let junk = || {
        format!(
            "`{text}` is not a size; write bytes (1073741824) or a number with K, M, G or T (binary units): 1G, 512M, 1.5G"
        )
    };
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let multiplier: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => KIB,
        "m" | "mb" | "mib" => MIB,
        "g" | "gb" | "gib" => GIB,
        "t" | "tb" | "tib" => TIB,
        _ => return Err(junk()),
    };
    let (whole, frac) = match number.split_once('.') {
        Some((w, f)) => (w, f),
        None => (number, ""),
    };
    if whole.is_empty() && frac.is_empty()
        || number.matches('.').count() > 1
        || number.ends_with('.')
    {
        return Err(junk());
    }
    if frac.len() > 18 {
        return Err(format!("`{text}`: too many decimals"));
    }
    let too_big = || format!("`{text}` is larger than 2^64 bytes");
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_big())?
    };
    let frac_value: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse().map_err(|_| junk())?
    };
    let scale = 10u128.pow(frac.len() as u32);
    let m = u128::from(multiplier);
    let frac_bytes = frac_value * m;
    if !frac_bytes.is_multiple_of(scale) {
        return Err(format!(
            "`{text}` is not a whole number of bytes; use a smaller unit"
        ));
    }
    let bytes = whole
        .checked_mul(m)
        .and_then(|b| b.checked_add(frac_bytes / scale))
        .ok_or_else(too_big)?;
    u64::try_from(bytes).map_err(|_| too_big())
}

/// Writes a byte count with the largest binary unit that divides it exactly (`1G`,
/// `512M`, `1536M`, `100B`): the spelling `trtexec --memPoolSize` accepts.
pub fn format_size(bytes: u64) -> String {
    for (unit, name) in [(GIB, "G"), (MIB, "M"), (KIB, "K")] {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{name}", bytes / unit);
        }
    }
    format!("{bytes}B")
}

/// Rounds a byte count up to a whole number of MiB (at least 1M), spelled for
/// `--workspace`: the smallest round value that holds `bytes`.
pub fn format_size_up(bytes: u64) -> String {
    let mib = bytes.div_ceil(MIB).max(1);
    if mib.is_multiple_of(1024) {
        format!("{}G", mib / 1024)
    } else {
        format!("{mib}M")
    }
}

/// Parses dims written `1x3x224x224`.
pub fn parse_dims(text: &str) -> Result<Vec<i64>, String> {
    if text.is_empty() {
        return Err("empty shape; write dims like 1x3x224x224".into());
    }
    text.split('x')
        .map(|d| {
            d.parse::<i64>()
                .ok()
                .filter(|v| *v >= 0)
                .ok_or_else(|| format!("`{text}` is not a shape: `{d}` is not a non-negative integer; write dims like 1x3x224x224"))
        })
        .collect()
}

/// Writes dims as `1x3x224x224`.
pub fn format_dims(dims: &[i64]) -> String {
    dims.iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join("x")
}

/// Parses `NAME:MIN/OPT/MAX` (each `1x3x224x224`), or `NAME:DIMS` for a fixed shape.
/// The name is everything before the last `:`, so names such as `input:0` work.
pub fn parse_shape_spec(text: &str) -> Result<Profile, String> {
    let Some((name, shapes)) = text.rsplit_once(':') else {
        return Err(format!(
            "`{text}`: write NAME:MIN/OPT/MAX, e.g. images:1x3x224x224/8x3x224x224/32x3x224x224"
        ));
    };
    if name.is_empty() {
        return Err(format!("`{text}`: the input name before `:` is empty"));
    }
    let parts: Vec<&str> = shapes.split('/').collect();
    let at = |e: String| format!("input `{name}`: {e}");
    let profile = match parts.as_slice() {
        [one] => Profile::fixed(name, parse_dims(one).map_err(at)?),
        [min, opt, max] => Profile {
            input: name.to_string(),
            min: parse_dims(min).map_err(at)?,
            opt: parse_dims(opt).map_err(at)?,
            max: parse_dims(max).map_err(at)?,
        },
        _ => {
            return Err(at(format!(
                "`{shapes}` has {} shapes; give one (fixed) or three (MIN/OPT/MAX)",
                parts.len()
            )));
        }
    };
    if profile.opt.len() != profile.min.len() || profile.max.len() != profile.min.len() {
        return Err(at(format!(
            "min/opt/max have ranks {}/{}/{}",
            profile.min.len(),
            profile.opt.len(),
            profile.max.len()
        )));
    }
    for axis in 0..profile.min.len() {
        let (lo, mid, hi) = (profile.min[axis], profile.opt[axis], profile.max[axis]);
        if !(lo <= mid && mid <= hi) {
            return Err(at(format!(
                "dim {axis}: need min <= opt <= max, got {lo}/{mid}/{hi}"
            )));
        }
    }
    Ok(profile)
}

/// Parses a TensorRT 10 layer override `LAYER:PRECISION` (`/head/Softmax:fp32`); the
/// layer name is everything before the last `:`.
pub fn parse_layer_override(text: &str) -> Result<LayerOverride, String> {
    let Some((layer, precision)) = text.rsplit_once(':') else {
        return Err(format!(
            "`{text}`: write LAYER:PRECISION, e.g. /head/Softmax:fp32 (precision fp32, fp16, bf16 or int8)"
        ));
    };
    if layer.is_empty() {
        return Err(format!("`{text}`: the layer name before `:` is empty"));
    }
    let precision: LayerPrecision = precision
        .parse()
        .map_err(|e: crate::error::RuntimeError| format!("layer `{layer}`: {e}"))?;
    Ok(LayerOverride {
        layer: layer.to_string(),
        precision,
    })
}

/// The `trtexec` command line that builds the same engine as `build_engine` with `cfg`
/// on TensorRT `major` (10 or 11), one argument per element.
///
/// TensorRT 10: `--fp16`/`--bf16`/`--int8`, `--layerPrecisions` + `--layerOutputTypes`
/// with `--precisionConstraints=obey|prefer`, or `--stronglyTyped`. TensorRT 11: no
/// precision flags (they are gone), and no `--stronglyTyped` either: trtexec 11 documents
/// it as a deprecated no-op, strong typing being the only mode.
pub fn trtexec_args(
    onnx: &Path,
    engine: &Path,
    cfg: &EngineBuildConfig,
    major: u32,
) -> Result<Vec<String>, String> {
    let mut args = vec![
        "trtexec".to_string(),
        format!("--onnx={}", onnx.display()),
        format!("--saveEngine={}", engine.display()),
    ];
    if let Some(bytes) = cfg.workspace_bytes {
        args.push(format!("--memPoolSize=workspace:{}", format_size(bytes)));
    }
    if let Some(level) = cfg.opt_level {
        args.push(format!("--builderOptimizationLevel={level}"));
    }
    if !cfg.profiles.is_empty() {
        for (flag, pick) in [
            ("--minShapes", 0usize),
            ("--optShapes", 1),
            ("--maxShapes", 2),
        ] {
            let list: Vec<String> = cfg
                .profiles
                .iter()
                .map(|p| {
                    let dims = [&p.min, &p.opt, &p.max][pick];
                    format!("{}:{}", p.input, format_dims(dims))
                })
                .collect();
            args.push(format!("{flag}={}", list.join(",")));
        }
    }
    if let Some(cache) = &cfg.timing_cache {
        args.push(format!("--timingCacheFile={}", cache.display()));
    }
    if cfg.error_on_timing_cache_miss {
        args.push("--errorOnTimingCacheMiss".into());
    }
    if major >= 11 {
        let flags = cfg.precision.flag_names();
        if !flags.is_empty() {
            return Err(format!(
                "TensorRT {major} has no {}: precision comes from the ONNX graph",
                flags.join("/")
            ));
        }
    } else {
        let p = &cfg.precision;
        if cfg.strongly_typed {
            args.push("--stronglyTyped".into());
        }
        for (on, flag) in [(p.fp16, "--fp16"), (p.bf16, "--bf16"), (p.int8, "--int8")] {
            if on {
                args.push(flag.into());
            }
        }
        if !p.layer_overrides.is_empty() {
            let mut specs = Vec::new();
            for o in &p.layer_overrides {
                if o.layer.contains(',') {
                    return Err(format!(
                        "layer `{}` has a comma in its name, which trtexec's --layerPrecisions cannot spell",
                        o.layer
                    ));
                }
                specs.push(format!("{}:{}", o.layer, o.precision.trtexec_name()));
            }
            let specs = specs.join(",");
            args.push(format!("--layerPrecisions={specs}"));
            args.push(format!("--layerOutputTypes={specs}"));
            args.push(format!(
                "--precisionConstraints={}",
                if p.obey_constraints { "obey" } else { "prefer" }
            ));
        }
    }
    // infopt reads layer precisions from the inspector; detailed profiling names them.
    args.push("--profilingVerbosity=detailed".into());
    Ok(args)
}

/// The command-line equivalent of a build for `flavor`: `trtexec` for TensorRT 10/11,
/// `tensorrt_rtx` (TensorRT-RTX's trtexec) for TensorRT-RTX, which has no timing cache
/// and whose compute-capability targets are not spelled here (see docs/tensorrt.md).
pub fn trtexec_args_for(
    onnx: &Path,
    engine: &Path,
    cfg: &EngineBuildConfig,
    flavor: &FlavorSpec,
) -> Result<Vec<String>, String> {
    if flavor.id != "rtx" {
        return trtexec_args(onnx, engine, cfg, flavor.major);
    }
    let mut plain = cfg.clone();
    plain.timing_cache = None;
    plain.error_on_timing_cache_miss = false;
    plain.compute_capabilities.clear();
    // Strongly typed like TensorRT 11: the same checks and flags.
    let mut args = trtexec_args(onnx, engine, &plain, 11)?;
    args[0] = "tensorrt_rtx".into();
    Ok(args)
}

/// Joins arguments into a POSIX shell line, single-quoting those that need it.
pub fn shell_join(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_=./:,+@%".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensorrt::config::Trt10Precision;
    use std::path::PathBuf;

    #[test]
    fn sizes_in_bytes_and_binary_units() {
        let cases = [
            ("1G", 1u64 << 30),
            ("512M", 512 << 20),
            ("1073741824", 1 << 30),
            ("1.5G", 3 << 29),
            ("0.5k", 512),
            ("64KiB", 64 << 10),
            ("2gb", 2 << 30),
            ("1T", 1 << 40),
            ("100b", 100),
            (" 3M ", 3 << 20),
            (".5M", 1 << 19),
        ];
        for (text, want) in cases {
            assert_eq!(parse_size(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn junk_sizes_are_one_line_errors() {
        for bad in [
            "", "G", "1.2.3G", "1X", "-1G", "1 G B", "abc", "1.G", "1e9", "0x10",
        ] {
            let e = parse_size(bad).unwrap_err();
            assert!(e.contains("is not a size"), "{bad}: {e}");
            assert!(!e.contains('\n'));
        }
        assert!(
            parse_size("1.3K")
                .unwrap_err()
                .contains("not a whole number of bytes")
        );
        assert!(
            parse_size("16777216T")
                .unwrap_err()
                .contains("larger than 2^64")
        );
        assert!(
            parse_size("99999999999999999999999")
                .unwrap_err()
                .contains("larger than 2^64")
        );
    }

    #[test]
    fn sizes_format_with_the_largest_exact_unit() {
        assert_eq!(format_size(1 << 30), "1G");
        assert_eq!(format_size(3 << 29), "1536M");
        assert_eq!(format_size(512 << 20), "512M");
        assert_eq!(format_size(1536), "1536B");
        assert_eq!(format_size(2048), "2K");
        assert_eq!(format_size(100), "100B");
        assert_eq!(format_size(0), "0B");
        for bytes in [1u64, 1000, 1 << 20, 3 << 29, (5 << 30) + 1024] {
            assert_eq!(parse_size(&format_size(bytes)), Ok(bytes));
        }
    }

    #[test]
    fn shape_specs() {
        let p = parse_shape_spec("images:1x3x224x224/8x3x224x224/32x3x224x224").unwrap();
        assert_eq!(
            p,
            Profile {
                input: "images".into(),
                min: vec![1, 3, 224, 224],
                opt: vec![8, 3, 224, 224],
                max: vec![32, 3, 224, 224]
            }
        );
        // Names may contain ':' (TensorFlow-exported graphs).
        let p = parse_shape_spec("input:0:4x16").unwrap();
        assert_eq!(p, Profile::fixed("input:0", vec![4, 16]));
        for (bad, needle) in [
            ("images", "write NAME:MIN/OPT/MAX"),
            (":1x3", "input name before `:` is empty"),
            ("x:1x3/2x3", "has 2 shapes"),
            ("x:1x3/2x3/3", "ranks 2/2/1"),
            ("x:4x3/2x3/8x3", "dim 0: need min <= opt <= max, got 4/2/8"),
            ("x:1xAx3", "`A` is not a non-negative integer"),
            ("x:1x-1", "`-1` is not a non-negative integer"),
            ("x:", "empty shape"),
        ] {
            let e = parse_shape_spec(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn layer_overrides() {
        assert_eq!(
            parse_layer_override("/head/Softmax:FP32"),
            Ok(LayerOverride {
                layer: "/head/Softmax".into(),
                precision: LayerPrecision::Fp32
            })
        );
        assert_eq!(
            parse_layer_override("a:b:bfloat16").map(|o| (o.layer, o.precision)),
            Ok(("a:b".to_string(), LayerPrecision::Bf16))
        );
        for (bad, needle) in [
            ("softmax", "write LAYER:PRECISION"),
            (":fp16", "layer name before `:` is empty"),
            (
                "x:fp64",
                "layer `x`: unknown layer precision `fp64`; use fp32, fp16, bf16 or int8",
            ),
        ] {
            let e = parse_layer_override(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    fn cfg() -> EngineBuildConfig {
        EngineBuildConfig {
            workspace_bytes: Some(3 << 29),
            opt_level: Some(4),
            profiles: vec![
                Profile {
                    input: "x".into(),
                    min: vec![1, 3, 8, 8],
                    opt: vec![4, 3, 8, 8],
                    max: vec![16, 3, 8, 8],
                },
                Profile::fixed("mask", vec![1, 8]),
            ],
            timing_cache: Some(PathBuf::from("cache/model.tc")),
            error_on_timing_cache_miss: true,
            ..Default::default()
        }
    }

    #[test]
    fn trtexec_for_tensorrt_10_carries_every_setting() {
        let mut c = cfg();
        c.precision = Trt10Precision {
            fp16: true,
            int8: true,
            layer_overrides: vec![
                LayerOverride {
                    layer: "/head/Softmax".into(),
                    precision: LayerPrecision::Fp32,
                },
                LayerOverride {
                    layer: "/body/MatMul".into(),
                    precision: LayerPrecision::Fp16,
                },
            ],
            obey_constraints: true,
            ..Default::default()
        };
        let args = trtexec_args(Path::new("m.onnx"), Path::new("m.engine"), &c, 10).unwrap();
        assert_eq!(
            args,
            [
                "trtexec",
                "--onnx=m.onnx",
                "--saveEngine=m.engine",
                "--memPoolSize=workspace:1536M",
                "--builderOptimizationLevel=4",
                "--minShapes=x:1x3x8x8,mask:1x8",
                "--optShapes=x:4x3x8x8,mask:1x8",
                "--maxShapes=x:16x3x8x8,mask:1x8",
                "--timingCacheFile=cache/model.tc",
                "--errorOnTimingCacheMiss",
                "--fp16",
                "--int8",
                "--layerPrecisions=/head/Softmax:fp32,/body/MatMul:fp16",
                "--layerOutputTypes=/head/Softmax:fp32,/body/MatMul:fp16",
                "--precisionConstraints=obey",
                "--profilingVerbosity=detailed",
            ]
        );
        c.precision.obey_constraints = false;
        let args = trtexec_args(Path::new("m.onnx"), Path::new("m.engine"), &c, 10).unwrap();
        assert!(args.contains(&"--precisionConstraints=prefer".to_string()));
        // Strongly typed TensorRT 10.
        let mut c = cfg();
        c.strongly_typed = true;
        let args = trtexec_args(Path::new("m.onnx"), Path::new("m.engine"), &c, 10).unwrap();
        assert!(args.contains(&"--stronglyTyped".to_string()));
        assert!(
            !args
                .iter()
                .any(|a| a == "--fp16" || a.starts_with("--precisionConstraints"))
        );
    }

    #[test]
    fn trtexec_for_tensorrt_11_has_no_precision_flags() {
        let args = trtexec_args(Path::new("m.onnx"), Path::new("m.engine"), &cfg(), 11).unwrap();
        assert_eq!(
            args,
            [
                "trtexec",
                "--onnx=m.onnx",
                "--saveEngine=m.engine",
                "--memPoolSize=workspace:1536M",
                "--builderOptimizationLevel=4",
                "--minShapes=x:1x3x8x8,mask:1x8",
                "--optShapes=x:4x3x8x8,mask:1x8",
                "--maxShapes=x:16x3x8x8,mask:1x8",
                "--timingCacheFile=cache/model.tc",
                "--errorOnTimingCacheMiss",
                "--profilingVerbosity=detailed",
            ]
        );
        let mut c = cfg();
        c.precision.bf16 = true;
        let e = trtexec_args(Path::new("m.onnx"), Path::new("m.engine"), &c, 11).unwrap_err();
        assert!(e.contains("TensorRT 11 has no --bf16"), "{e}");
    }

    #[test]
    fn minimal_command_and_shell_quoting() {
        let args = trtexec_args(
            Path::new("my model.onnx"),
            Path::new("out.plan"),
            &EngineBuildConfig::default(),
            11,
        )
        .unwrap();
        assert_eq!(
            shell_join(&args),
            "trtexec '--onnx=my model.onnx' --saveEngine=out.plan --profilingVerbosity=detailed"
        );
        assert_eq!(shell_join(&["it's".to_string()]), r"'it'\''s'");
        let mut c = EngineBuildConfig::default();
        c.precision.layer_overrides.push(LayerOverride {
            layer: "a,b".into(),
            precision: LayerPrecision::Fp32,
        });
        assert!(
            trtexec_args(Path::new("m"), Path::new("e"), &c, 10)
                .unwrap_err()
                .contains("comma")
        );
    }
}
