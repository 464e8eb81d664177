//! Ranking probes judged together: consecutive candidates (the ranking
//! offers them in graph order) go as one model, their union, to a session
//! that runs it once per sample (see `infopt_verify::evaluate::together`).
//! Candidates that each quantize one layer share the float layers in front
//! of the latest one's, and one session's graph optimization serves the
//! group. YOLOv8n's 55 layers probed alone on 8 samples, on ONNX Runtime
//! 1.32: 78 candidate sessions -> 30, the ranking 2.9 -> 1.8-2.1 s.
//!
//! A union's session can cost more than its members' apart: ONNX Runtime
//! 1.31 loads a graph in time growing faster than its nodes (YOLOv8n's
//! union of 10 candidates, 2523 nodes: 1.9 s, where 1.32 takes 0.12 s; a
//! CRNN captcha reader's 16, 3531 nodes: 7.5 s against 16 sessions of
//! 0.1 s). So the first unions (one a session side by side) hold a few
//! candidates each, and unions go on only while each loads in no more time
//! than its members' sessions would have; once one does not, the rest of
//! the command probes apart (see [`Unions`]). A candidate joins a union only where it shares at least a
//! third of its nodes with it: the placements' probes, three models that
//! share nothing, gain nothing together.
//!
//! Groups go to the side-by-side sessions (see `side_by_side.rs`) as
//! single probes did: the next group is built while the others run, and
//! verdicts come back in the order asked. A group whose candidates cannot
//! be one model, or whose union fails to run, is judged one by one, so a
//! candidate's own error is still the error said.

use infopt_ir::Model;
use infopt_ir::union::{Union, UnionBuilder};
use infopt_verify::BackendKind;
use infopt_verify::evaluate::{self, HeldOut, Judged};

use super::Judge;
use super::side_by_side::{Books, Runs, Workers, emit, with_workers};
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

/// Candidates in the first union, whose load tells whether this runtime's
/// unions pay.
const FIRST_UNION: usize = 4;

/// A candidate joins a union only where this share of its nodes at most
/// is new to it.
const MOST_NEW_SHARE: f64 = 2.0 / 3.0;

/// A union pays while it loads within this many times its members'
/// sessions apart: it also saves the runs of their shared prefix, and on
/// ONNX Runtime 1.32 a union of YOLOv8n's first four candidates loads
/// within a few percent of their four sessions, either side by the
/// machine's noise. On 1.31 the loads that do not pay take 3-5 times it.
const LOAD_SLACK: f64 = 1.5;

/// Whether unions pay on this runtime, as the loaded ones told.
pub(super) struct Unions {
    /// A candidate's session apart, in seconds.
    session: f64,
    /// None until a union loaded; false for good once one loaded slower
    /// than its members' sessions apart.
    pay: Option<bool>,
}

impl Unions {
    pub(super) fn new(session: f64, pay: Option<bool>) -> Self {
        Unions { session, pay }
    }

    /// Whether no union has been loaded yet.
    pub(super) fn unmeasured(&self) -> bool {
        self.pay.is_none()
    }

    /// Whether a union may hold `members` candidates, the last adding
    /// `added` nodes of its `own`.
    pub(super) fn admits(&self, members: usize, added: usize, own: usize) -> bool {
        let shares = (added as f64) <= MOST_NEW_SHARE * own as f64;
        let size = match self.pay {
            None => members <= FIRST_UNION,
            Some(pay) => pay,
        };
        shares && size
    }

    /// A union of `members` candidates loaded in `seconds`.
    pub(super) fn loaded(&mut self, members: usize, seconds: f64) {
        let pays = seconds <= LOAD_SLACK * members as f64 * self.session;
        self.pay = Some(self.pay.unwrap_or(true) && pays);
    }
}

/// The group being gathered, the groups sent, and the unions among them
/// still out.
struct Pacing {
    unions: Unions,
    per_group: usize,
    gathering: Gathering,
    unions_in_flight: usize,
    groups: usize,
    together: usize,
    unions_sent: usize,
}

impl Pacing {
    fn new(unions: Unions, per_group: usize) -> Self {
        Pacing {
            unions,
            per_group,
            gathering: Gathering::default(),
            unions_in_flight: 0,
            groups: 0,
            together: 0,
            unions_sent: 0,
        }
    }

    /// Whether `model` joins the group being gathered (else that group
    /// goes first).
    fn joins(&mut self, model: &Model) -> bool {
        let g = &mut self.gathering;
        if g.members.is_empty() {
            return true;
        }
        let (added, own) = (g.added_by(model), model.graph.node_count());
        g.members.len() < self.per_group
            && !g.apart
            && self.unions.admits(g.members.len() + 1, added, own)
    }

    /// The group gathered, counted as sent.
    fn next_group(&mut self) -> Group {
        let group = self.gathering.take();
        self.groups += 1;
        if group.union.is_some() {
            self.together += group.members.len();
            self.unions_sent += 1;
            self.unions_in_flight += 1;
        }
        group
    }

    /// Books a group's answers, and what its union's load cost.
    fn took(&mut self, a: Answers, books: &mut Books) {
        if let Some((members, seconds)) = a.union_load {
            self.unions.loaded(members, seconds);
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
/// members and load time when it ran as one.
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
    /// short (see [`MOST_RUN_SECONDS`]), more than two, and unless a union
    /// already loaded slower than its members apart, or the probes run cut
    /// to what differs from a base (see `prefix.rs`), which a union would
    /// run whole.
    pub(super) fn probes_go_together(&self, count: usize) -> bool {
        count > 2 && self.prefix.is_none() && self.unions_may_go()
    }

    /// Whether probes may go together at all (see
    /// [`Judge::probes_go_together`]): a union computes the part its
    /// members share once, which is what a base's kept tensors spare the
    /// probes where unions do not go (see `prefix.rs`).
    pub(super) fn unions_may_go(&self) -> bool {
        self.unions_pay != Some(false)
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
        let mut unions_pay = self.unions_pay;
        let Workers {
            mut books,
            run,
            workers,
        } = self.workers(count, limit)?;
        let per_group = group_size(count, workers);
        let (mut groups, mut together, mut unions) = (0usize, 0usize, 0usize);
        let work = |group: Group| run.judge_group(&group);
        with_workers(workers, &work, |jobs, answers| {
            let mut next_done = 0;
            let mut pace = Pacing::new(Unions::new(session_seconds, unions_pay), per_group);
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
                    // The first union's load tells whether more pay; until
                    // it is in, one union per session may be out: side by
                    // side they take no more wall time than the first alone,
                    // even where unions do not pay, and the other sessions
                    // would otherwise wait for it (XFeat: 0.4 s of one core).
                    while pace.unions.unmeasured() && pace.unions_in_flight >= workers {
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
            (groups, together, unions) = (pace.groups, pace.together, pace.unions_sent);
            unions_pay = pace.unions.pay;
        });
        books.costs.count("probes judged together", together);
        books.costs.count("groups of probes", groups);
        books
            .costs
            .count("unions of probes judged together (a session each)", unions);
        let judged = books.finish("a probe judged together gave no judgement");
        self.unions_pay = unions_pay;
        judged
    }
}

impl Runs<'_> {
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
                    union_load: Some((union.models, load)),
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
    use super::{Unions, group_size};

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
    fn unions_go_on_while_they_load_faster_than_their_members_apart() {
        // Candidates' sessions of 37 ms apart (YOLOv8n), 337 nodes each.
        let mut u = Unions::new(0.037, None);
        // Before any union loaded: the first holds 4 at most, each member
        // sharing a third of its nodes.
        assert!(u.unmeasured() && u.admits(4, 30, 337) && !u.admits(5, 30, 337));
        assert!(
            !u.admits(2, 300, 337),
            "a candidate sharing nothing stays apart"
        );
        // ONNX Runtime 1.32: 10 candidates in 0.12 s, less than 10 sessions.
        u.loaded(10, 0.12);
        assert!(u.admits(16, 30, 337));
        // Within half again of the sessions apart still pays.
        u.loaded(4, 0.2);
        assert!(u.admits(16, 30, 337));
        // ONNX Runtime 1.31: 4 candidates in 0.5 s: unions stop for good.
        u.loaded(4, 0.5);
        assert!(!u.admits(2, 30, 337));
        u.loaded(10, 0.12);
        assert!(!u.admits(2, 30, 337));
        // A judge that learnt it earlier starts apart.
        assert!(!Unions::new(0.037, Some(false)).admits(2, 0, 337));
    }
}
