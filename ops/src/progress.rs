//! Where the commands' progress lines go, and where they may be stopped.
//!
//! The commands report what each stage did ("loaded m.onnx (120 nodes) in
//! 4 ms") and call [`done`] between stages and after every pass that changed
//! the model. The caller of a command passes a [`Progress`]: the command
//! line's prints the lines on stderr and never stops; the Python module's
//! forwards them to a callback and may stop the command at the next stage
//! boundary, which then fails with [`ErrorKind::Interrupted`]. Without one,
//! nothing is shown. The progress is installed per thread for the duration
//! of a command: a command runs on the thread that called it.

use std::cell::RefCell;

use crate::error::{ErrorKind, OpsError, OpsResult};

/// Receives a command's progress.
pub trait Progress {
    /// One line about a finished step of `stage` ("load", "passes", "pass",
    /// "verify", "save", "calibrate", "bench", "build").
    fn line(&self, stage: &str, line: &str);
    /// A line about a small step (one per pass that changed the model, one
    /// per calibration sample): for callers that show every step. The
    /// command line shows none of them (it has [`Progress::sampled`]).
    fn event(&self, stage: &str, line: &str) {
        self.line(stage, line);
    }
    /// A step line chosen at most every few seconds, for a caller that
    /// shows no [`Progress::event`] and draws no bar.
    fn sampled(&self, _stage: &str, _line: &str) {}
    /// A bar for a long stage, when the caller draws one (the command line
    /// on a terminal): `total` steps (None: unknown), drawn after
    /// `template` (indicatif's template language) with `prefix`.
    fn bar(&self, _template: &str, _prefix: &str, _total: Option<usize>) -> Option<Box<dyn Bar>> {
        None
    }
    /// Whether the command should go on; asked between stages and passes.
    /// Once it says no it must keep saying no: a pass driver that was asked
    /// to stop only ends its pipeline, and the command asks again after it.
    fn proceed(&self) -> bool {
        true
    }
}

/// A progress bar the caller draws.
pub trait Bar {
    /// Step `done` reached, described by `msg`.
    fn set(&self, done: usize, msg: &str);
    /// The stage ended: the bar goes away.
    fn finish(&self);
}

/// The name the Python module and older callers know the trait by.
pub use Progress as Sink;

thread_local! {
    /// The progress of the command running on this thread. A raw pointer,
    /// because the caller lends it for the call only ([`with_progress`]
    /// removes it before the borrow ends, on unwind too).
    static CURRENT: RefCell<Option<*const (dyn Progress + 'static)>> = const { RefCell::new(None) };
}

/// Runs `f` with `progress` receiving its progress, then restores what was there.
pub fn with_progress<R>(progress: &dyn Progress, f: impl FnOnce() -> R) -> R {
    // SAFETY: only the lifetime is erased; the pointer is removed from the
    // thread-local below (by `Restore`'s drop, which also runs on unwind)
    // before `progress`'s borrow ends, and it is only read on this thread.
    let ptr: *const (dyn Progress + 'static) = unsafe {
        std::mem::transmute::<*const (dyn Progress + '_), *const (dyn Progress + 'static)>(
            progress as *const dyn Progress,
        )
    };
    let previous = CURRENT.with(|s| s.replace(Some(ptr)));
    struct Restore(Option<*const (dyn Progress + 'static)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            CURRENT.with(|s| *s.borrow_mut() = previous);
        }
    }
    let _restore = Restore(previous);
    f()
}

/// Runs `f` with an owned `sink` receiving its progress.
pub fn with_sink<R>(sink: Box<dyn Progress>, f: impl FnOnce() -> R) -> R {
    with_progress(sink.as_ref(), f)
}

/// Calls `f` with the installed progress, if any.
fn current<R>(f: impl FnOnce(&dyn Progress) -> R) -> Option<R> {
    CURRENT.with(|s| {
        let ptr = (*s.borrow())?;
        // SAFETY: `with_progress` keeps the pointee borrowed while the
        // pointer is installed.
        Some(f(unsafe { &*ptr }))
    })
}

/// Reports one line about a finished step.
pub fn note(stage: &str, line: impl AsRef<str>) {
    current(|p| p.line(stage, line.as_ref()));
}

/// A bar for a long stage, when the caller draws bars (see [`Progress::bar`]).
pub fn bar(template: &str, prefix: &str, total: Option<usize>) -> Option<Box<dyn Bar>> {
    current(|p| p.bar(template, prefix, total)).flatten()
}

/// Reports a line only a caller that shows every step wants (one per pass
/// that changed the model): the command line prints nothing for it.
pub fn event(stage: &str, line: impl AsRef<str>) {
    current(|p| p.event(stage, line.as_ref()));
}

/// A stage boundary: fails with [`ErrorKind::Interrupted`] when the caller
/// asked to stop.
pub fn checkpoint() -> OpsResult {
    let go_on = current(|p| p.proceed()).unwrap_or(true);
    if go_on {
        Ok(())
    } else {
        Err(OpsError::new(ErrorKind::Interrupted, "interrupted"))
    }
}

/// Reports a finished step, then checks whether to go on.
pub fn done(stage: &str, line: impl AsRef<str>) -> OpsResult {
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
    bar: Option<Box<dyn Bar>>,
}

impl Steps {
    /// `total` steps of `what` (None: unknown); lines at most every
    /// `min_interval` seconds (0: every step).
    pub fn new(stage: &'static str, what: &str, total: Option<usize>, min_interval: f64) -> Self {
        let template = if total.is_some() {
            "{prefix} [{bar:30}] {pos}/{len} {elapsed_precise} {wide_msg}"
        } else {
            "{prefix} {spinner} {pos} {elapsed_precise} {wide_msg}"
        };
        let bar = bar(template, what, total);
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
            b.set(done, msg);
            return;
        }
        let last = self.total.is_some_and(|t| done >= t);
        let due = self
            .last_line
            .is_none_or(|t| t.elapsed().as_secs_f64() >= self.min_interval);
        if due || last {
            self.last_line = Some(std::time::Instant::now());
            current(|p| p.sampled(self.stage, &line));
        }
    }

    /// Ends the bar (the lines need no end).
    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish();
        }
    }

    /// Seconds since the stage started.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

/// How often [`ticking`] reports a call still running.
pub const TICK: std::time::Duration = std::time::Duration::from_secs(2);

/// What a worker thread reports, relayed by [`ticking`] to the calling
/// thread's progress (the progress is per thread), each kind as it came.
enum Tick {
    Line(String, String),
    Event(String, String),
    Sampled(String, String),
    Done,
}

struct Relay(std::sync::mpsc::Sender<Tick>);

impl Progress for Relay {
    fn line(&self, stage: &str, line: &str) {
        let _ = self.0.send(Tick::Line(stage.to_string(), line.to_string()));
    }
    fn event(&self, stage: &str, line: &str) {
        let _ = self
            .0
            .send(Tick::Event(stage.to_string(), line.to_string()));
    }
    fn sampled(&self, stage: &str, line: &str) {
        let _ = self
            .0
            .send(Tick::Sampled(stage.to_string(), line.to_string()));
    }
}

/// Runs `f` (one long call: a verification, an engine build) on a worker
/// thread while this thread says, every `every`, that it is still running
/// ("`what`: 4 s"): as the steps of a long stage (a spinner when the caller
/// draws bars, lines otherwise), so that no call longer than `every` is
/// silent, from the command line or from Python. Lines `f` reports itself
/// reach this thread's progress too. `f` cannot be interrupted (the
/// progress's `proceed` is asked after it). Without a progress installed,
/// `f` runs on this thread (a TensorRT test double is per thread).
pub fn ticking<R: Send>(
    stage: &'static str,
    what: &str,
    every: std::time::Duration,
    f: impl FnOnce() -> R + Send,
) -> R {
    use std::sync::mpsc::{RecvTimeoutError, channel};
    // Nobody to tell (a library call without a progress, a unit test): the
    // call runs here, on the caller's thread.
    if current(|_| ()).is_none() {
        return f();
    }
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        let (tx, rx) = channel::<Tick>();
        let worker = scope.spawn(move || {
            let done = tx.clone();
            let r = with_sink(Box::new(Relay(tx)), f);
            let _ = done.send(Tick::Done);
            r
        });
        let mut steps: Option<Steps> = None;
        loop {
            match rx.recv_timeout(every) {
                Ok(Tick::Line(stage, line)) => note(&stage, line),
                Ok(Tick::Event(stage, line)) => event(&stage, line),
                Ok(Tick::Sampled(stage, line)) => {
                    current(|p| p.sampled(&stage, &line));
                }
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
        let result = with_sink(Box::new(sink), || -> OpsResult {
            done("load", "loaded")?;
            done("passes", "ran")?;
            note("save", "never reached");
            Ok(())
        });
        let err = result.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Interrupted);
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
