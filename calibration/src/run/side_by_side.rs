//! Calibration runs side by side: the samples are shared among several
//! sessions of the model, each on its own thread with its share of the CPU,
//! each filling its own collector, and the collectors are merged at the end.
//! Collectors merge exactly and their statistics depend only on the values
//! seen, not their order (see `crate::observer`), so the ranges are those of
//! one session. A calibration run observes every tensor of a graph run at
//! ONNX Runtime's level `disable`; its threads share a batch-1 run's work
//! poorly (EfficientNet-B0: 35 ms a run on two threads), where two sessions
//! on one thread each keep both cores busy.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, mpsc};

use infopt_ir::Model;
use infopt_runtime::ort_backend::OBSERVE_BUDGET_BYTES;
use infopt_runtime::{Backend, HostTensor, InputShapes, IoSpec, LoadedModel, Observe, Observing};
use infopt_verify::VerifyError;

use crate::RangeCollector;

/// A model loaded for observation, for one set of batch shapes.
pub(super) type LoadedFor = (Vec<Vec<usize>>, Box<dyn LoadedModel>);

/// Sessions side by side at most.
pub(super) const MOST_SESSIONS: usize = 4;

/// How many sessions calibrate side by side with `threads` threads, and
/// how their observing runs use memory: a session holds the weights (twice,
/// with ONNX Runtime's packed copy, and once more in the graph), a run's
/// `observed` bytes, and up to twice those in the arena (see
/// `OrtOptions::observe_in_arena`); the sessions take at most a quarter of
/// the `available` memory. One per thread, at most [`MOST_SESSIONS`]; the
/// arena where it allows as many sessions as plain allocations would (it
/// saves every run its page faults), plain allocations where they allow
/// more. Each session's runs hand out what its share of that quarter holds
/// (see [`observe_budget`]).
pub(super) fn sessions_sized(
    threads: usize,
    model_bytes: usize,
    observed: usize,
    available: u64,
) -> (usize, Observing) {
    let room = available / 4;
    let (weights, observed) = (3 * model_bytes.max(1) as u64, observed as u64);
    let fit = |each: u64| usize::try_from(room / each.max(1)).unwrap_or(usize::MAX);
    let wanted = threads.clamp(1, MOST_SESSIONS);
    let in_arena = fit(weights + 2 * observed).min(wanted);
    let plain = fit(weights + observed).min(wanted);
    let (sessions, arena) = if in_arena >= 1 && in_arena >= plain {
        (in_arena, true)
    } else {
        (plain.max(1), false)
    };
    let observing = Observing {
        in_arena: arena,
        budget_bytes: Some(observe_budget(room, sessions, model_bytes, arena)),
    };
    (sessions, observing)
}

/// Bytes of observed tensors one run of each of `sessions` sessions may
/// hand out: its share of `room` less its weights, halved in the arena
/// (which may keep twice a run's peak), and never below ONNX Runtime's
/// default budget (what every observing run had before it was sized).
pub(super) fn observe_budget(room: u64, sessions: usize, model_bytes: usize, arena: bool) -> usize {
    let share = room / sessions.max(1) as u64;
    let left = share.saturating_sub(3 * model_bytes as u64) / if arena { 2 } else { 1 };
    usize::try_from(left)
        .unwrap_or(usize::MAX)
        .max(OBSERVE_BUDGET_BYTES)
}

/// One batch of samples to run: its tensors, the first sample's origin
/// (for an error), how many samples it holds, and the first one's position
/// in the data.
type Job = (Vec<HostTensor>, String, usize, usize);

/// What the sessions share.
pub(super) struct Sessions<'a> {
    pub backend: &'a dyn Backend,
    /// Threads each session's observation may use.
    pub threads_each: usize,
    pub model: &'a Model,
    pub dir: &'a Path,
    pub shapes: &'a InputShapes,
    pub declared: &'a [IoSpec],
    /// An empty collector as configured (bins, histograms or not).
    pub empty: &'a RangeCollector,
    /// Where the runs are kept, if anywhere.
    pub keeper: Option<&'a super::kept::Keeper>,
}

/// Batches sent to the sessions, and what came back.
pub(super) struct SideBySide {
    jobs: Option<mpsc::SyncSender<Job>>,
    /// Samples done (for progress).
    pub done: std::sync::Arc<AtomicUsize>,
    failed: std::sync::Arc<AtomicBool>,
    /// Set by [`SideBySide::stop`]: the sessions drop what is queued.
    stopped: std::sync::Arc<AtomicBool>,
}

/// Holds every session but the first until the feeder says whether the
/// calibration goes on (see [`Sessions::run`]): while INT8 times its
/// placements at one thread on one core after the first sample, the first
/// session calibrates the next samples on the other, and the rest start
/// only once the timing is done (a session beside a one-thread timing moves
/// its figures by ~3%, equally for every model timed: EfficientNet-B0
/// float 11.9 -> 12.2 ms, INT8 9.05 -> 9.3 ms).
#[derive(Default)]
pub(super) struct Hold {
    /// None while held; then whether the sessions go on.
    state: Mutex<Option<bool>>,
    opened: Condvar,
}

/// Opens its hold to stop the held sessions when dropped (see
/// [`Hold::open`]: a hold already opened keeps its word).
struct Release<'h>(&'h Hold);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.open(false);
    }
}

impl Hold {
    /// Lets the held sessions go on (`true`) or stop (`false`); the first
    /// word counts, later ones are ignored.
    pub fn open(&self, go_on: bool) {
        if let Ok(mut s) = self.state.lock() {
            s.get_or_insert(go_on);
        }
        self.opened.notify_all();
    }

    /// Waits until opened; whether to go on.
    fn wait(&self) -> bool {
        let Ok(mut s) = self.state.lock() else {
            return false;
        };
        loop {
            if let Some(go_on) = *s {
                return go_on;
            }
            s = match self.opened.wait(s) {
                Ok(s) => s,
                Err(_) => return false,
            };
        }
    }
}

impl Sessions<'_> {
    /// Runs `feed` (which sends every batch with the [`SideBySide`] it gets)
    /// with `count` sessions working through the batches; returns what feed
    /// returned and the sessions' collectors merged, or the first failure.
    /// With `hold`, every session but the first waits until it is opened
    /// (and when `feed` returns, it is opened to stop them if it was not),
    /// and the queue takes up to `ahead` batches.
    pub fn run<R>(
        &self,
        count: usize,
        preloaded: Option<LoadedFor>,
        (hold, ahead): (Option<&Hold>, usize),
        feed: impl FnOnce(&mut SideBySide) -> R,
    ) -> Result<(R, RangeCollector), (R, VerifyError)> {
        let (jobs, queue) = mpsc::sync_channel::<Job>((count * 2).max(ahead));
        let queue = Mutex::new(queue);
        // A session already loaded goes to the first worker.
        let preloaded = Mutex::new(preloaded);
        let failure: Mutex<Option<VerifyError>> = Mutex::new(None);
        let mut side = SideBySide {
            jobs: Some(jobs),
            done: Default::default(),
            failed: Default::default(),
            stopped: Default::default(),
        };
        let (fed, collectors) = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..count)
                .map(|i| {
                    let (queue, failure, preloaded) = (&queue, &failure, &preloaded);
                    let (done, failed) = (side.done.clone(), side.failed.clone());
                    let stopped = side.stopped.clone();
                    scope.spawn(move || {
                        if i > 0 && hold.is_some_and(|h| !h.wait()) {
                            return Some(self.empty.clone());
                        }
                        let loaded = preloaded.lock().ok().and_then(|mut p| p.take());
                        let r = self.work(queue, &done, &stopped, loaded);
                        if let Err(e) = r {
                            failed.store(true, Ordering::Relaxed);
                            if let Ok(mut f) = failure.lock() {
                                f.get_or_insert(e);
                            }
                            // Let the feeder's sends go through until it stops.
                            while let Ok(q) = queue.lock() {
                                if q.recv().is_err() {
                                    break;
                                }
                            }
                            return None;
                        }
                        r.ok()
                    })
                })
                .collect();
            // Opened to stop the held sessions when `feed` returns without
            // opening it, or unwinds (a held session would wait forever).
            let release = hold.map(Release);
            let fed = feed(&mut side);
            side.jobs = None;
            drop(release);
            let collectors: Vec<Option<RangeCollector>> = workers
                .into_iter()
                .map(|w| w.join().ok().flatten())
                .collect();
            (fed, collectors)
        });
        if let Some(e) = failure.into_inner().ok().flatten() {
            return Err((fed, e));
        }
        let mut merged = self.empty.clone();
        for c in collectors {
            let Some(c) = c else {
                return Err((
                    fed,
                    VerifyError::new(
                        infopt_verify::ErrorKind::Internal,
                        "a calibration session stopped without its statistics",
                    ),
                ));
            };
            if let Err(e) = merged.merge(c) {
                return Err((
                    fed,
                    VerifyError::new(infopt_verify::ErrorKind::Internal, e.to_string()),
                ));
            }
        }
        Ok((fed, merged))
    }

    /// One session: runs the batches of `queue` until it closes.
    fn work(
        &self,
        queue: &Mutex<mpsc::Receiver<Job>>,
        done: &AtomicUsize,
        stopped: &AtomicBool,
        mut loaded: Option<LoadedFor>,
    ) -> Result<RangeCollector, VerifyError> {
        let mut collector = self.empty.clone();
        loop {
            let job = match queue.lock() {
                Ok(q) => q.recv(),
                Err(_) => break,
            };
            let Ok((tensors, origin, samples, index)) = job else {
                break;
            };
            if stopped.load(Ordering::Relaxed) {
                continue;
            }
            let key: Vec<Vec<usize>> = tensors.iter().map(|t| t.shape().to_vec()).collect();
            if loaded.as_ref().is_none_or(|(k, _)| *k != key) {
                let mut at = self.shapes.clone();
                at.symbols.clear();
                for (t, spec) in tensors.iter().zip(self.declared) {
                    at.shapes.insert(spec.name.clone(), t.shape().to_vec());
                }
                if !infopt_verify::evaluate::rebound(&mut loaded, &key, &at) {
                    let m = infopt_verify::observe::load_observing(
                        self.backend,
                        self.model,
                        self.dir,
                        &at,
                        &Observe::All,
                    )?;
                    loaded = Some((key, m));
                }
            }
            let Some((_, m)) = loaded.as_ref() else {
                break;
            };
            for t in &tensors {
                collector.observe_named(t);
            }
            let outputs = m
                .run_observed_views(&tensors, &mut |views| {
                    collector.observe_views_on(views, self.threads_each);
                    Ok(())
                })
                .map_err(|e| VerifyError::usage(format!("{origin}: {e}")))?;
            if let Some(k) = self.keeper {
                k.keep(index, &origin, &tensors, outputs);
            }
            done.fetch_add(samples, Ordering::Relaxed);
        }
        Ok(collector)
    }
}

impl SideBySide {
    /// Stops the sessions: what is queued is dropped, and nothing more is
    /// sent.
    pub fn stop(&mut self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.jobs = None;
    }

    /// Hands a batch to the next free session; an error when a session
    /// failed (its error is what the run returns).
    pub fn send(
        &self,
        tensors: Vec<HostTensor>,
        origin: String,
        samples: usize,
        index: usize,
    ) -> Result<(), String> {
        if self.failed.load(Ordering::Relaxed) {
            return Err("a calibration session failed".into());
        }
        match &self.jobs {
            Some(j) => j
                .send((tensors, origin, samples, index))
                .map_err(|_| "the calibration sessions stopped".to_string()),
            None => Err("the calibration sessions stopped".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_per_thread_at_most_four_within_memory() {
        const GB: u64 = 1 << 30;
        const MB: usize = 1 << 20;
        let sized = |threads, model, observed, available| {
            let (n, o) = sessions_sized(threads, model, observed, available);
            (n, o.in_arena)
        };
        // 20 MB of weights, 200 MB observed a run: 460 MB a session in the arena.
        assert_eq!(sized(2, 20 * MB, 200 * MB, 16 * GB), (2, true));
        assert_eq!(sized(1, 20 * MB, 200 * MB, 16 * GB), (1, true));
        assert_eq!(sized(64, 20 * MB, 200 * MB, 16 * GB), (4, true));
        // 1.5 GB observed a run: the arena's 3 GB fits once in 4 GB, plain
        // allocations twice: two sessions without the arena.
        assert_eq!(sized(8, MB, 1536 * MB, 16 * GB), (2, false));
        // 3 GB observed: one session, plain (the arena's 6 GB does not fit).
        assert_eq!(sized(8, MB, 3072 * MB, 16 * GB), (1, false));
        // Memory unknown (0): one session, plain.
        assert_eq!(sized(8, MB, MB, 0), (1, false));
    }

    #[test]
    fn each_run_hands_out_its_sessions_share_of_the_memory() {
        const GB: u64 = 1 << 30;
        const MB: usize = 1 << 20;
        // DNSMOS: 1.5 MB of weights, 367 MB observed a sample, 22 GB free:
        // two sessions in the arena, each run handing out everything at once
        // (at the default 256 MB every sample ran one and a half times).
        let (n, o) = sessions_sized(2, 3 * MB / 2, 367 * MB, 22 * GB);
        assert_eq!((n, o.in_arena), (2, true));
        let budget = o.budget_bytes.unwrap();
        assert_eq!(
            budget,
            ((22 * GB / 4 / 2 - 3 * 3 * MB as u64 / 2) / 2) as usize
        );
        assert!(budget >= 367 * MB);
        // Plain allocations keep the whole share.
        assert_eq!(
            observe_budget(4 * GB, 2, MB, false),
            (2 * GB) as usize - 3 * MB
        );
        // Little memory: never below the default.
        assert_eq!(observe_budget(GB, 4, 100 * MB, true), OBSERVE_BUDGET_BYTES);
        assert_eq!(
            sessions_sized(8, MB, MB, 0).1.budget_bytes,
            Some(OBSERVE_BUDGET_BYTES)
        );
    }
}
