//! The clap definitions of the option groups several commands share, and
//! their conversion into the `infopt-ops` settings they stand for.

use std::path::PathBuf;

/// Backend selection, shared by `optimize`, `bench` and `compare`.
#[derive(clap::Args, Debug, Clone)]
pub struct BackendArgs {
    /// Backend to run in: tract (embedded) or ort (ONNX Runtime, loaded at run time).
    #[arg(long, value_name = "tract|ort")]
    pub backend: Option<String>,
    /// ONNX Runtime library (default: $ORT_DYLIB_PATH, else the onnxruntime package of
    /// python3 or of a .venv above the working directory).
    #[arg(long, value_name = "PATH")]
    pub ort_dylib: Option<PathBuf>,
    /// Threads inside one operator (ort; tract runs on one thread). Default: ONNX
    /// Runtime's, one per physical core.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// ONNX Runtime graph optimization level (verification runs the original
    /// at `disable`, its reference, and the optimized model at this level).
    #[arg(long, value_name = "disable|basic|extended|all", default_value = infopt_ops::backend_args::DEFAULT_ORT_OPT_LEVEL)]
    pub ort_opt_level: String,
    /// ONNX Runtime execution providers in priority order (repeatable or comma-separated,
    /// e.g. cuda,cpu). Default: CPU.
    #[arg(long = "ep", value_name = "NAME", value_delimiter = ',')]
    pub execution_providers: Vec<String>,
    /// An option of a provider --ep lists, EP:KEY=VALUE, passed to ONNX Runtime as it is
    /// (repeatable), e.g. cuda:prefer_nhwc=1, cuda:use_tf32=0.
    #[arg(long = "ep-option", value_name = "EP:KEY=VALUE")]
    pub ep_options: Vec<String>,
    /// Time with inputs and outputs bound on the device (ONNX Runtime IoBinding; needs
    /// --backend ort --ep cuda): inputs copied there once, outputs written to device
    /// buffers allocated once. Without it, each timed run copies inputs in and outputs
    /// out (host to host, into reused buffers). Reports say which was measured.
    #[arg(long)]
    pub io_binding: bool,
}

impl From<BackendArgs> for infopt_ops::backend_args::BackendSettings {
    fn from(a: BackendArgs) -> Self {
        infopt_ops::backend_args::BackendSettings {
            backend: a.backend,
            ort_dylib: a.ort_dylib,
            threads: a.threads,
            ort_opt_level: a.ort_opt_level,
            execution_providers: a.execution_providers,
            ep_options: a.ep_options,
            io_binding: a.io_binding,
        }
    }
}

/// The input options shared by `bench` and `compare`.
#[derive(clap::Args, Debug, Clone)]
pub struct InputArgs {
    /// Input shape `NAME:1x3x224x224`, or symbol values `NAME:batch=1,seq=128` (repeatable).
    /// Symbols nothing binds take 1 (bench, compare); optimize verifies with
    /// distinct values 2, 3, ... per symbol.
    #[arg(long = "input-shape", value_name = "NAME:DIMS")]
    pub input_shapes: Vec<String>,
    /// Run on these arrays instead of generated ones: an .npz, one .npy, or a folder of
    /// .npy files, named after the model inputs. Their shapes fix the input shapes.
    #[arg(long, value_name = "FILE.npz|DIR")]
    pub inputs: Option<std::path::PathBuf>,
    /// Seed of the generated inputs (default 0; for optimize, the pipeline's verify.seed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Generated integer inputs are drawn from [0, VOCAB) (token ids, indices);
    /// `*token_type*` inputs from [0, 2); `*mask*` inputs are all ones.
    #[arg(long, default_value_t = infopt_ops::inputs_arg::DEFAULT_VOCAB, value_name = "VOCAB")]
    pub vocab: u64,
}

impl From<InputArgs> for infopt_ops::inputs_arg::InputSettings {
    fn from(a: InputArgs) -> Self {
        infopt_ops::inputs_arg::InputSettings {
            input_shapes: a.input_shapes,
            inputs: a.inputs,
            seed: a.seed,
            vocab: a.vocab,
            arrays: None,
        }
    }
}

// `default_missing_value` is ops' DEFAULT_EXTERNAL_THRESHOLD (a test in
// commands/mod.rs holds them equal: clap takes the text, not the number).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SaveArgs {
    /// Store every initializer of at least THRESHOLD bytes in an external-data
    /// file next to the output (default threshold 1024). Without this flag,
    /// tensors that were external stay external, and a model over 2 GiB gets
    /// external data automatically.
    #[arg(long, value_name = "THRESHOLD", num_args = 0..=1, default_missing_value = "1024", conflicts_with = "inline")]
    pub external_data: Option<u64>,
    /// Store every tensor inside the model file (fails above protobuf's 2 GiB limit).
    #[arg(long)]
    pub inline: bool,
    /// Name of the external-data file (default: `<output file name>.data`; when the
    /// existing output reads that file, `NAME.1.data` is written and the old file
    /// removed once the new model is in place).
    #[arg(long, value_name = "FILE")]
    pub data_file: Option<String>,
}

impl From<SaveArgs> for infopt_ops::save_args::SaveSettings {
    fn from(a: SaveArgs) -> Self {
        infopt_ops::save_args::SaveSettings {
            external_data: a.external_data,
            inline: a.inline,
            data_file: a.data_file,
        }
    }
}

/// `--gate` and `--baseline`, shared by `optimize`, `compare` and `bench`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct GateArgs {
    /// A release gate, NAME=VALUE or NAME@OUTPUT=VALUE (repeatable): min_cosine, max_abs,
    /// max_rel, min_topk_agreement (FRACTION or FRACTION,k=K), max_latency_ratio (RATIO of
    /// medians, or RATIO,q=0.1 for 10th percentiles),
    /// max_file_size (10M, 1G), max_nodes, forbid_ops (A,B), max_opset. A failed gate exits 5.
    #[arg(long = "gate", value_name = "NAME=VALUE")]
    pub gates: Vec<String>,
    /// With max_latency_ratio: compare against the latency samples of an earlier JSON
    /// report (--report FILE.json of a run with a latency gate) instead of the original.
    #[arg(long, value_name = "FILE.json")]
    pub baseline: Option<PathBuf>,
}

impl From<GateArgs> for infopt_ops::gates::GateSettings {
    fn from(a: GateArgs) -> Self {
        infopt_ops::gates::GateSettings {
            gates: a.gates,
            baseline: a.baseline,
        }
    }
}

/// INT8 options of `optimize` (and `build-engine`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Int8Args {
    /// Quantize to INT8: adds a quantize-int8 step after the pipeline's
    /// passes (unless it has one) and calibrates on --calib-data.
    #[arg(long)]
    pub int8: bool,
    /// Calibration data: a folder of .npz/.npy samples, a stacked .npz, an
    /// image folder (with --preprocess), or random:N (smoke tests only).
    #[arg(long, value_name = "PATH|random:N")]
    pub calib_data: Option<String>,
    /// Image preprocessing YAML for an image folder.
    #[arg(long, value_name = "FILE.yaml")]
    pub preprocess: Option<PathBuf>,
    /// Range method (default auto: per tensor, the full range of bounded
    /// outputs, elsewhere the candidate with the least quantization error).
    #[arg(long, value_name = "auto|minmax|percentile|entropy|mse")]
    pub calib_method: Option<String>,
    /// Calibration samples (default 256); the samples after them are held out.
    #[arg(long, value_name = "N")]
    pub calib_samples: Option<usize>,
    /// Held-out samples the INT8 model is judged on (default 256).
    #[arg(long, value_name = "N")]
    pub held_out: Option<usize>,
    /// Accuracy target: every output's cosine similarity with the float
    /// model on the held-out samples (default 0.99). Below it, the most
    /// harmful layers are kept in float until it is met.
    #[arg(long, value_name = "COSINE")]
    pub int8_min_cosine: Option<f64>,
    /// Accuracy target of classifier outputs (Softmax or a dense head):
    /// the fraction of rows whose top class is the float model's (default 0.99).
    #[arg(long, value_name = "FRACTION")]
    pub int8_min_top1: Option<f64>,
    /// With a metric given through the Python API (`infopt.optimize(...,
    /// metric=f)`): the most the INT8 model's score may fall below the
    /// float model's on the held-out samples (default 0.01); the metric is
    /// then the whole accuracy target.
    #[arg(long, value_name = "DROP")]
    pub int8_max_drop: Option<f64>,
    /// Ranges from an earlier `infopt calibrate` (or a TensorRT/ORT cache)
    /// instead of calibrating.
    #[arg(long, value_name = "ranges.json")]
    pub ranges: Option<PathBuf>,
    /// The JSON report (--report FILE.json) of an earlier --int8 run: its
    /// timings decide instead of the clock, so the same model, data and
    /// options write the same bytes as that run
    #[arg(long, value_name = "EARLIER.json")]
    pub int8_timings: Option<PathBuf>,
}

impl From<Int8Args> for infopt_ops::int8::Int8Settings {
    fn from(a: Int8Args) -> Self {
        infopt_ops::int8::Int8Settings {
            int8: a.int8,
            calib_data: a.calib_data,
            calib_stream: None,
            preprocess: a.preprocess,
            calib_method: a.calib_method,
            calib_samples: a.calib_samples,
            held_out: a.held_out,
            int8_min_cosine: a.int8_min_cosine,
            int8_min_top1: a.int8_min_top1,
            int8_max_drop: a.int8_max_drop,
            ranges: a.ranges,
            int8_timings: a.int8_timings,
        }
    }
}
