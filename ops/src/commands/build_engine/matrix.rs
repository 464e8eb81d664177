//! `infopt build-engine MODEL --matrix`: the engines a release needs, one per TensorRT
//! flavour × compute capability × precision, as the JSON a CI matrix reads
//! (`{"include": [...]}`: GitHub Actions `strategy.matrix: ${{ fromJSON(...) }}`, GitLab
//! `parallel:matrix` through a generated child pipeline, a Kubernetes indexed Job by
//! `.include[$JOB_COMPLETION_INDEX]`). Nothing is built: each entry carries the exact
//! `infopt build-engine` command that builds it and an artifact name keyed by the hash
//! of what decides the engine (model bytes, the job's options and the files they name,
//! infopt's version, the TensorRT flavour and version, the compute capability), so a CI
//! cache or artifact store can tell a build it already has.

use std::path::Path;

use infopt_calibration::table::sha256_hex;
use infopt_runtime::tensorrt::{FlavorSpec, TrtVersion, flavor};
use serde::Serialize;

use super::BuildEngineOptions;
use crate::error::{ErrorKind, OpsError, OpsResult};

/// One engine of the matrix.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Entry {
    /// `rtx1.7-sm86-fp16`: a job name.
    pub name: String,
    /// `--trt-flavor` of the build.
    pub flavor: String,
    /// The TensorRT version the engine is built with: engines do not move between
    /// versions (TensorRT-RTX: between minors).
    pub trt_version: String,
    /// The GPU generation (SM number) the engine is for.
    pub compute_capability: u32,
    /// Whether the build must run on a GPU of that compute capability (TensorRT 10/11);
    /// TensorRT-RTX compiles for it on any machine.
    pub needs_gpu: bool,
    pub precision: String,
    /// SHA-256 of (model, job, infopt version, flavour and version, compute capability).
    pub key: String,
    /// The engine file the command writes: `<model stem>-<name>-<key, 12 hex>.engine`.
    pub artifact: String,
    /// The command that builds it (POSIX shell quoting).
    pub command: String,
}

/// The matrix: what `--matrix` prints (one line).
#[derive(Serialize, Debug)]
pub struct Matrix {
    pub include: Vec<Entry>,
}

/// Options of the invocation that are axes of the matrix or name its outputs: left out
/// of each entry's command (the entry adds its own), and `true` when they take a value.
const AXES: &[(&str, bool)] = &[
    ("--matrix", false),
    ("--precisions", true),
    ("--compute-capability", true),
    ("--trt-flavor", true),
    ("--output", true),
    ("-o", true),
    ("--fp16", false),
    ("--bf16", false),
    ("--int8", false),
    ("--json", false),
    ("--report", true),
];

/// The INT8 options (all take a value): only the int8 entries get them (a float build
/// refuses an option no pass reads).
const INT8_ONLY: &[(&str, bool)] = &[
    ("--ranges", true),
    ("--calib-data", true),
    ("--calib-method", true),
    ("--calib-samples", true),
    ("--held-out", true),
    ("--preprocess", true),
    ("--int8-min-cosine", true),
    ("--int8-min-top1", true),
];

/// `argv` (after `infopt build-engine`) without the matrix's axes and outputs, and
/// without the INT8 options unless `int8`.
fn job_arguments(argv: &[String], int8: bool) -> Vec<String> {
    let mut kept = Vec::new();
    let mut i = 0;
    let dropped = AXES.iter().chain(if int8 { &[][..] } else { INT8_ONLY });
    while i < argv.len() {
        let a = &argv[i];
        i += 1;
        let axis = dropped.clone().find(|(flag, _)| {
            a == flag
                || a.strip_prefix(flag).is_some_and(|rest| {
                    rest.starts_with('=') || (*flag == "-o" && !rest.is_empty())
                })
        });
        match axis {
            // `--flag value`: skip the value too.
            Some((flag, true)) if a == flag => i += 1,
            Some(_) => {}
            None => kept.push(a.clone()),
        }
    }
    kept
}

fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=,+-@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The newest TensorRT version this infopt's shims are written for, per flavour.
fn version_of(spec: &FlavorSpec) -> TrtVersion {
    let newest = spec
        .headers
        .iter()
        .filter_map(|h| {
            let (major, minor) = h.rsplit('-').next()?.split_once('.')?;
            Some((major.parse().ok()?, minor.parse().ok()?))
        })
        .max();
    let (major, minor) = newest.unwrap_or((spec.major, 0));
    TrtVersion {
        major,
        minor,
        patch: 0,
    }
}

fn version_text(spec: &FlavorSpec, v: TrtVersion) -> String {
    match spec.version_check {
        flavor::VersionCheck::MajorMinor => format!("{}.{}", v.major, v.minor),
        flavor::VersionCheck::Major => v.major.to_string(),
    }
}

/// Reads a file the job names, for the key (a changed range table is another engine).
fn file_hash(path: &Path, what: &str) -> OpsResult<String> {
    std::fs::read(path)
        .map(|b| sha256_hex(&b))
        .map_err(|e| OpsError::new(ErrorKind::Load, format!("{what} {}: {e}", path.display())))
}

/// The precisions to build: `--precisions`, else the one the flags ask for.
fn precisions(args: &BuildEngineOptions) -> OpsResult<Vec<String>> {
    let precisions: Vec<String> = match &args.precisions {
        Some(list) => list
            .split(',')
            .map(|p| p.trim().to_ascii_lowercase())
            .filter(|p| !p.is_empty())
            .collect(),
        None if args.fp16 => vec!["fp16".into()],
        None if args.bf16 => vec!["bf16".into()],
        None if args.int8.int8 => vec!["int8".into()],
        None => vec!["fp32".into()],
    };
    for p in &precisions {
        if !["fp32", "fp16", "bf16", "int8"].contains(&p.as_str()) {
            return Err(OpsError::usage(format!(
                "--precisions: `{p}` is not one of fp32, fp16, bf16, int8"
            )));
        }
    }
    if precisions.iter().any(|p| p == "int8")
        && args.int8.ranges.is_none()
        && !args.int8.data_given()
    {
        return Err(OpsError::usage(
            "the int8 engines need ranges: give --ranges ranges.json (from infopt calibrate --merge) or --calib-data PATH",
        ));
    }
    Ok(precisions)
}

/// The compute capabilities a flavour builds for: the ones asked for
/// (checked), else every one it targets.
fn compute_capabilities(
    spec: &FlavorSpec,
    version: TrtVersion,
    wanted: Option<&[u32]>,
) -> OpsResult<Vec<u32>> {
    Ok(match (wanted, spec.compute_capabilities.is_empty()) {
        (Some(w), false) => {
            spec.check_compute_capabilities(version, w)
                .map_err(OpsError::usage)?;
            w.to_vec()
        }
        (Some(w), true) => w.to_vec(),
        (None, false) => spec.supported_compute_capabilities(version),
        (None, true) => {
            return Err(OpsError::usage(format!(
                "{} builds for the GPU it runs on: give --compute-capability SM,SM (the GPUs your build machines have)",
                spec.display
            )));
        }
    })
}

/// The matrix of `args` (`args.argv`: the command line, for the entries' commands).
pub fn plan(args: &BuildEngineOptions) -> OpsResult<Matrix> {
    if args.emit_onnx.is_some() {
        return Err(OpsError::usage(
            "--matrix plans engine builds; --emit-onnx goes in a build, not in the plan",
        ));
    }
    let model = std::fs::read(&args.model)
        .map_err(|e| OpsError::new(ErrorKind::Load, format!("{}: {e}", args.model.display())))?;
    let model_sha256 = sha256_hex(&model);
    let flavors: Vec<&'static FlavorSpec> = match &args.trt_flavor {
        None => vec![flavor::by_id("rtx").map_err(OpsError::usage)?],
        Some(list) => list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|id| flavor::by_id(id).map_err(OpsError::usage))
            .collect::<OpsResult<_>>()?,
    };
    let precisions = precisions(args)?;
    let wanted = args
        .compute_capability
        .as_deref()
        .map(flavor::parse_compute_capabilities)
        .transpose()
        .map_err(OpsError::usage)?;
    // The job: every option that is not an axis, plus the content of the files it
    // names; the float and the INT8 builds differ by the INT8 options.
    let config = match &args.config {
        Some(c) => format!("\0config:{}", file_hash(c, "--config")?),
        None => String::new(),
    };
    let ranges = match &args.int8.ranges {
        Some(r) => format!("\0ranges:{}", file_hash(r, "--ranges")?),
        None => String::new(),
    };
    let job_of = |int8: bool| {
        let a = job_arguments(&args.argv, int8);
        let mut job = a.join("\0");
        job.push_str(&config);
        if int8 {
            job.push_str(&ranges);
        }
        (a, job)
    };
    let stem = args
        .model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    let dir = args.model.parent().filter(|d| !d.as_os_str().is_empty());
    let mut include = Vec::new();
    for spec in flavors {
        let version = version_of(spec);
        let vtext = version_text(spec, version);
        let ccs = compute_capabilities(spec, version, wanted.as_deref())?;
        let prefix = match spec.version_check {
            flavor::VersionCheck::MajorMinor => spec.id.to_string(),
            flavor::VersionCheck::Major => "trt".into(),
        };
        for &cc in &ccs {
            for precision in &precisions {
                let (job_args, job) = job_of(precision == "int8");
                let name = format!("{prefix}{vtext}-sm{cc}-{precision}");
                let key = sha256_hex(
                    format!(
                        "model:{model_sha256}\0job:{job}\0precision:{precision}\0infopt:{}\0flavor:{}\0trt:{vtext}\0sm:{cc}",
                        env!("CARGO_PKG_VERSION"),
                        spec.id
                    )
                    .as_bytes(),
                );
                let file = format!("{stem}-{name}-{}.engine", &key[..12]);
                let artifact = match dir {
                    Some(d) => d.join(&file).display().to_string(),
                    None => file,
                };
                let mut cmd: Vec<String> = vec!["infopt".into(), "build-engine".into()];
                cmd.extend(job_args.iter().cloned());
                if precision != "fp32" {
                    cmd.push(format!("--{precision}"));
                }
                cmd.extend(["--trt-flavor".into(), spec.id.to_string()]);
                if !spec.compute_capabilities.is_empty() {
                    cmd.extend(["--compute-capability".into(), cc.to_string()]);
                }
                cmd.extend(["-o".into(), artifact.clone()]);
                include.push(Entry {
                    name,
                    flavor: spec.id.to_string(),
                    trt_version: vtext.clone(),
                    compute_capability: cc,
                    needs_gpu: !spec.builds_without_gpu,
                    precision: precision.clone(),
                    key,
                    artifact,
                    command: cmd
                        .iter()
                        .map(|a| shell_quote(a))
                        .collect::<Vec<_>>()
                        .join(" "),
                });
            }
        }
    }
    Ok(Matrix { include })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_axes_and_outputs_leave_the_job_in_both_spellings() {
        let argv = v(&[
            "m.onnx",
            "--matrix",
            "--fp16",
            "--precisions=fp16,int8",
            "--compute-capability",
            "86,89",
            "--trt-flavor=rtx",
            "-o",
            "x.engine",
            "-oy.engine",
            "--output=z",
            "--ranges",
            "r.json",
            "--workspace",
            "1G",
            "--json",
            "--report",
            "r.md",
        ]);
        assert_eq!(
            job_arguments(&argv, true),
            v(&["m.onnx", "--ranges", "r.json", "--workspace", "1G"])
        );
        assert_eq!(
            job_arguments(&argv, false),
            v(&["m.onnx", "--workspace", "1G"])
        );
    }

    #[test]
    fn shell_quoting_leaves_plain_words_alone() {
        assert_eq!(shell_quote("models/m.onnx"), "models/m.onnx");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
