//! `infopt bench`: latency of a model in a backend, optionally against a second model,
//! timed in the same process with interleaved runs.

use std::path::PathBuf;

use infopt_runtime::{DefaultedDim, Latency};
use infopt_verify::timing::{self, Timed};
use infopt_verify::{BackendInfo, BackendKind};
use serde::Serialize;

use crate::backend_args::{BackendSettings, defaulted_dim_note};
use crate::ci::{self, CiSummary};
use crate::error::{OpsError, OpsResult};
use crate::inputs_arg::{self, InputSettings, InputSource};
use crate::models::{Loaded, load};
use crate::outcome::{CommandReport, Outcome};
use crate::report::summaries;

/// `bench`'s options (see `OptimizeOptions` for how they are built).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BenchOptions {
    /// Model to time.
    pub model: PathBuf,
    /// More models to time in the same process, runs interleaved with MODEL's
    /// (repeatable); prints MODEL's median over each one's (its speed-up).
    pub compare: Vec<PathBuf>,
    pub backend: BackendSettings,
    pub inputs: InputSettings,
    /// Untimed runs first.
    pub warmup: usize,
    /// Timed runs.
    pub runs: usize,
    pub gates: crate::gates::GateSettings,
}

/// Untimed runs before timing.
pub const DEFAULT_WARMUP: usize = 10;
/// Timed runs.
pub const DEFAULT_RUNS: usize = 100;

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            model: PathBuf::new(),
            compare: Vec::new(),
            backend: Default::default(),
            inputs: Default::default(),
            warmup: DEFAULT_WARMUP,
            runs: DEFAULT_RUNS,
            gates: Default::default(),
        }
    }
}

/// Version of the JSON layout below; bumped on incompatible changes.
pub const BENCH_SCHEMA_VERSION: u32 = 1;

#[derive(Serialize, Debug)]
pub struct ModelBench {
    pub path: String,
    pub inputs: String,
    pub input_shapes: Vec<(String, Vec<usize>)>,
    /// Symbolic dims nothing bound, which took 1.
    pub defaulted_dims: Vec<DefaultedDim>,
    pub load_ms: f64,
    pub latency: Latency,
    /// Runs per second at the mean latency.
    pub throughput_per_s: f64,
}

#[derive(Serialize, Debug)]
pub struct BenchReport {
    pub schema_version: u32,
    pub backend: BackendInfo,
    pub input_source: InputSource,
    pub warmup: usize,
    pub runs: usize,
    /// Whether the runs of the two models alternated (always true with two models).
    pub interleaved: bool,
    pub models: Vec<ModelBench>,
    /// With one `--compare`: MODEL's median latency / OTHER's (> 1: OTHER is faster).
    pub speedup: Option<f64>,
    /// With `--compare`: MODEL's median over each compared model's, in order.
    pub speedups: Vec<f64>,
    /// Release gates, when any were set. With a latency gate the timings above come from
    /// the gate's runs.
    pub gates: Option<crate::gates::GateReport>,
}

/// Progress of the timed runs: a bar when the caller draws one, a line per
/// phase otherwise.
struct Progress {
    bar: Option<Box<dyn crate::progress::Bar>>,
    done: usize,
}

impl Progress {
    fn new() -> Progress {
        Progress { bar: None, done: 0 }
    }

    fn phase(&mut self, label: &str, total: usize) {
        self.finish();
        self.done = 0;
        self.bar = crate::progress::bar(
            "{prefix:>8} [{bar:30}] {pos}/{len} runs {elapsed_precise}",
            label,
            Some(total),
        );
        if self.bar.is_none() {
            crate::progress::note("bench", format!("bench: {label} ({total} runs)"));
        }
    }

    fn inc(&mut self) {
        self.done += 1;
        if let Some(bar) = &self.bar {
            bar.set(self.done, "");
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish();
        }
    }
}

/// Times the models interleaved (see [`infopt_verify::timing`]), with a
/// progress bar on a terminal.
pub fn time_interleaved(
    models: Vec<Loaded>,
    warmup: usize,
    runs: usize,
    transfer: infopt_runtime::Transfer,
) -> OpsResult<(Vec<Latency>, Vec<Loaded>)> {
    let mut meta = Vec::new();
    let timed: Vec<Timed> = models
        .into_iter()
        .map(|m| {
            meta.push((m.path.clone(), m.load_ms));
            Timed {
                label: m.path.display().to_string(),
                model: m.model,
                inputs: m.inputs,
            }
        })
        .collect();
    let mut progress = Progress::new();
    let lat = timing::time_interleaved(&timed, warmup, runs, transfer, &mut |p| match p {
        timing::Progress::Phase(label, total) => progress.phase(label, total),
        timing::Progress::Round => progress.inc(),
        timing::Progress::Done => progress.finish(),
    })
    .map_err(OpsError::from)?;
    let back = timed
        .into_iter()
        .zip(meta)
        .map(|(t, (path, load_ms))| Loaded {
            path,
            model: t.model,
            inputs: t.inputs,
            load_ms,
        })
        .collect();
    Ok((lat, back))
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.1} ms")
    } else if v >= 1.0 {
        format!("{v:.3} ms")
    } else {
        format!("{:.1} µs", v * 1e3)
    }
}

pub fn render_text(r: &BenchReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "backend     {}", r.backend.describe());
    let _ = writeln!(
        s,
        "runs        {} timed after {} warm-up{}",
        r.runs,
        r.warmup,
        if r.interleaved { ", interleaved" } else { "" }
    );
    for (i, m) in r.models.iter().enumerate() {
        let label = if i == 0 { "model" } else { "other" };
        let _ = writeln!(s, "{label:<11} {}", m.path);
        let _ = writeln!(
            s,
            "  inputs    {} ({})",
            m.inputs,
            r.input_source.describe()
        );
        for d in &m.defaulted_dims {
            let _ = writeln!(s, "  note      {}", defaulted_dim_note(d));
        }
        let l = &m.latency;
        let _ = writeln!(
            s,
            "  latency   median {}  p90 {}  p99 {}  min {}",
            ms(l.median_ms),
            ms(l.p90_ms),
            ms(l.p99_ms),
            ms(l.min_ms)
        );
        let _ = writeln!(
            s,
            "  throughput {:.1} runs/s (mean {}), load {}",
            m.throughput_per_s,
            ms(l.mean_ms),
            ms(m.load_ms)
        );
    }
    for (m, &x) in r.models.iter().skip(1).zip(&r.speedups) {
        let verdict = if x >= 1.0 {
            format!("{x:.2}x faster than {}", r.models[0].path)
        } else {
            format!("{:.2}x slower than {}", 1.0 / x, r.models[0].path)
        };
        let _ = writeln!(s, "ratio       {}: median ratio {x:.3}, {verdict}", m.path);
    }
    s
}

/// `infopt bench`: the report (table or JSON) and `--report` files, then
/// The CI summary of a timing (`--report FILE.md`, `.xml`).
pub fn ci_summary(r: &BenchReport) -> CiSummary<'_> {
    let paths: Vec<String> = r.models.iter().map(|m| format!("`{}`", m.path)).collect();
    let fallback = (r.models.len() == 2).then(|| {
        (
            r.backend.name.as_str(),
            r.models[0].latency.median_ms,
            r.models[1].latency.median_ms,
        )
    });
    CiSummary {
        title: "infopt bench".into(),
        subject: paths.join(" vs "),
        facts: Vec::new(),
        checks: Vec::new(),
        gates: r.gates.as_ref(),
        ops: Vec::new(),
        agreement: &[],
        latency: summaries::latency_line(r.gates.as_ref(), fallback).or_else(|| {
            r.models
                .first()
                .map(|m| format!("median {:.3} ms ({})", m.latency.median_ms, r.backend.name))
        }),
        details: None,
    }
}

impl CommandReport for BenchReport {
    fn command(&self) -> &'static str {
        "bench"
    }
    fn text(&self) -> String {
        let mut s = render_text(self);
        if let Some(g) = &self.gates {
            s.push_str(&ci::render_gates_text(g));
        }
        s
    }
    fn markdown(&self) -> String {
        ci::render_markdown(&ci_summary(self))
    }
    fn summary(&self) -> CiSummary<'_> {
        ci_summary(self)
    }
}

/// Times the models, without printing: the report, with a failed gate beside it.
pub fn execute(args: &BenchOptions) -> OpsResult<Outcome<BenchReport>> {
    if args.runs == 0 {
        return Err(OpsError::usage("--runs must be at least 1"));
    }
    let inputs = args.inputs.resolve().map_err(OpsError::usage)?;
    let gates = crate::gates::Gates::resolve(None, &args.gates)?;
    crate::gates::check_bench_gates(&gates, args.compare.len())?;
    args.backend.check_io_binding(true, "")?;
    let chosen = args.backend.build(BackendKind::Tract)?;
    let (backend, info) = (chosen.backend, chosen.info);
    let mut paths = vec![args.model.clone()];
    paths.extend(args.compare.clone());
    let loaded = paths
        .iter()
        .map(|p| load(backend.as_ref(), p, &inputs))
        .collect::<OpsResult<Vec<_>>>()?;
    let (latencies, loaded, evidence) = if gates.latency_threshold().is_some() {
        let (l, e) = crate::gates::bench_latency(&gates, &loaded, &info, args.warmup, args.runs)?;
        (l, loaded, Some(e))
    } else {
        let (l, loaded) = time_interleaved(loaded, args.warmup, args.runs, info.transfer)?;
        (l, loaded, None)
    };
    let gate_report = if gates.is_empty() {
        None
    } else {
        Some(crate::gates::bench_report(
            &gates,
            evidence,
            paths.last().unwrap_or(&args.model),
        )?)
    };
    let models: Vec<ModelBench> = loaded
        .iter()
        .zip(latencies)
        .map(|(m, latency)| {
            let r = m.model.resolution();
            ModelBench {
                path: m.path.display().to_string(),
                inputs: inputs_arg::describe(&m.inputs),
                input_shapes: r.input_shapes.clone(),
                defaulted_dims: r.defaulted.clone(),
                load_ms: m.load_ms,
                throughput_per_s: if latency.mean_ms > 0.0 {
                    1e3 / latency.mean_ms
                } else {
                    0.0
                },
                latency,
            }
        })
        .collect();
    let speedups: Vec<f64> = models[1..]
        .iter()
        .map(|m| {
            if m.latency.median_ms > 0.0 {
                models[0].latency.median_ms / m.latency.median_ms
            } else {
                0.0
            }
        })
        .collect();
    let speedup = (speedups.len() == 1).then(|| speedups[0]);
    let report = BenchReport {
        schema_version: BENCH_SCHEMA_VERSION,
        backend: info,
        input_source: inputs.source.clone(),
        warmup: args.warmup,
        runs: args.runs,
        interleaved: models.len() > 1,
        models,
        speedup,
        speedups,
        gates: gate_report,
    };
    let failure = report.gates.as_ref().and_then(|g| g.error());
    Ok(Outcome { report, failure })
}
