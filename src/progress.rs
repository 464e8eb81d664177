//! Where the commands' progress lines go, and where they may be stopped.
//!
//! The commands report what each stage did ("loaded m.onnx (120 nodes) in
//! 4 ms") and call [`done`] between stages and after every pass that changed
//! the model. On the command line the lines go to stderr and a stage never
//! stops (Ctrl-C ends the process). A library caller (the Python module)
//! installs a [`Sink`] for the duration of a call: it receives the lines
//! and may stop the command at the next stage boundary, which then fails
//! with [`Exit::Interrupted`]. The sink is per thread: a command runs on the
//! thread that called it.

use std::cell::RefCell;

use crate::exit::{CliError, CliResult, Exit};

/// Receives a command's progress.
pub trait Sink {
    /// One line about a finished step of `stage` ("load", "passes", "pass",
    /// "verify", "save", "calibrate", "bench", "build").
    fn line(&self, stage: &str, line: &str);
    /// Whether the command should go on; asked between stages and passes.
    /// Once it says no it must keep saying no: a pass driver that was asked
    /// to stop only ends its pipeline, and the command asks again after it.
    fn proceed(&self) -> bool {
        true
    }
}

thread_local! {
    static SINK: RefCell<Option<Box<dyn Sink>>> = const { RefCell::new(None) };
}

/// Runs `f` with `sink` receiving its progress, then restores what was there.
pub fn with_sink<R>(sink: Box<dyn Sink>, f: impl FnOnce() -> R) -> R {
    let previous = SINK.with(|s| s.replace(Some(sink)));
    // Restored on unwind too: a panic inside `f` is caught further up.
    struct Restore(Option<Option<Box<dyn Sink>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take().flatten();
            SINK.with(|s| *s.borrow_mut() = previous);
        }
    }
    let _restore = Restore(Some(previous));
    f()
}

/// Reports one line: to the sink when one is installed, else to stderr.
pub fn note(stage: &str, line: impl AsRef<str>) {
    let line = line.as_ref();
    let sent = SINK.with(|s| match &*s.borrow() {
        Some(sink) => {
            sink.line(stage, line);
            true
        }
        None => false,
    });
    if !sent {
        eprintln!("{line}");
    }
}

/// Whether a caller installed a sink (then terminal progress bars stay off:
/// the caller shows progress its own way).
pub fn has_sink() -> bool {
    SINK.with(|s| s.borrow().is_some())
}

/// Reports a line only a sink wants (one per pass that changed the model):
/// the command line prints nothing for it.
pub fn event(stage: &str, line: impl AsRef<str>) {
    SINK.with(|s| {
        if let Some(sink) = &*s.borrow() {
            sink.line(stage, line.as_ref());
        }
    });
}

/// A stage boundary: fails with [`Exit::Interrupted`] when the caller asked
/// to stop.
pub fn checkpoint() -> CliResult {
    let go_on = SINK.with(|s| s.borrow().as_ref().is_none_or(|sink| sink.proceed()));
    if go_on {
        Ok(())
    } else {
        Err(CliError::new(Exit::Interrupted, "interrupted"))
    }
}

/// Reports a finished step, then checks whether to go on.
pub fn done(stage: &str, line: impl AsRef<str>) -> CliResult {
    note(stage, line);
    checkpoint()
}

/// Progress of a long stage, step by step: a bar on a terminal, else one
/// line per step on stderr (or to the sink, which also gets every step as
/// an event), so that nothing that runs for seconds is silent.
pub struct Steps {
    stage: &'static str,
    what: String,
    total: Option<usize>,
    done: usize,
    /// Lines closer together than this are skipped (not the last one).
    min_interval: f64,
    last_line: Option<std::time::Instant>,
    started: std::time::Instant,
    bar: Option<indicatif::ProgressBar>,
}

/// Whether progress may draw a bar: stderr is a terminal and no caller
/// installed a sink.
fn bar_allowed() -> bool {
    use std::io::IsTerminal;
    !has_sink() && std::io::stderr().is_terminal()
}

impl Steps {
    /// `total` steps of `what` (None: unknown); lines at most every
    /// `min_interval` seconds (0: every step).
    pub fn new(stage: &'static str, what: &str, total: Option<usize>, min_interval: f64) -> Self {
        let bar = bar_allowed().then(|| {
            let b = match total {
                Some(t) => indicatif::ProgressBar::new(t as u64),
                None => indicatif::ProgressBar::new_spinner(),
            };
            let template = if total.is_some() {
                "{prefix} [{bar:30}] {pos}/{len} {elapsed_precise} {wide_msg}"
            } else {
                "{prefix} {spinner} {pos} {elapsed_precise} {wide_msg}"
            };
            b.set_style(
                indicatif::ProgressStyle::with_template(template)
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            b.set_prefix(what.to_string());
            b
        });
        Steps {
            stage,
            what: what.to_string(),
            total,
            done: 0,
            min_interval,
            last_line: None,
            started: std::time::Instant::now(),
            bar,
        }
    }

    /// The line for step `done` (1-based) with `msg`.
    pub fn line_for(what: &str, done: usize, total: Option<usize>, msg: &str) -> String {
        let count = match total {
            Some(t) => format!("{done}/{t}"),
            None => format!("{done}"),
        };
        if msg.is_empty() {
            format!("{what}: {count}")
        } else if msg.starts_with(what) {
            // The message names the stage itself.
            format!("{msg} [{count}]")
        } else {
            format!("{what} {count}: {msg}")
        }
    }

    /// One more step done, described by `msg`.
    pub fn step(&mut self, msg: impl AsRef<str>) {
        self.done += 1;
        self.set(self.done, msg);
    }

    /// Step `done` reached, described by `msg`.
    pub fn set(&mut self, done: usize, msg: impl AsRef<str>) {
        self.done = done;
        let msg = msg.as_ref();
        let line = Self::line_for(&self.what, done, self.total, msg);
        event(self.stage, &line);
        if let Some(b) = &self.bar {
            b.set_position(done as u64);
            b.set_message(msg.to_string());
            return;
        }
        let last = self.total.is_some_and(|t| done >= t);
        let due = self
            .last_line
            .is_none_or(|t| t.elapsed().as_secs_f64() >= self.min_interval);
        if due || last {
            self.last_line = Some(std::time::Instant::now());
            if !has_sink() {
                eprintln!("{line}");
            }
        }
    }

    /// Ends the bar (the lines need no end).
    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }

    /// Seconds since the stage started.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

/// A reference to a value that may move between threads but not be shared
/// (`Send`, not `Sync`: the opened TensorRT), handed to [`ticking`]'s
/// worker: the calling thread only waits for the worker and never touches
/// the value meanwhile, so one thread at a time uses it.
pub struct Exclusive<'a, T>(&'a T);

// SAFETY: `ticking` joins its worker before it returns, and its caller is
// blocked inside it all that time: the value is used by one thread at a
// time, which is what `T: Send` allows.
unsafe impl<T: Send> Send for Exclusive<'_, T> {}

impl<'a, T> Exclusive<'a, T> {
    /// # Safety
    /// Until the [`ticking`] call it is moved into returns, nothing but
    /// that call's worker may use `value`.
    pub unsafe fn new(value: &'a T) -> Self {
        Exclusive(value)
    }
    /// The value (a method, so that a closure captures the whole wrapper).
    pub fn get(&self) -> &'a T {
        self.0
    }
}

/// How often [`ticking`] reports a call still running.
pub const TICK: std::time::Duration = std::time::Duration::from_secs(2);

/// A line from a worker thread, relayed by [`ticking`] to the calling
/// thread's sink (the sink is per thread).
struct Relay(std::sync::mpsc::Sender<Tick>);

enum Tick {
    Line(String, String),
    Done,
}

impl Sink for Relay {
    fn line(&self, stage: &str, line: &str) {
        let _ = self.0.send(Tick::Line(stage.to_string(), line.to_string()));
    }
}

/// Runs `f` (one long call: a verification, an engine build) on a worker
/// thread while this thread says, every `every`, that it is still running
/// ("`what`: 4 s"): a spinner on a terminal, a line per tick on stderr
/// otherwise, and every tick to the caller's sink, so that no call longer
/// than `every` is silent, from the command line or from Python. Lines `f`
/// reports itself reach this thread's sink too. `f` cannot be interrupted
/// (the sink's `proceed` is asked after it).
pub fn ticking<R: Send>(
    stage: &'static str,
    what: &str,
    every: std::time::Duration,
    f: impl FnOnce() -> R + Send,
) -> R {
    use std::sync::mpsc::{RecvTimeoutError, channel};
    let relay_lines = has_sink();
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        let (tx, rx) = channel::<Tick>();
        let worker = scope.spawn(move || {
            let done = tx.clone();
            let r = if relay_lines {
                with_sink(Box::new(Relay(tx)), f)
            } else {
                f()
            };
            let _ = done.send(Tick::Done);
            r
        });
        let mut steps: Option<Steps> = None;
        loop {
            match rx.recv_timeout(every) {
                Ok(Tick::Line(stage, line)) => SINK.with(|s| {
                    if let Some(sink) = &*s.borrow() {
                        sink.line(&stage, &line);
                    }
                }),
                Ok(Tick::Done) | Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    let s = steps.get_or_insert_with(|| Steps::new(stage, what, None, 0.0));
                    s.step(format!("{what}: {:.0} s", started.elapsed().as_secs_f64()));
                }
            }
        }
        drop(steps);
        match worker.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

impl Drop for Steps {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    struct Recorder {
        lines: Rc<RefCell<Vec<String>>>,
        allowed: Rc<Cell<usize>>,
    }

    impl Sink for Recorder {
        fn line(&self, stage: &str, line: &str) {
            self.lines.borrow_mut().push(format!("{stage}: {line}"));
        }
        fn proceed(&self) -> bool {
            let left = self.allowed.get();
            self.allowed.set(left.saturating_sub(1));
            left > 0
        }
    }

    #[test]
    fn a_sink_receives_lines_and_stops_the_command() {
        let lines = Rc::new(RefCell::new(Vec::new()));
        let allowed = Rc::new(Cell::new(1));
        let sink = Recorder {
            lines: lines.clone(),
            allowed: allowed.clone(),
        };
        let result = with_sink(Box::new(sink), || -> CliResult {
            done("load", "loaded")?;
            done("passes", "ran")?;
            note("save", "never reached");
            Ok(())
        });
        let err = result.unwrap_err();
        assert_eq!(err.exit, Exit::Interrupted);
        assert_eq!(err.message, "interrupted");
        assert_eq!(*lines.borrow(), ["load: loaded", "passes: ran"]);
        // Outside the call nothing is installed: checkpoints always pass.
        assert!(checkpoint().is_ok());
    }

    #[test]
    fn a_long_call_ticks_to_the_sink_and_its_own_lines_reach_it() {
        let lines = Rc::new(RefCell::new(Vec::new()));
        let sink = Recorder {
            lines: lines.clone(),
            allowed: Rc::new(Cell::new(10)),
        };
        let every = std::time::Duration::from_millis(20);
        let r = with_sink(Box::new(sink), || {
            ticking("verify", "verifying", every, || {
                note("verify", "inside");
                std::thread::sleep(std::time::Duration::from_millis(150));
                7
            })
        });
        assert_eq!(r, 7);
        let lines = lines.borrow();
        assert_eq!(lines[0], "verify: inside");
        let ticks = lines
            .iter()
            .filter(|l| l.starts_with("verify: verifying: ") && l.contains(" s ["))
            .count();
        assert!(ticks >= 2, "{lines:?}");
    }

    #[test]
    fn a_quick_call_says_nothing() {
        let lines = Rc::new(RefCell::new(Vec::new()));
        let sink = Recorder {
            lines: lines.clone(),
            allowed: Rc::new(Cell::new(10)),
        };
        let r = with_sink(Box::new(sink), || ticking("build", "building", TICK, || 3));
        assert_eq!(r, 3);
        assert!(lines.borrow().is_empty());
    }

    #[test]
    fn steps_report_every_step_to_a_sink_with_a_count() {
        let lines = Rc::new(RefCell::new(Vec::new()));
        let sink = Recorder {
            lines: lines.clone(),
            allowed: Rc::new(Cell::new(10)),
        };
        with_sink(Box::new(sink), || {
            let mut s = Steps::new("calibrate", "calibration", Some(3), 10.0);
            s.step("a.npz");
            s.step("");
            s.set(3, "calibration: done");
        });
        assert_eq!(
            *lines.borrow(),
            [
                "calibrate: calibration 1/3: a.npz",
                "calibrate: calibration: 2/3",
                "calibrate: calibration: done [3/3]"
            ]
        );
    }
}
