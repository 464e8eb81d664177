//! Ranking probes judged together: consecutive candidates (the ranking
//! offers them in graph order) go as one model, their union, to a session
//! that runs it once per sample (see `infopt_verify::evaluate::together`).
//! Candidates that each quantize one layer share the float layers in front
//! of the latest one's, and one session's graph optimization serves the
//! group. YOLOv8n's 55 layers probed alone on 8 samples: 64 sessions and
//! 512 runs before, about a sixth of the sessions and half the work now.
//!
//! A union's session costs more than its nodes: ONNX Runtime 1.31 loads a
//! graph in time growing with the square of its nodes (YOLOv8n's union of
//! 10 candidates, 2523 nodes: 1.9 s, where 1.32 takes 0.12 s). Each group
//! therefore grows only to a node budget, which each loaded union adjusts
//! to what this runtime's loads cost (see [`NodeBudget`]).
//!
//! Groups go to the side-by-side sessions (see `side_by_side.rs`) as
//! single probes did: the next group is built while the others run, and
//! verdicts come back in the order asked. A group whose candidates cannot
//! be one model, or whose union fails to run, is judged one by one, so a
//! candidate's own error is still the error said.

use std::sync::Mutex;
use std::sync::mpsc;

use infopt_ir::Model;
use infopt_ir::union::{Union, UnionBuilder};
use infopt_verify::BackendKind;
use infopt_verify::evaluate::{self, HeldOut, Judged};

use super::Judge;
use super::side_by_side::{Books, Runs, Workers, emit};
use crate::error::{OpsError, OpsResult};

/// A run of the original at most this long lets probes go together: the
/// union keeps the float activations the later candidates read alive
/// through the run, which for a model with large activations (a U-Net on
/// big images, runs of a second) is more memory than the sessions saved.
const MOST_RUN_SECONDS: f64 = 0.1;

/// Candidates per group at most, and the groups a probe of `count` aims
/// for per session side by side: enough groups that the sessions stay
/// busy to the end, few enough that each shares a long float prefix.
const MOST_PER_GROUP: usize = 16;
const GROUPS_PER_SESSION: usize = 3;

/// The group size for `count` probes on `sessions` sessions.
pub(super) fn group_size(count: usize, sessions: usize) -> usize {
    count
        .div_ceil(GROUPS_PER_SESSION * sessions.max(1))
        .clamp(2, MOST_PER_GROUP)
}

/// Candidates in the first union, whose load measures what the runtime's
/// loads cost before any other union is sized.
const FIRST_UNION: usize = 4;

/// Whether a union is worth its load. A load is taken to cost `a` per node
/// plus `b` per node squared: `a` is a candidate's session apart over its
/// nodes, `b` what the unions loaded so far took beyond that (the largest
/// seen; 0 on ONNX Runtime 1.32, 2.6e-7 s on 1.31). A union must load in
/// no more time than its members' sessions apart. Early layers' candidates
/// share little (each recomputes most of the model) and go one by one on
/// 1.31; the later layers' share a long prefix and go together on any
/// version.
pub(super) struct NodeBudget {
    /// A candidate's session apart, in seconds, and per node.
    session: f64,
    per_node: Option<f64>,
    /// Seconds per node squared beyond `per_node`, once a union loaded.
    squared: Option<f64>,
}

impl NodeBudget {
    pub(super) fn new(session: f64) -> Self {
        NodeBudget {
            session,
            per_node: None,
            squared: None,
        }
    }

    /// A candidate of `nodes` nodes was built (the first sets `per_node`).
    pub(super) fn candidate(&mut self, nodes: usize) {
        if self.per_node.is_none() && nodes > 0 {
            self.per_node = Some(self.session / nodes as f64);
        }
    }

    /// Whether no union has been loaded yet.
    pub(super) fn unmeasured(&self) -> bool {
        self.squared.is_none()
    }

    /// Whether a union of `nodes` for `members` candidates is worth its load.
    pub(super) fn fits(&self, nodes: usize, members: usize) -> bool {
        let n = nodes as f64;
        match self.squared {
            None => members <= FIRST_UNION,
            Some(b) => {
                self.per_node.unwrap_or(0.0) * n + b * n * n <= members as f64 * self.session
            }
        }
    }

    /// A union of `nodes` loaded in `seconds`.
    pub(super) fn loaded(&mut self, nodes: usize, seconds: f64) {
        if nodes == 0 {
            return;
        }
        let n = nodes as f64;
        let b = (seconds - self.per_node.unwrap_or(0.0) * n).max(0.0) / (n * n);
        self.squared = Some(self.squared.map_or(b, |old| old.max(b)));
    }
}

/// The group being gathered, the groups sent, and the unions among them
/// still out.
struct Pacing {
    budget: NodeBudget,
    per_group: usize,
    gathering: Gathering,
    unions_in_flight: usize,
    groups: usize,
    together: usize,
    unions: usize,
}

impl Pacing {
    fn new(session_seconds: f64, per_group: usize) -> Self {
        Pacing {
            budget: NodeBudget::new(session_seconds),
            per_group,
            gathering: Gathering::default(),
            unions_in_flight: 0,
            groups: 0,
            together: 0,
            unions: 0,
        }
    }

    /// Whether `model` joins the group being gathered (else that group
    /// goes first).
    fn joins(&mut self, model: &Model) -> bool {
        let g = &mut self.gathering;
        g.members.is_empty()
            || (g.members.len() < self.per_group
                && !g.apart
                && self
                    .budget
                    .fits(g.nodes() + g.added_by(model), g.members.len() + 1))
    }

    /// The group gathered, counted as sent.
    fn next_group(&mut self) -> Group {
        let group = self.gathering.take();
        self.groups += 1;
        if group.union.is_some() {
            self.together += group.members.len();
            self.unions += 1;
            self.unions_in_flight += 1;
        }
        group
    }

    /// Books a group's answers, and what its union's load cost.
    fn took(&mut self, a: Answers, books: &mut Books) {
        if let Some((nodes, seconds)) = a.union_load {
            self.budget.loaded(nodes, seconds);
        }
        if a.had_union {
            self.unions_in_flight = self.unions_in_flight.saturating_sub(1);
        }
        a.judged.into_iter().for_each(|a| books.take(a));
    }
}

/// A group of candidates, by index, ready to run, and their union when
/// there is one (more than one candidate that can be one model).
struct Group {
    members: Vec<(usize, Model)>,
    union: Option<Union>,
}

/// A group's judgements by candidate index, from a worker, and its union's
/// nodes and load time when it ran as one.
struct Answers {
    judged: Vec<(usize, Result<Judged, OpsError>)>,
    /// The group had a union (run, or failed and judged one by one).
    had_union: bool,
    union_load: Option<(usize, f64)>,
}

/// Candidates gathered into a group, with their union as it grows.
#[derive(Default)]
struct Gathering {
    members: Vec<(usize, Model)>,
    union: Option<UnionBuilder>,
    /// A member could not join: the group runs its members one by one.
    apart: bool,
}

impl Gathering {
    fn push(&mut self, i: usize, model: Model) {
        if !self.apart {
            match self.union.as_mut() {
                None => self.union = UnionBuilder::new(&model),
                Some(u) => {
                    if !u.add(&model) {
                        self.apart = true;
                    }
                }
            }
            self.apart |= self.union.is_none();
        }
        self.members.push((i, model));
    }

    fn nodes(&self) -> usize {
        self.union.as_ref().map_or(0, UnionBuilder::nodes)
    }

    /// The nodes `model` would add to the union (all of its own where it
    /// would start one or cannot join).
    fn added_by(&mut self, model: &Model) -> usize {
        self.union
            .as_mut()
            .and_then(|u| u.nodes_added_by(model))
            .unwrap_or_else(|| model.graph.node_count())
    }

    fn take(&mut self) -> Group {
        let union = match (self.apart, self.union.take()) {
            (false, Some(u)) if u.models() > 1 => u.finish(),
            _ => None,
        };
        self.apart = false;
        Group {
            members: std::mem::take(&mut self.members),
            union,
        }
    }
}

impl Judge<'_> {
    /// Whether `count` probes go together: on ONNX Runtime (tract builds
    /// each model as a plan of its own), where a run of the original is
    /// short (see [`MOST_RUN_SECONDS`]), and more than two.
    pub(super) fn probes_go_together(&self, count: usize) -> bool {
        count > 2
            && self.backend.kind == BackendKind::Ort
            && self
                .costs
                .mean_seconds("original: runs")
                .is_some_and(|s| s <= MOST_RUN_SECONDS)
    }

    /// [`Judge::probe_each`] with the candidates in groups judged together.
    pub(super) fn probe_together(
        &mut self,
        count: usize,
        build: &mut dyn FnMut(usize) -> OpsResult<Model>,
        limit: usize,
        done: &mut dyn FnMut(usize, &HeldOut),
    ) -> OpsResult<Vec<HeldOut>> {
        // What a candidate's session took apart so far (the placement's
        // probes), else the original's.
        let session_seconds = self
            .costs
            .mean_seconds("candidate: sessions")
            .or_else(|| self.costs.mean_seconds("original: sessions"))
            .unwrap_or(0.0);
        let Workers {
            mut books,
            run,
            workers,
        } = self.workers(count, limit)?;
        let per_group = group_size(count, workers);
        let (jobs, queue) = mpsc::sync_channel::<Group>(workers);
        let queue = Mutex::new(queue);
        let (answer, answers) = mpsc::channel::<Answers>();
        let (mut groups, mut together, mut unions) = (0usize, 0usize, 0usize);
        std::thread::scope(|scope| {
            for _ in 0..workers {
                let (queue, answer, run) = (&queue, answer.clone(), &run);
                scope.spawn(move || run.work_groups(queue, answer));
            }
            drop(answer);
            let mut next_done = 0;
            let mut pace = Pacing::new(session_seconds, per_group);
            for i in 0..count {
                if books.first_error.is_some() {
                    break;
                }
                let model = match build(i) {
                    Ok(model) => books.offer(i, model),
                    Err(e) => {
                        books.first_error = Some(e);
                        break;
                    }
                };
                if let Some(model) = model {
                    pace.budget.candidate(model.graph.node_count());
                    // The first union's load sizes the next ones.
                    while pace.budget.unmeasured() && pace.unions_in_flight > 0 {
                        match answers.recv() {
                            Ok(a) => pace.took(a, &mut books),
                            Err(_) => break,
                        }
                    }
                    if !pace.joins(&model) && jobs.send(pace.next_group()).is_err() {
                        break;
                    }
                    pace.gathering.push(i, model);
                }
                while let Ok(a) = answers.try_recv() {
                    pace.took(a, &mut books);
                }
                next_done = emit(next_done, &books.results, done);
            }
            if !pace.gathering.members.is_empty() {
                let _ = jobs.send(pace.next_group());
            }
            drop(jobs);
            for a in answers.iter() {
                pace.took(a, &mut books);
                next_done = emit(next_done, &books.results, done);
            }
            emit(next_done, &books.results, done);
            (groups, together, unions) = (pace.groups, pace.together, pace.unions);
        });
        books.costs.count("probes judged together", together);
        books.costs.count("groups of probes", groups);
        books
            .costs
            .count("unions of probes judged together (a session each)", unions);
        books.finish("a probe judged together gave no judgement")
    }
}

impl Runs<'_> {
    /// Judges the groups of `queue` until it closes, answering each.
    fn work_groups(&self, queue: &Mutex<mpsc::Receiver<Group>>, answer: mpsc::Sender<Answers>) {
        loop {
            // The lock is held only while waiting for the next group.
            let job = match queue.lock() {
                Ok(q) => q.recv(),
                Err(_) => break,
            };
            let Ok(group) = job else { break };
            if answer.send(self.judge_group(&group)).is_err() {
                break;
            }
        }
    }

    /// The group's judgements: together, or one by one where there is no
    /// union or it does not run.
    fn judge_group(&self, group: &Group) -> Answers {
        if let Some(union) = &group.union {
            let judged = evaluate::held_out_together(
                self.backend,
                union,
                self.dir,
                self.shapes,
                self.reference,
                self.limit,
                self.heads,
            );
            if let Ok(js) = judged
                && js.len() == group.members.len()
            {
                let load = js.first().map_or(0.0, |j| j.load_seconds);
                return Answers {
                    had_union: true,
                    judged: group
                        .members
                        .iter()
                        .map(|(i, _)| *i)
                        .zip(js.into_iter().map(Ok))
                        .collect(),
                    union_load: Some((union.nodes, load)),
                };
            }
        }
        let judged = group
            .members
            .iter()
            .map(|(i, model)| (*i, self.alone(model)))
            .collect();
        Answers {
            judged,
            had_union: group.union.is_some(),
            union_load: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{NodeBudget, group_size};

    #[test]
    fn groups_keep_every_session_busy_and_stay_small() {
        // 55 layers on 2 sessions: 6 groups of 10.
        assert_eq!(group_size(55, 2), 10);
        // Few candidates: pairs at least.
        assert_eq!(group_size(3, 2), 2);
        // Many: 16 at most.
        assert_eq!(group_size(400, 2), 16);
        assert_eq!(group_size(20, 1), 7);
    }

    #[test]
    fn a_union_must_load_no_slower_than_its_members_apart() {
        // Candidates of 337 nodes whose sessions take 37 ms apart (YOLOv8n).
        let mut b = NodeBudget::new(0.037);
        b.candidate(337);
        // Before any union loaded: the first holds 4 at most.
        assert!(b.unmeasured() && b.fits(10_000, 4) && !b.fits(100, 5));
        // ONNX Runtime 1.31: 2523 nodes in 1.9 s. Ten late candidates
        // sharing a 330-node prefix fit; two early ones of 600 do not.
        b.loaded(2523, 1.9);
        assert!(b.fits(630, 10));
        assert!(!b.fits(600, 2));
        // A faster load later does not loosen it.
        b.loaded(2523, 0.12);
        assert!(!b.fits(600, 2));
        // ONNX Runtime 1.32: 2523 nodes in 0.12 s, no more than apart.
        let mut b = NodeBudget::new(0.037);
        b.candidate(337);
        b.loaded(2523, 0.12);
        assert!(b.fits(5000, 16) && b.fits(600, 2));
    }
}
