//! Shinjuku (Kaffes et al., NSDI'19), as its code (`stanford-mast/shinjuku`
//! `dp/core/dispatcher.c`; Synergy's fork) schedules: a dispatcher core (`server.dispatcher`)
//! queues each request in its type's FIFO (`Place::Class`); a free worker (one request at a
//! time, JBSQ(1)) gets the head of the queue whose head has the largest wait / SLO of its type
//! (`smart_tskq_dequeue`); a request preempted at its quantum (`server.preemption.quantum_us`,
//! 5 µs) goes back to the tail of its type's queue (the original code; the fork's head option is
//! not modelled).
//!
//! The types' SLOs are not given by the Synergy paper or its scripts: `slo_us` lists one per
//! type; empty (the default), every type gets the same SLO, so the pick is the oldest head.
//!
//! The dispatcher does the whole loop of `dispatcher.c` (`DISPATCHER_ROUTES`): it handles every
//! completion (FINISHED: free the context, recycle the mbuf), takes back and requeues every
//! preempted request (PREEMPTED), and sends the preemption (a Dune posted IPI; `USE_CI`: the
//! `concord_preempt_now` write), each at its `server.dispatcher` cost.
//!
//! Simplified: a completion or a preempted request costs the dispatcher its time, but the
//! worker does not wait for the dispatcher to see it (the preempted request is requeued at
//! once, the freed worker takes its next request at once).

use std::collections::VecDeque;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Next, Place, QueuePolicy, Requeue, ServerView};
use crate::scenario::{positive, Scenario};
use crate::{Nanos, ScenarioError};

/// Completions, preempted requests and preemption signals all go through Shinjuku's dispatcher
/// (`dp/core/dispatcher.c`: the FINISHED and PREEMPTED branches of its per-worker loop, and the
/// posted IPI it sends when a worker's quantum has passed).
pub const DISPATCHER_ROUTES: super::dispatcher::Routes = super::dispatcher::Routes::ALL;

/// Shinjuku (Kaffes et al., NSDI'19): a dispatcher, per-type queues picked by wait / SLO, and
/// preemption at the quantum back to the tail of the type's queue.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// SLO of each request type, in the workload's order; empty: the same for all.
    #[serde(default)]
    pub slo_us: Vec<f64>,
}

impl super::SchedChecks for Config {
    /// What a scenario choosing Shinjuku (NSDI'19) leaves out of what makes it preemptive: a quantum (the one
    /// Synergy's evaluation runs it at), from a dispatcher core.
    fn warnings(&self, sc: &Scenario) -> Vec<String> {
        super::missing_preemption(sc, "shinjuku", 5.0, true)
    }

    fn validate(&self, field: &str, sc: &Scenario) -> Result<(), ScenarioError> {
        let n = sc.workload.types.len();
        if !self.slo_us.is_empty() && self.slo_us.len() != n {
            return Err(ScenarioError::new(
                format!("{field}.slo_us"),
                format!("{} values for {n} request types: give one per type, or none", self.slo_us.len()),
            ));
        }
        for (i, v) in self.slo_us.iter().enumerate() {
            positive(&format!("{field}.slo_us[{i}]"), *v)?;
        }
        if n > 255 {
            return Err(ScenarioError::new(format!("{field}.kind"), "shinjuku queues each type apart: use at most 255 types"));
        }
        Ok(())
    }

    fn dispatcher_routes(&self) -> super::dispatcher::Routes {
        DISPATCHER_ROUTES
    }
}

impl super::SchedConfig for Config {
    type Policy = Shinjuku;

    fn build(&self, env: &crate::env::SchedEnv) -> Shinjuku {
        let n = env.types.len();
        let slo = if self.slo_us.is_empty() { vec![1.0; n] } else { self.slo_us.clone() };
        // Per-core state sized for every worker here, so that `next` and `quantum` (on every
        // request's start) only index it.
        let workers = env.workers as usize;
        Shinjuku { slo, times: vec![VecDeque::new(); n], now: 0, current: vec![0; workers], pending: 0, taken: vec![None; workers] }
    }
}

#[derive(Debug, Clone)]
pub struct Shinjuku {
    slo: Vec<f64>,
    /// Per type: enqueue times of its queue's entries (the policy's copy of the dispatcher's
    /// timestamps).
    times: Vec<VecDeque<Nanos>>,
    now: Nanos,
    /// Per core: the type of the request it runs.
    current: Vec<u8>,
    /// The type of the request being steered.
    pending: u8,
    /// Per core: the enqueue time `next` last took off a type's queue (given back if the
    /// driver found that queue empty: [`QueuePolicy::missed`]).
    taken: Vec<Option<Nanos>>,
}

impl<V: ServerView + ?Sized> QueuePolicy<V> for Shinjuku {
    fn name(&self) -> &'static str {
        "shinjuku"
    }

    fn steer(&mut self, _flow: u32, _view: &V) -> Place {
        Place::Class(0)
    }

    fn steer_typed(&mut self, _flow: u32, rtype: u16, _view: &V) -> Place {
        self.pending = rtype as u8;
        Place::Class(rtype as u8)
    }

    fn notify(&mut self, place: Place, view: &V) -> Option<u16> {
        let Place::Class(k) = place else { return None };
        let idle = view.spinners().last().copied();
        if idle.is_none() {
            // It will be queued: remember when.
            self.times[k as usize].push_back(self.now);
        }
        idle
    }

    fn clock(&mut self, now: Nanos) {
        self.now = now;
    }

    fn next(&mut self, core: u16, view: &V) -> Next {
        let mut best: Option<(f64, u8)> = None;
        for k in 0..self.times.len() {
            if view.queue_len(Place::Class(k as u8)) == 0 {
                continue;
            }
            let since = self.times[k].front().copied().unwrap_or(self.now);
            let score = self.now.saturating_sub(since) as f64 / self.slo[k];
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, k as u8));
            }
        }
        match best {
            Some((_, k)) => {
                self.taken[core as usize] = self.times[k as usize].pop_front();
                Next::Run(Place::Class(k))
            }
            None => Next::Idle,
        }
    }

    fn missed(&mut self, core: u16, place: Place) {
        if let (Place::Class(k), Some(t)) = (place, self.taken.get_mut(core as usize).and_then(Option::take)) {
            self.times[k as usize].push_front(t);
        }
    }

    fn requeue(&mut self, core: u16, _why: Requeue, _view: &V) -> Place {
        let k = self.current.get(core as usize).copied().unwrap_or(0);
        self.times[k as usize].push_back(self.now);
        Place::Class(k)
    }

    fn per_request(&self) -> bool {
        true
    }

    fn quantum(&mut self, core: u16, rtype: u16, _service: Nanos, default: Nanos) -> Nanos {
        self.current[core as usize] = rtype as u8;
        default
    }
}
