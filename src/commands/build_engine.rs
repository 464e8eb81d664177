//! `infopt build-engine`: arguments → options → `infopt_ops` → report → exit code.

use std::path::PathBuf;

use infopt_ops::commands;

use crate::exit::OpsResult;
use crate::progress::Terminal;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model to build (never modified).
    pub model: PathBuf,
    /// Engine file (default: MODEL with `.engine`).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Pipeline YAML (default: the built-in configs/tensorrt.yaml); its target is set to tensorrt.
    #[arg(short = 'c', long = "config", value_name = "PIPELINE.yaml")]
    pub config: Option<PathBuf>,
    /// Float16: append convert-float16 (TensorRT 11: strongly typed graph; 10: kFP16).
    #[arg(long, conflicts_with = "bf16")]
    pub fp16: bool,
    /// Bfloat16: append convert-bfloat16 (TensorRT 11: strongly typed graph; 10: kBF16).
    #[arg(long)]
    pub bf16: bool,
    /// Per-layer precision NAME_OR_OP=fp32|fp16|bf16|int8 (repeatable): a bare op
    /// type matches the op, anything else a node name, exactly or as a regex
    /// matching the whole name; an entry that matches nothing, or whose
    /// precision no pass makes (fp16 without --fp16, int8 without --int8), is refused.
    #[arg(long = "precision", value_name = "NAME_OR_OP=P")]
    pub precision: Vec<String>,
    /// INT8: `--int8 --calib-data PATH` (or `--ranges FILE`) appends a calibrated
    /// quantize-int8 step, as `optimize --int8` does.
    #[command(flatten)]
    pub int8: crate::args::Int8Args,
    /// TensorRT workspace limit: 1G, 512M, 1.5G or bytes.
    #[arg(long, value_name = "SIZE")]
    pub workspace: Option<String>,
    /// Optimization profile of a dynamic input, NAME:MIN/OPT/MAX (each like
    /// 1x3x224x224), or NAME:DIMS for one shape (repeatable).
    #[arg(long = "shapes", value_name = "NAME:MIN/OPT/MAX")]
    pub shapes: Vec<String>,
    /// Timing cache: read if it exists, written back after the build.
    #[arg(long, value_name = "FILE")]
    pub timing_cache: Option<PathBuf>,
    /// Fail instead of timing a tactic the timing cache lacks (reproducible builds).
    #[arg(long, requires = "timing_cache")]
    pub error_on_timing_cache_miss: bool,
    /// Builder optimization level 0..=5 (TensorRT's default: 3).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(0..=5))]
    pub builder_opt_level: Option<u8>,
    /// TensorRT 10: build the strongly typed graph (like TensorRT 11) instead of the
    /// float32 graph with builder flags.
    #[arg(long)]
    pub strongly_typed: bool,
    /// TensorRT 10: obey the per-layer precisions (fail without a kernel) rather than prefer them.
    #[arg(long)]
    pub obey_precision_constraints: bool,
    /// Write the ONNX TensorRT would build (strongly typed) and print the equivalent
    /// trtexec commands; TensorRT is not needed.
    #[arg(long, value_name = "FILE")]
    pub emit_onnx: Option<PathBuf>,
    /// The infopt TensorRT shim (default: $INFOPT_TRT_SHIM, then next to infopt).
    #[arg(long, value_name = "PATH")]
    pub trt_shim: Option<PathBuf>,
    /// Folder holding libnvinfer / libnvonnxparser (default: $TENSORRT_LIB, pip, system).
    #[arg(long, value_name = "DIR")]
    pub trt_lib: Option<PathBuf>,
    /// The TensorRT major to target: with --emit-onnx, print only its trtexec command;
    /// when building, refuse a TensorRT of another major.
    #[arg(long, value_name = "10|11", value_parser = clap::value_parser!(u32).range(10..=11))]
    pub trt_major: Option<u32>,
    /// TensorRT flavour: trt10, trt11 or rtx (TensorRT-RTX, builds without a GPU).
    /// Default: TensorRT 11/10 where a GPU is present and installed, else TensorRT-RTX.
    #[arg(long, value_name = "trt10|trt11|rtx")]
    pub trt_flavor: Option<String>,
    /// TensorRT-RTX: the GPUs to compile the engine for, as SM numbers: 86,89,120
    /// (default: TensorRT-RTX's own, 80, 86, 89 and 120).
    #[arg(long, value_name = "SM,SM")]
    pub compute_capability: Option<String>,
    /// Release gate on the engine (repeatable): `max_precision_mismatches=N` fails (exit
    /// 5) when more than N placed nodes got another precision than requested;
    /// `realized_precision` is `max_precision_mismatches=0`.
    #[arg(long = "gate", value_name = "GATE")]
    pub gate: Vec<String>,
    /// Do not run the models to check that the rewritten ONNX agrees with the original.
    #[arg(long)]
    pub no_verify: bool,
    /// With --fp16/--bf16: convert and judge once, without keeping the layers
    /// that miss the accuracy target in float32 automatically.
    #[arg(long)]
    pub no_auto_fp32: bool,
    /// Timed runs of the engine (and of the input ONNX in ONNX Runtime); 0 skips timing.
    #[arg(long, default_value_t = infopt_ops::commands::build_engine::DEFAULT_RUNS)]
    pub runs: usize,
    /// Untimed warm-up runs before timing.
    #[arg(long, default_value_t = infopt_ops::commands::build_engine::DEFAULT_WARMUP)]
    pub warmup: usize,
    /// Also write the report to FILE (repeatable): .json (JSON), .md (Markdown for a
    /// pull-request comment), .xml (JUnit XML).
    #[arg(long, value_name = "FILE")]
    pub report: Vec<PathBuf>,
    /// Print the report as JSON on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub inputs: crate::args::InputArgs,
    #[command(flatten)]
    pub backend: crate::args::BackendArgs,
    #[command(flatten)]
    pub save: crate::args::SaveArgs,
    /// Print the build matrix instead of building: one engine per TensorRT flavour
    /// (--trt-flavor rtx,trt11; default rtx) x compute capability (--compute-capability;
    /// default: every one the flavour targets) x precision (--precisions), as one line of
    /// JSON `{"include": [...]}` for a CI matrix, each entry with its exact build command
    /// and an artifact name keyed by the hash of model, job, infopt and TensorRT
    /// versions and compute capability.
    #[arg(long)]
    pub matrix: bool,
    /// With --matrix: the precisions to build, fp32,fp16,bf16,int8 (default: the one
    /// --fp16/--bf16/--int8 asks for, else fp32).
    #[arg(long, value_name = "P,P", requires = "matrix")]
    pub precisions: Option<String>,
    /// The command line after `build-engine`, for the matrix's commands.
    #[arg(skip)]
    pub argv: Vec<String>,
}

impl From<Args> for infopt_ops::commands::build_engine::BuildEngineOptions {
    fn from(a: Args) -> Self {
        infopt_ops::commands::build_engine::BuildEngineOptions {
            model: a.model,
            output: a.output,
            config: a.config,
            config_text: None,
            fp16: a.fp16,
            bf16: a.bf16,
            precision: a.precision,
            int8: a.int8.into(),
            workspace: a.workspace,
            shapes: a.shapes,
            timing_cache: a.timing_cache,
            error_on_timing_cache_miss: a.error_on_timing_cache_miss,
            builder_opt_level: a.builder_opt_level,
            strongly_typed: a.strongly_typed,
            obey_precision_constraints: a.obey_precision_constraints,
            emit_onnx: a.emit_onnx,
            trt_shim: a.trt_shim,
            trt_lib: a.trt_lib,
            trt_major: a.trt_major,
            trt_flavor: a.trt_flavor,
            compute_capability: a.compute_capability,
            gate: a.gate,
            no_verify: a.no_verify,
            no_auto_fp32: a.no_auto_fp32,
            runs: a.runs,
            warmup: a.warmup,
            inputs: a.inputs.into(),
            backend: a.backend.into(),
            save: a.save.into(),
            matrix: a.matrix,
            precisions: a.precisions,
            argv: a.argv,
        }
    }
}

/// `--matrix`: the plan as one line of JSON; else the report (table or
/// JSON) and the `--report` files, then the verdict as the exit code.
pub fn run(args: Args) -> OpsResult {
    crate::report::kinds(&args.report)?;
    let (json, reports) = (args.json, args.report.clone());
    let options: commands::build_engine::BuildEngineOptions = args.into();
    if options.matrix {
        let m = commands::build_matrix(&options, &Terminal)?;
        let text = serde_json::to_string(&m)
            .map_err(|e| crate::exit::OpsError::new(crate::exit::ErrorKind::Internal, e))?;
        println!("{text}");
        return Ok(());
    }
    let outcome = commands::build_engine(&options, &Terminal)?;
    crate::report::emit(&outcome.report, json, &reports)?;
    outcome.verdict()
}
