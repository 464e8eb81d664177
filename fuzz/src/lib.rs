//! Structure-aware fuzzing of what `infopt optimize` does to a file: mutated
//! fixture models go through load → validation → the default pipeline
//! (configs/default.yaml) → save, in process. Every case must end in success
//! or in a one-line error; a panic (inside a pass or outside), a multi-line
//! error or a case running longer than the time limit (a hang) is a finding.
//!
//! Cases are numbered; case `i` of seed `s` is always the same model, so a
//! finding is replayed with `--seed s --case i`.

pub mod mutate;
pub mod rng;
pub mod sizes;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use infopt_ir::proto::ModelProto;
use infopt_passes::panic_guard::catch_quietly;
use infopt_passes::{DriverOptions, Flow, PassError, PipelineConfig, run_pipeline};
use prost::Message;

use crate::rng::Rng;

/// The repository root (fixtures, configs).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A seed model: its decoded message and the folder its external data lives in.
pub struct Seed {
    pub name: String,
    pub proto: ModelProto,
    pub dir: PathBuf,
}

/// Every fixture model (fixtures/models/*.onnx and models/exported/*.onnx).
pub fn corpus() -> Vec<Seed> {
    let dirs = ["fixtures/models", "fixtures/models/exported"].map(|sub| repo_root().join(sub));
    let out = corpus_from(&dirs).unwrap_or_else(|e| panic!("{e}"));
    assert!(out.len() >= 10, "expected the committed fixtures");
    out
}

/// The `.onnx` files of `dirs` (not recursive), in name order: real models a
/// user brings (`--corpus DIR`), whose mutations the fixtures cannot stand
/// in for. A file that is not a valid model is an error naming it.
pub fn corpus_from(dirs: &[PathBuf]) -> Result<Vec<Seed>, String> {
    let mut out = Vec::new();
    for dir in dirs {
        let entries =
            std::fs::read_dir(dir).map_err(|e| format!("corpus folder {}: {e}", dir.display()))?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
            .collect();
        files.sort();
        for p in files {
            let bytes = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let proto = ModelProto::decode(Bytes::from(bytes))
                .map_err(|e| format!("{}: not an ONNX model ({e})", p.display()))?;
            out.push(Seed {
                name: p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                proto,
                dir: dir.clone(),
            });
        }
    }
    if out.is_empty() {
        return Err("the corpus folders hold no .onnx file".into());
    }
    Ok(out)
}

/// The default pipeline, as `infopt optimize` runs it without `-c`.
pub fn default_pipeline() -> PipelineConfig {
    let path = repo_root().join("configs/default.yaml");
    let text = std::fs::read_to_string(&path).expect("configs/default.yaml");
    PipelineConfig::from_yaml(&text, "configs/default.yaml").expect("default pipeline parses")
}

/// How one case ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Loaded, optimized and saved.
    Saved,
    /// Refused with a one-line error (the stage that refused it).
    Rejected(&'static str),
    /// A pass left a graph that does not validate (reported, not a crash).
    BrokeGraph(String),
    /// An error whose message has a line break.
    MultiLine(String),
    /// A panic, caught: where and what.
    Panicked(String),
}

/// The model of case `index`: a seed, mutated.
pub fn make_case(corpus: &[Seed], seed: u64, index: u64) -> (usize, Vec<&'static str>, Vec<u8>) {
    let mut rng = Rng::for_case(seed, index);
    let which = rng.below(corpus.len());
    let mut proto = corpus[which].proto.clone();
    let mutations = mutate::mutate(&mut proto, &mut rng);
    (which, mutations, proto.encode_to_vec())
}

fn error<E: std::fmt::Display>(stage: &'static str, e: E) -> Outcome {
    let text = e.to_string();
    if text.contains('\n') {
        Outcome::MultiLine(format!("{stage}: {text:?}"))
    } else {
        Outcome::Rejected(stage)
    }
}

/// Load → validate → default pipeline (validating after each pass) → save to
/// `out_dir`, with every panic caught.
pub fn run_case(bytes: Vec<u8>, dir: &Path, out_dir: &Path, config: &PipelineConfig) -> Outcome {
    let result = catch_quietly(|| {
        let mut model = match infopt_ir::load::model_from_bytes(
            Bytes::from(bytes),
            dir,
            Path::new("fuzz.onnx"),
        ) {
            Ok(m) => m,
            Err(e) => return error("load", e),
        };
        if let Err(e) = model.graph.validate() {
            return error("validate", e);
        }
        let options = DriverOptions {
            validate: true,
            ..Default::default()
        };
        match run_pipeline(&mut model, config, &options, &mut |_, _| Ok(Flow::Continue)) {
            Ok(_) => {}
            Err(e @ PassError::Panicked { .. }) => return Outcome::Panicked(e.to_string()),
            Err(e @ PassError::BrokeGraph { .. }) => {
                let text = e.to_string();
                return if text.contains('\n') {
                    Outcome::MultiLine(text)
                } else {
                    Outcome::BrokeGraph(text)
                };
            }
            Err(e) => return error("pipeline", e),
        }
        match model.save(
            &out_dir.join("out.onnx"),
            &infopt_ir::SaveOptions::default(),
        ) {
            Ok(_) => Outcome::Saved,
            Err(e) => error("save", e),
        }
    });
    match result {
        Ok(o) => o,
        Err(c) => Outcome::Panicked(format!(
            "{} ({})",
            c.message,
            c.location.unwrap_or_default()
        )),
    }
}

/// What a run is asked to do.
#[derive(Clone, Debug)]
pub struct FuzzConfig {
    pub seed: u64,
    /// Stop after this many cases...
    pub cases: u64,
    /// ...or after this long, whichever comes first.
    pub time_budget: Duration,
    /// A case running longer than this is a hang.
    pub case_limit: Duration,
    pub threads: usize,
    /// Give up after this many hangs (each leaves a thread spinning).
    pub max_hangs: usize,
    /// Append each case number to this file before running it, so a case
    /// that kills the process (out of memory) can be found afterwards.
    pub trace: Option<PathBuf>,
    /// Seed models: these folders' `.onnx` files instead of the fixtures.
    pub corpus_dirs: Vec<PathBuf>,
}

/// A finding: the case number (replay with the same seed), the seed model,
/// the mutations and what happened.
#[derive(Clone, Debug)]
pub struct Finding {
    pub case: u64,
    pub model: String,
    pub mutations: Vec<&'static str>,
    pub what: String,
}

#[derive(Debug, Default)]
pub struct Report {
    pub cases: u64,
    pub saved: u64,
    pub rejected: u64,
    /// Rejections by stage (load, validate, pipeline, save).
    pub rejected_at: std::collections::BTreeMap<&'static str, u64>,
    pub broke_graph: Vec<Finding>,
    pub panics: Vec<Finding>,
    pub multi_line: Vec<Finding>,
    pub hangs: Vec<Finding>,
    pub elapsed: Duration,
}

impl Report {
    pub fn cases_per_second(&self) -> f64 {
        self.cases as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// One line with the figures.
    pub fn summary(&self) -> String {
        format!(
            "{} cases in {:.1} s ({:.0} cases/s): {} saved, {} rejected {:?}, {} panics, {} hangs, {} multi-line errors, {} broken graphs",
            self.cases,
            self.elapsed.as_secs_f64(),
            self.cases_per_second(),
            self.saved,
            self.rejected,
            self.rejected_at,
            self.panics.len(),
            self.hangs.len(),
            self.multi_line.len(),
            self.broke_graph.len()
        )
    }
}

/// What a worker is doing, for the watchdog.
struct Slot {
    case: Option<(u64, Instant)>,
    /// Set by the watchdog: this worker is stuck and has been replaced.
    abandoned: bool,
}

struct Shared {
    corpus: Vec<Seed>,
    config: PipelineConfig,
    fuzz: FuzzConfig,
    next: AtomicU64,
    stop: AtomicBool,
    report: Mutex<Report>,
    trace: Option<Mutex<std::fs::File>>,
}

fn record(shared: &Shared, case: u64, outcome: Outcome) {
    let mut r = shared.report.lock().unwrap_or_else(|p| p.into_inner());
    r.cases += 1;
    let finding = |what: String| {
        let (which, mutations, _) = make_case(&shared.corpus, shared.fuzz.seed, case);
        Finding {
            case,
            model: shared.corpus[which].name.clone(),
            mutations,
            what,
        }
    };
    match outcome {
        Outcome::Saved => r.saved += 1,
        Outcome::Rejected(stage) => {
            r.rejected += 1;
            *r.rejected_at.entry(stage).or_default() += 1;
        }
        Outcome::BrokeGraph(t) => {
            r.rejected += 1;
            if r.broke_graph.len() < 100 {
                r.broke_graph.push(finding(t));
            }
        }
        Outcome::MultiLine(t) => r.multi_line.push(announce(finding(t))),
        Outcome::Panicked(t) => r.panics.push(announce(finding(t))),
    }
}

/// Prints a finding as soon as it is made: a runaway case may still take the
/// whole process down later (a hung thread cannot be stopped).
fn announce(f: Finding) -> Finding {
    eprintln!(
        "finding: case {} ({} with {:?}): {}",
        f.case, f.model, f.mutations, f.what
    );
    f
}

fn worker(shared: Arc<Shared>, slot: Arc<Mutex<Slot>>) {
    let Ok(out) = tempfile::Builder::new()
        .prefix("infopt-fuzz-")
        .tempdir_in(scratch_dir())
    else {
        return;
    };
    while !shared.stop.load(Ordering::Relaxed) {
        let case = shared.next.fetch_add(1, Ordering::Relaxed);
        if case >= shared.fuzz.cases {
            break;
        }
        let (which, _, bytes) = make_case(&shared.corpus, shared.fuzz.seed, case);
        if let Some(t) = &shared.trace {
            use std::io::Write;
            let mut f = t.lock().unwrap_or_else(|p| p.into_inner());
            let _ = writeln!(f, "{case}");
        }
        slot.lock().unwrap_or_else(|p| p.into_inner()).case = Some((case, Instant::now()));
        let outcome = run_case(bytes, &shared.corpus[which].dir, out.path(), &shared.config);
        let mut s = slot.lock().unwrap_or_else(|p| p.into_inner());
        if s.abandoned {
            // The watchdog already reported this case as a hang.
            return;
        }
        s.case = None;
        drop(s);
        record(&shared, case, outcome);
    }
}

/// Outputs go to memory when the machine has /dev/shm (fsync is free there).
fn scratch_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

struct Worker {
    slot: Arc<Mutex<Slot>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

fn spawn(shared: &Arc<Shared>) -> Worker {
    let slot = Arc::new(Mutex::new(Slot {
        case: None,
        abandoned: false,
    }));
    let (sh, sl) = (shared.clone(), slot.clone());
    // Deep subgraph nesting recurses; give workers a main-thread-sized stack.
    let handle = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || worker(sh, sl))
        .ok();
    Worker { slot, handle }
}

/// Runs the cases on worker threads, with a watchdog that reports a case
/// running past `case_limit` as a hang and replaces its worker (a stuck
/// thread cannot be stopped; it is left behind).
pub fn fuzz(config: FuzzConfig) -> Report {
    let seeds = if config.corpus_dirs.is_empty() {
        corpus()
    } else {
        corpus_from(&config.corpus_dirs).unwrap_or_else(|e| panic!("{e}"))
    };
    let shared = Arc::new(Shared {
        corpus: seeds,
        config: default_pipeline(),
        fuzz: config.clone(),
        next: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        report: Mutex::new(Report::default()),
        trace: config
            .trace
            .as_ref()
            .and_then(|p| std::fs::File::create(p).ok())
            .map(Mutex::new),
    });
    let start = Instant::now();
    let mut workers: Vec<Worker> = (0..config.threads.max(1)).map(|_| spawn(&shared)).collect();
    loop {
        std::thread::sleep(Duration::from_millis(50));
        if start.elapsed() > config.time_budget {
            shared.stop.store(true, Ordering::Relaxed);
        }
        let mut replacements = Vec::new();
        for w in &mut workers {
            let mut s = w.slot.lock().unwrap_or_else(|p| p.into_inner());
            if s.abandoned {
                continue;
            }
            let Some((case, since)) = s.case else {
                continue;
            };
            if since.elapsed() <= config.case_limit {
                continue;
            }
            s.abandoned = true;
            drop(s);
            w.handle = None;
            let (which, mutations, _) = make_case(&shared.corpus, config.seed, case);
            let mut r = shared.report.lock().unwrap_or_else(|p| p.into_inner());
            r.cases += 1;
            r.hangs.push(announce(Finding {
                case,
                model: shared.corpus[which].name.clone(),
                mutations,
                what: format!("hang: still running after {:?}", config.case_limit),
            }));
            if r.hangs.len() >= config.max_hangs {
                shared.stop.store(true, Ordering::Relaxed);
            } else {
                replacements.push(());
            }
        }
        for () in replacements {
            workers.push(spawn(&shared));
        }
        let running = workers
            .iter()
            .any(|w| w.handle.as_ref().is_some_and(|h| !h.is_finished()));
        if !running {
            break;
        }
    }
    for w in &mut workers {
        if let Some(h) = w.handle.take() {
            let _ = h.join();
        }
    }
    let mut r = shared.report.lock().unwrap_or_else(|p| p.into_inner());
    let mut report = std::mem::take(&mut *r);
    report.elapsed = start.elapsed();
    report
}
