//! Independent probes side by side. Ranking probes each candidate alone
//! (PP-OCRv4 rec: 38 of its 52 probes of 8 samples, each a build, a
//! session, its runs and its comparisons), and none waits for another's
//! verdict. One probe at
//! a time on two threads spends most of its time where only one thread
//! works (the session's graph optimization, the comparison, the next
//! build), and ONNX Runtime's two threads on one batch-1 run are 1.5x one
//! thread, not 2x. Here each probe gets its own session with its share of
//! the threads, and the next candidate is built while the others run.
//!
//! Verdicts come back in the order asked, so the search's progress lines
//! and decisions are those of the probes one after another.

use std::sync::Mutex;
use std::sync::mpsc;

use infopt_ir::Model;
use infopt_verify::evaluate::{self, Heads, HeldOut, Judged};
use infopt_verify::{BackendKind, ChosenBackend};

use super::{Judge, MOST_SIDE_BY_SIDE, SideBySide, fingerprint};
use crate::error::{OpsError, OpsResult};

/// How many probes of a model of `model_bytes` run at once, with the threads
/// `threads` (the user's `--threads`, or the CPU's): one per thread, at most
/// [`MOST_SIDE_BY_SIDE`], and as many as leave three quarters of the
/// available memory (each session holds its own copy of the weights, and
/// ONNX Runtime a packed one).
pub(super) fn side_by_side_count(threads: usize, model_bytes: usize, available: u64) -> usize {
    let by_memory = (available / 4) / (3 * model_bytes.max(1) as u64);
    threads
        .min(MOST_SIDE_BY_SIDE)
        .min(usize::try_from(by_memory).unwrap_or(usize::MAX))
        .max(1)
}

impl Judge<'_> {
    /// Decides, once, how probes run side by side (see the module comment):
    /// not on an execution provider other than the CPU's (one device,
    /// shared), nor with weights mapped from a model larger than memory.
    fn side_by_side(&mut self, model_bytes: usize) -> OpsResult<&SideBySide> {
        if self.side_by_side.is_none() {
            let options = self.cx.backend_args.options()?;
            let cpu = options.execution_providers.is_empty();
            let threads = options
                .threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let available = infopt_verify::memory::available_bytes().unwrap_or(0);
            let mut count = side_by_side_count(threads, model_bytes, available);
            if !cpu || self.backend.info.weights_mapped {
                count = 1;
            }
            let backend = match self.backend.kind {
                BackendKind::Ort if count > 1 => {
                    let mut options = options;
                    options.threads = Some((threads / count).max(1));
                    options.no_spin = true;
                    match ChosenBackend::build(BackendKind::Ort, &options) {
                        Ok(b) => Some(b),
                        Err(_) => {
                            count = 1;
                            None
                        }
                    }
                }
                // tract runs a model on one thread: its sessions share the
                // judge's backend.
                _ => None,
            };
            self.side_by_side = Some(SideBySide { count, backend });
        }
        match self.side_by_side.as_ref() {
            Some(s) => Ok(s),
            None => Err(OpsError::new(
                crate::error::ErrorKind::Internal,
                "side-by-side probes were not decided",
            )),
        }
    }

    /// Decides how probes run side by side, if not yet, from the size of
    /// `candidate`'s weights (counted, not serialized: a model of a
    /// gigabyte would be written out once just to be measured).
    pub(super) fn decide_side_by_side(&mut self, candidate: &Model) -> OpsResult<()> {
        if self.side_by_side.is_none() {
            let weights = infopt_ir::stats::GraphStats::of_model(candidate).parameter_bytes;
            self.side_by_side(usize::try_from(weights).unwrap_or(usize::MAX))?;
        }
        Ok(())
    }

    /// The backend and the number of sessions that judge a candidate with
    /// its samples shared among them (see
    /// `evaluate::held_out_against_side_by_side`): one session of the
    /// judge's backend until [`Judge::decide_side_by_side`].
    pub(super) fn sessions(&self) -> (&ChosenBackend, usize) {
        match self.side_by_side.as_ref() {
            Some(SideBySide {
                count,
                backend: Some(b),
            }) => (b, *count),
            Some(SideBySide { count, .. }) => (self.backend, *count),
            None => (self.backend, 1),
        }
    }

    /// Probes the `count` candidates `build` makes (by index), each on the
    /// first `limit` judged samples, side by side where the machine allows;
    /// `done` gets each judgement in index order, as soon as it and those
    /// before it are in. The same figures as [`Judge::probe`] on each.
    pub fn probe_each(
        &mut self,
        count: usize,
        build: &mut dyn FnMut(usize) -> OpsResult<Model>,
        limit: usize,
        done: &mut dyn FnMut(usize, &HeldOut),
    ) -> OpsResult<Vec<HeldOut>> {
        self.read_reference(limit)?;
        let covered = self.reference.as_ref().is_some_and(|r| r.covers(limit));
        let first = if count > 1 && covered {
            Some(build(0)?)
        } else {
            None
        };
        let at_once = match &first {
            Some(m) => {
                self.decide_side_by_side(m)?;
                self.sessions().1
            }
            None => 1,
        };
        if first.is_some() && self.probes_go_together(count) {
            let t = std::time::Instant::now();
            let mut first = first;
            let mut build_at = |i: usize| match first.take() {
                Some(m) => Ok(m),
                None => build(i),
            };
            let out = self.probe_together(count, &mut build_at, limit, done);
            self.costs.add(
                "candidate: probes together (wall time; their sessions and runs count each group's)",
                1,
                t.elapsed().as_secs_f64(),
            );
            return out;
        }
        if at_once <= 1 {
            let mut first = first;
            let mut out = Vec::with_capacity(count);
            for i in 0..count {
                let model = match first.take() {
                    Some(m) => m,
                    None => build(i)?,
                };
                let h = self.probe(&model, limit)?;
                done(i, &h);
                out.push(h);
            }
            return Ok(out);
        }
        let t = std::time::Instant::now();
        let mut first = first;
        let mut build_at = |i: usize| match first.take() {
            Some(m) => Ok(m),
            None => build(i),
        };
        let out = self.probe_side_by_side(count, &mut build_at, limit, done);
        self.costs.add(
            "candidate: probes side by side (wall time; their runs, sessions and comparisons count each probe's own time)",
            1,
            t.elapsed().as_secs_f64(),
        );
        out
    }

    /// [`Judge::probe_each`] with the probes on worker threads.
    fn probe_side_by_side(
        &mut self,
        count: usize,
        build: &mut dyn FnMut(usize) -> OpsResult<Model>,
        limit: usize,
        done: &mut dyn FnMut(usize, &HeldOut),
    ) -> OpsResult<Vec<HeldOut>> {
        let Workers {
            mut books,
            run,
            workers,
        } = self.workers(count, limit)?;
        let work = |(i, model): (usize, Model)| (i, run.alone(&model));
        with_workers(workers, &work, |jobs, answers| {
            let mut next_done = 0;
            for i in 0..count {
                if books.first_error.is_some() {
                    break;
                }
                let model = match build(i) {
                    Ok(m) => m,
                    Err(e) => {
                        books.first_error = Some(e);
                        break;
                    }
                };
                if let Some(model) = books.offer(i, model)
                    && jobs.send((i, model)).is_err()
                {
                    break;
                }
                while let Ok(a) = answers.try_recv() {
                    books.take(a);
                }
                next_done = emit(next_done, &books.results, done);
            }
            drop(jobs);
            for a in answers.iter() {
                books.take(a);
            }
            emit(next_done, &books.results, done);
        });
        let cut = run.cut.load(std::sync::atomic::Ordering::Relaxed);
        if cut > 0 {
            books.costs.count(super::prefix::CUT_PROBES, cut);
        }
        books.finish("a probe side by side gave no judgement")
    }
}

/// What probes on worker threads take of the judge: the books kept on the
/// calling thread, and what the workers read.
pub(super) struct Workers<'j> {
    pub(super) books: Books<'j, 'j>,
    pub(super) run: Runs<'j>,
    pub(super) workers: usize,
}

impl Judge<'_> {
    /// The judge's fields apart for `count` probes on `limit` samples on
    /// worker threads: the workers borrow the samples and the backend while
    /// the probes' books are kept here.
    pub(super) fn workers(&mut self, count: usize, limit: usize) -> OpsResult<Workers<'_>> {
        let Judge {
            side_by_side,
            reference,
            backend,
            cx,
            heads,
            costs,
            on_calibration,
            probed,
            judges_neighbours,
            prefix,
            ..
        } = self;
        let Some(side) = side_by_side.as_ref() else {
            return Err(internal("side-by-side probes were not decided"));
        };
        let Some(reference) = reference.as_ref() else {
            return Err(internal("the judged samples were not read"));
        };
        Ok(Workers {
            books: Books {
                costs,
                probed,
                on_calibration: *on_calibration,
                judges_neighbours,
                limit,
                keys: vec![None; count],
                results: vec![None; count],
                same_as: vec![None; count],
                in_batch: Default::default(),
                first_error: None,
            },
            run: Runs {
                backend: side.backend.as_ref().unwrap_or(backend),
                dir: cx.dir,
                shapes: cx.shapes,
                reference,
                limit,
                heads,
                prefix: prefix.as_ref(),
                cut: Default::default(),
            },
            workers: side.count.max(1),
        })
    }
}

/// Runs `body` beside `workers` threads, each taking the jobs `body` sends
/// and answering each with `work(job)` on the channel `body` reads. The
/// threads end once `body` has dropped its sender and read the answers.
pub(super) fn with_workers<J: Send, A: Send, R>(
    workers: usize,
    work: &(dyn Fn(J) -> A + Sync),
    body: impl FnOnce(mpsc::SyncSender<J>, mpsc::Receiver<A>) -> R,
) -> R {
    let (jobs, queue) = mpsc::sync_channel::<J>(workers);
    let queue = Mutex::new(queue);
    let (answer, answers) = mpsc::channel::<A>();
    std::thread::scope(|scope| {
        for _ in 0..workers.max(1) {
            let (queue, answer) = (&queue, answer.clone());
            scope.spawn(move || {
                loop {
                    // The lock is held only while waiting for the next job.
                    let job = match queue.lock() {
                        Ok(q) => q.recv(),
                        Err(_) => break,
                    };
                    let Ok(job) = job else { break };
                    if answer.send(work(job)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(answer);
        body(jobs, answers)
    })
}

/// A probe's judgement from a worker, by the candidate's index.
type Answer = (usize, Result<Judged, OpsError>);

/// What a worker needs to probe a candidate.
pub(super) struct Runs<'r> {
    pub(super) backend: &'r ChosenBackend,
    pub(super) dir: &'r std::path::Path,
    pub(super) shapes: &'r infopt_runtime::InputShapes,
    pub(super) reference: &'r evaluate::Reference,
    pub(super) limit: usize,
    pub(super) heads: &'r Heads,
    /// The base whose tensors a candidate computing the same takes.
    pub(super) prefix: Option<&'r super::prefix::Prefix>,
    /// Probes run cut so far.
    pub(super) cut: std::sync::atomic::AtomicUsize,
}

impl Runs<'_> {
    /// `model` judged on its own, cut to what differs from the base where
    /// that pays (see `prefix.rs`).
    pub(super) fn alone(&self, model: &Model) -> Result<Judged, OpsError> {
        let (reference, limit) = (self.reference, self.limit);
        if let Some(judged) = self.prefix.and_then(|p| {
            p.judge_cut(
                self.backend,
                1,
                model,
                self.dir,
                reference,
                limit,
                self.heads,
            )
        }) {
            self.cut.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Ok(judged);
        }
        evaluate::held_out_against_keeping(
            self.backend,
            model,
            self.dir,
            self.shapes,
            self.reference,
            self.limit,
            self.heads,
            false,
        )
        .map_err(OpsError::from)
    }
}

/// The judge's books that probes side by side keep, and the batch's.
pub(super) struct Books<'b, 'c> {
    pub(super) costs: &'c super::Costs,
    pub(super) probed: &'b mut std::collections::HashMap<(u64, usize), HeldOut>,
    pub(super) on_calibration: bool,
    pub(super) judges_neighbours: &'b mut bool,
    pub(super) limit: usize,
    /// Each candidate's fingerprint and sample count.
    pub(super) keys: Vec<Option<(u64, usize)>>,
    pub(super) results: Vec<Option<HeldOut>>,
    /// A candidate built the same as an earlier one of the batch waits for
    /// that one's judgement.
    pub(super) same_as: Vec<Option<usize>>,
    pub(super) in_batch: std::collections::HashMap<(u64, usize), usize>,
    pub(super) first_error: Option<OpsError>,
}

impl Books<'_, '_> {
    /// Candidate `i`, built: answered from an identical model probed
    /// before (None), or to be run (Some).
    pub(super) fn offer(&mut self, i: usize, model: Model) -> Option<Model> {
        let key = fingerprint(&model).map(|f| (f, self.limit));
        self.keys[i] = key;
        if let Some(h) = key.and_then(|k| self.probed.get(&k)) {
            self.costs.count("probes answered by an identical model", 1);
            self.results[i] = Some(h.clone());
            return None;
        }
        if let Some(&j) = key.and_then(|k| self.in_batch.get(&k)) {
            self.costs.count("probes answered by an identical model", 1);
            self.same_as[i] = Some(j);
            self.answer_the_same();
            return None;
        }
        if let Some(k) = key {
            self.in_batch.insert(k, i);
        }
        self.costs.count("probed on a few samples", 1);
        Some(model)
    }

    /// Books a worker's answer: its costs, the cache of probes, and the
    /// candidates built the same as it.
    pub(super) fn take(&mut self, (i, r): Answer) {
        let j = match r {
            Ok(j) => j,
            Err(e) => {
                self.first_error.get_or_insert(e);
                return;
            }
        };
        self.costs
            .add("candidate: sessions", j.loads, j.load_seconds);
        self.costs.add("candidate: runs", j.runs, j.run_seconds);
        self.costs
            .add("candidate: outputs compared", j.runs, j.compare_seconds);
        let mut h = j.held_out;
        h.on_calibration_samples = self.on_calibration;
        *self.judges_neighbours |= !h.neighbour_judged.is_empty();
        if let Some(k) = self.keys[i] {
            self.probed.insert(k, h.clone());
        }
        self.results[i] = Some(h);
        self.answer_the_same();
    }

    /// Every probe's judgement in order, or the first error.
    pub(super) fn finish(self, missing: &str) -> OpsResult<Vec<HeldOut>> {
        if let Some(e) = self.first_error {
            return Err(e);
        }
        self.results
            .into_iter()
            .map(|h| h.ok_or_else(|| internal(missing)))
            .collect()
    }

    fn answer_the_same(&mut self) {
        for (i, j) in self.same_as.iter().enumerate() {
            if let Some(j) = *j
                && self.results[i].is_none()
                && let Some(h) = self.results[j].clone()
            {
                self.results[i] = Some(h);
            }
        }
    }
}

/// Calls `done` for the judgements in `results` from `next` on that are in
/// with every one before them; returns the next one to wait for.
pub(super) fn emit<T>(
    mut next: usize,
    results: &[Option<T>],
    done: &mut dyn FnMut(usize, &T),
) -> usize {
    while let Some(Some(h)) = results.get(next) {
        done(next, h);
        next += 1;
    }
    next
}

pub(super) fn internal(what: &str) -> OpsError {
    OpsError::new(crate::error::ErrorKind::Internal, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_probe_per_thread_at_most_four_and_within_memory() {
        const GB: u64 = 1 << 30;
        assert_eq!(side_by_side_count(2, 10 << 20, 16 * GB), 2);
        assert_eq!(side_by_side_count(1, 10 << 20, 16 * GB), 1);
        assert_eq!(side_by_side_count(32, 10 << 20, 16 * GB), 4);
        // 1 GB of weights: 3 GB a session, a quarter of 16 GB is 4 GB.
        assert_eq!(side_by_side_count(8, 1 << 30, 16 * GB), 1);
        // 100 MB: 300 MB a session, 4 GB allows 13.
        assert_eq!(side_by_side_count(8, 100 << 20, 16 * GB), 4);
        // Memory unknown (0): one at a time.
        assert_eq!(side_by_side_count(8, 1 << 20, 0), 1);
    }

    #[test]
    fn judgements_are_handed_on_in_order_once_those_before_are_in() {
        let results = vec![None, Some('b'), Some('c')];
        let mut seen = Vec::new();
        let next = emit(0, &results, &mut |i, _| seen.push(i));
        assert_eq!((next, seen.as_slice()), (0, &[][..]));
        let results = vec![Some('a'); 3];
        let next = emit(1, &results, &mut |i, _| seen.push(i));
        assert_eq!((next, seen.as_slice()), (3, &[1, 2][..]));
    }
}
