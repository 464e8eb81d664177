//! Runs a pipeline: passes in order, fixed-point groups until nothing changes
//! (or the iteration budget is spent), validation after each pass when asked,
//! and a record of time, rewrites and declined rewrites per pass.

use std::time::{Duration, Instant};

use infopt_ir::Model;

use crate::config::{PassConfig, PipelineConfig, Step};
use crate::pass::{Declined, PassCx, PassError, SideData};

#[derive(Clone, Debug, Default)]
pub struct DriverOptions {
    /// Validate the graph after every pass (always on in tests).
    pub validate: bool,
    /// Pass names to skip.
    pub disable: Vec<String>,
    /// Stop after the first run of this pass.
    pub stop_after: Option<String>,
    /// The pipeline is a built-in one (see `PassCx::builtin_pipeline`).
    pub builtin_pipeline: bool,
}

/// Statistics of one pass within the pipeline (summed over fixed-point iterations).
#[derive(Clone, Debug, Default)]
pub struct PassRecord {
    pub name: &'static str,
    /// Index of the fixed-point group this pass belongs to, if any.
    pub group: Option<usize>,
    pub runs: usize,
    pub rewrites: usize,
    pub time: Duration,
    pub nodes_before: usize,
    pub nodes_after: usize,
    /// Nodes this pass removed (negative: added), summed over its runs.
    pub nodes_removed: i64,
}

#[derive(Clone, Debug, Default)]
pub struct PipelineRun {
    pub records: Vec<PassRecord>,
    pub declined: Vec<Declined>,
    pub notes: Vec<String>,
    /// Facts for the JSON report only (see `PassCx::details`).
    pub details: Vec<String>,
    /// Fixed-point groups that hit `max_iterations` while still changing the model.
    pub budget_exhausted: Vec<String>,
    /// Set when `--stop-after` (or the observer) ended the pipeline early.
    pub stopped_after: Option<String>,
}

/// What the observer wants after seeing a pass's result.
pub enum Flow {
    Continue,
    Stop,
}

/// Called after every pass run that changed the model, with the pass name.
pub type Observer<'a> = dyn FnMut(&'static str, &Model) -> Result<Flow, PassError> + 'a;

pub fn run_pipeline(
    model: &mut Model,
    config: &PipelineConfig,
    options: &DriverOptions,
    observer: &mut Observer<'_>,
) -> Result<PipelineRun, PassError> {
    run_pipeline_with(model, config, options, SideData::default(), observer)
}

/// [`run_pipeline`], handing `side` data (ranges, a precision map) to the passes.
pub fn run_pipeline_with(
    model: &mut Model,
    config: &PipelineConfig,
    options: &DriverOptions,
    side: SideData,
    observer: &mut Observer<'_>,
) -> Result<PipelineRun, PassError> {
    for name in &options.disable {
        PassConfig::from_name(name).map_err(PassError::Config)?;
    }
    if let Some(name) = &options.stop_after {
        PassConfig::from_name(name).map_err(PassError::Config)?;
        if !config.pass_names().contains(&name.as_str()) {
            return Err(PassError::Config(format!(
                "the pipeline does not run '{name}', so it cannot stop after it"
            )));
        }
    }
    let mut cx = PassCx::new(config.target);
    cx.side = side;
    cx.builtin_pipeline = options.builtin_pipeline;
    // The pipeline's `precision:` map, unless the caller handed its own.
    if let Some(map) = &config.precision
        && cx.side.get::<crate::precision::PrecisionMap>().is_none()
    {
        cx.side.insert(map.clone());
    }
    cx.opset = model.opset("").unwrap_or(1);
    let mut run = PipelineRun::default();
    let mut group_index = 0;
    for step in &config.passes {
        let stop = match step {
            Step::Pass(p) => {
                let (_, stop) = run_one(model, p, None, options, &mut cx, &mut run, observer)?;
                stop
            }
            Step::FixedPoint {
                max_iterations,
                passes,
            } => {
                let group = group_index;
                group_index += 1;
                let mut stop = false;
                let mut iteration = 0;
                loop {
                    iteration += 1;
                    let mut changed = 0;
                    for p in passes {
                        let (n, s) =
                            run_one(model, p, Some(group), options, &mut cx, &mut run, observer)?;
                        changed += n;
                        if s {
                            stop = true;
                            break;
                        }
                    }
                    if stop || changed == 0 {
                        break;
                    }
                    if iteration >= *max_iterations {
                        let names: Vec<&str> = passes.iter().map(|p| p.name()).collect();
                        run.budget_exhausted.push(format!(
                            "fixed-point group [{}] still changing the model after {max_iterations} iterations",
                            names.join(", ")
                        ));
                        break;
                    }
                }
                stop
            }
        };
        if stop {
            break;
        }
    }
    raise_ir_version_for_initializers(model, &mut cx);
    run.declined = std::mem::take(&mut cx.declined);
    run.notes = std::mem::take(&mut cx.notes);
    run.details = std::mem::take(&mut cx.details);
    Ok(run)
}

/// IR versions below 4 require every initializer to be an input of its
/// graph. A pass that makes a constant an initializer (folding, inlining an
/// If branch) would leave such a file one ONNX Runtime refuses ("in
/// initializer but not in graph input": fuzz seed 90909 case 1616, an
/// `ir_version` of 0 on an opset-16 model); IR 4 only lifted that rule.
fn raise_ir_version_for_initializers(model: &mut Model, cx: &mut PassCx) {
    fn has_loose_initializer(g: &infopt_ir::Graph) -> bool {
        g.initializers().any(|(v, _)| !g.is_graph_input(v))
            || g.nodes()
                .any(|(_, n)| n.subgraphs().any(has_loose_initializer))
    }
    if model.meta.ir_version.is_some_and(|v| v < 4) && has_loose_initializer(&model.graph) {
        model.meta.ir_version = Some(4);
        cx.note("ir_version raised to 4: the output has initializers that are not graph inputs, which IR 3 and below forbid");
    }
}

/// Runs one pass; returns (rewrites, stop).
fn run_one(
    model: &mut Model,
    config: &PassConfig,
    group: Option<usize>,
    options: &DriverOptions,
    cx: &mut PassCx,
    run: &mut PipelineRun,
    observer: &mut Observer<'_>,
) -> Result<(usize, bool), PassError> {
    let name = config.name();
    if options.disable.iter().any(|d| d == name) {
        return Ok((0, false));
    }
    let pass = config.build();
    let nodes_before = model.graph.total_node_count();
    cx.current = name;
    let start = Instant::now();
    infopt_ir::context::clear_node();
    // A panic leaves the model half-rewritten; the error stops the pipeline,
    // so nothing downstream sees that model.
    let rewrites = crate::panic_guard::catch_quietly(|| {
        inject_panic(name, model);
        pass.run(model, cx)
    })
    .map_err(|c| PassError::Panicked {
        pass: name.to_string(),
        node: infopt_ir::context::current_node(),
        message: c.message,
        location: c.location,
    })??;
    let elapsed = start.elapsed();
    // What the pass read of the mapped model need not stay resident next to
    // what it created (see `release_mapped_pages`).
    infopt_ir::external::release_mapped_pages();
    if options.validate {
        model.graph.validate().map_err(|e| PassError::BrokeGraph {
            pass: name.to_string(),
            detail: e.to_string(),
        })?;
    }
    let nodes_after = model.graph.total_node_count();
    let record = match run
        .records
        .iter_mut()
        .find(|r| r.name == name && r.group == group)
    {
        Some(r) => r,
        None => {
            run.records.push(PassRecord {
                name,
                group,
                nodes_before,
                ..Default::default()
            });
            run.records.last_mut().expect("just pushed")
        }
    };
    record.runs += 1;
    record.rewrites += rewrites;
    record.time += elapsed;
    record.nodes_after = nodes_after;
    record.nodes_removed += nodes_before as i64 - nodes_after as i64;
    let mut stop = false;
    if rewrites > 0
        && let Flow::Stop = observer(name, model)?
    {
        run.stopped_after = Some(name.to_string());
        stop = true;
    }
    if options.stop_after.as_deref() == Some(name) {
        run.stopped_after = Some(name.to_string());
        stop = true;
    }
    Ok((rewrites, stop))
}

/// Test hook (debug builds only): `INFOPT_INJECT_PANIC=<pass>` makes that pass
/// panic at the first node of the graph, so tests can check how a crash in a
/// pass reaches the user.
#[cfg(debug_assertions)]
fn inject_panic(pass: &str, model: &Model) {
    if std::env::var("INFOPT_INJECT_PANIC").is_ok_and(|p| p == pass) {
        if let Some((_, node)) = model.graph.nodes().next() {
            infopt_ir::context::enter_node(node);
        }
        panic!("injected panic\nsecond line");
    }
}

#[cfg(not(debug_assertions))]
fn inject_panic(_: &str, _: &Model) {}
