//! Perséphone's DARC (Demoulin et al., SOSP'21), as its code (`maxdml/psp`
//! `dispatch_su.cc`: `set_darc`, `dyn_resa_drain_queue`) schedules: a dispatcher core
//! (`server.dispatcher`) queues each request in its type's central FIFO (`Place::Class`); types
//! are grouped by mean service time (a type joins the group of the shortest one if it is
//! within `delta` (0.2) of it), and each group, shortest first, reserves cores in proportion
//! to its share of CPU time (d = Σ mean × ratio / mean × workers; at least 1, d's floor if its
//! fraction is ≤ 0.5, else its ceiling). A group may run on its own cores and on those reserved
//! for longer groups (and unreserved ones), never on a shorter group's: the non-work-conserving
//! part. A group that finds too few cores left takes the rest and the spillway core 0. Workers
//! hold one request at a time (JBSQ(1)) and are never preempted; an idle worker takes the
//! shortest group's head it may serve, and a new request goes to a free core of its own group
//! first, else of a longer group's.
//!
//! Simplified: the reservation is computed once from the workload's type means and ratios (the
//! code's oracle mode, `mean_ns` in its configuration) instead of profiled over 50 000 requests
//! and revised when demand shifts by 10 %.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Next, Place, QueuePolicy, Requeue, ServerView};
use crate::scenario::{positive, Scenario};
use crate::ScenarioError;

/// Perséphone's dispatcher (`maxdml/psp` `dispatch_su.cc`) handles every completion a worker
/// signals (it sets the worker's `free_peers` bit and adds the request to its type's profiling
/// window); workers are never preempted, so nothing else returns to it.
pub const DISPATCHER_ROUTES: super::dispatcher::Routes =
    super::dispatcher::Routes { completions: true, preempted: false, signals: false };

/// Perséphone's DARC (Demoulin et al., SOSP'21): per-type central queues and cores reserved per
/// group of types by their share of CPU time, never preempted.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Similarity factor: types whose mean service is within `delta` × the group leader's share
    /// its reservation.
    #[serde(default = "default_delta")]
    pub delta: f64,
}

fn default_delta() -> f64 {
    0.2
}

impl Default for Config {
    fn default() -> Self {
        Self { delta: default_delta() }
    }
}

/// (mean µs, ratio) of each type of the first application; `None` for an empirical service
/// distribution (its mean needs the file).
fn type_stats(sc: &Scenario) -> Option<Vec<(f64, f64)>> {
    sc.workload
        .types
        .iter()
        .map(|t| {
            if matches!(t.service, crate::scenario::Dist::Empirical { .. }) {
                return None;
            }
            let s = crate::dist::Sampler::build(&t.service, std::path::Path::new("."), "").ok()?;
            Some((s.mean_us(), t.ratio))
        })
        .collect()
}

impl Config {
    pub fn validate(&self, field: &str, sc: &Scenario) -> Result<(), ScenarioError> {
        positive(&format!("{field}.delta"), self.delta)?;
        if type_stats(sc).is_none() {
            return Err(ScenarioError::new(
                format!("{field}.kind"),
                "darc reserves cores from the types' mean service times: use parametric service distributions, not empirical",
            ));
        }
        if sc.workload.types.len() > 255 {
            return Err(ScenarioError::new(format!("{field}.kind"), "darc queues each type apart: use at most 255 types"));
        }
        Ok(())
    }

    pub fn build(&self, env: &crate::env::SchedEnv) -> Darc {
        // Validation refused empirical distributions, so every type has its mean.
        let stats: Vec<(f64, f64)> = env.types.iter().map(|t| (t.mean_us.unwrap_or(0.0), t.ratio)).collect();
        reserve(&stats, env.workers as usize, self.delta)
    }
}

/// `set_darc`: groups and core reservations for types of (mean, ratio) on `n` workers.
pub fn reserve(stats: &[(f64, f64)], n: usize, delta: f64) -> Darc {
    let total_ratio: f64 = stats.iter().map(|s| s.1).sum::<f64>().max(f64::MIN_POSITIVE);
    let mean: f64 = stats.iter().map(|(m, r)| m * r / total_ratio).sum::<f64>().max(f64::MIN_POSITIVE);
    let mut order: Vec<usize> = (0..stats.len()).collect();
    order.sort_by(|&a, &b| stats[a].0.total_cmp(&stats[b].0));
    let mut group_of_type = vec![0u8; stats.len()];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &t in &order {
        match groups.last_mut() {
            Some(g) if stats[t].0 - stats[g[0]].0 < delta * stats[g[0]].0 => g.push(t),
            _ => groups.push(vec![t]),
        }
    }
    // Per core: the group that reserved it (None: unreserved).
    let mut owner: Vec<Option<u8>> = vec![None; n];
    let mut spill: Option<u8> = None;
    let mut next = 0usize;
    for (gi, g) in groups.iter().enumerate() {
        for &t in g {
            group_of_type[t] = gi as u8;
        }
        let d = g.iter().map(|&t| stats[t].0 * stats[t].1 / total_ratio).sum::<f64>() / mean * n as f64;
        let cores = if d.floor() == 0.0 {
            1
        } else if d.fract() <= 0.5 {
            d.floor() as usize
        } else {
            d.ceil() as usize
        };
        if cores > n - next {
            owner[next..].iter_mut().for_each(|o| *o = Some(gi as u8));
            next = n;
            spill = Some(gi as u8);
        } else {
            owner[next..next + cores].iter_mut().for_each(|o| *o = Some(gi as u8));
            next += cores;
        }
    }
    Darc { group_of_type, groups: groups.len() as u8, owner, spill }
}

#[derive(Debug, Clone)]
pub struct Darc {
    group_of_type: Vec<u8>,
    groups: u8,
    owner: Vec<Option<u8>>,
    /// The group that also has the spillway core 0.
    spill: Option<u8>,
}

impl Darc {
    /// Whether `core` may run group `g`: its own or a longer group's core, an unreserved one,
    /// or the spillway.
    fn serves(&self, core: u16, g: u8) -> bool {
        match self.owner.get(core as usize).copied().flatten() {
            None => true,
            Some(o) => o >= g || (core == 0 && self.spill == Some(g)),
        }
    }

    /// Cores reserved per group, shortest group first (for tests and reports).
    pub fn reserved(&self) -> Vec<usize> {
        (0..self.groups).map(|g| self.owner.iter().filter(|o| **o == Some(g)).count()).collect()
    }
}

impl<V: ServerView + ?Sized> QueuePolicy<V> for Darc {
    fn name(&self) -> &'static str {
        "darc"
    }

    fn steer(&mut self, _flow: u32, _view: &V) -> Place {
        Place::Class(0)
    }

    fn steer_typed(&mut self, _flow: u32, rtype: u16, _view: &V) -> Place {
        Place::Class(self.group_of_type.get(rtype as usize).copied().unwrap_or(0))
    }

    fn notify(&mut self, place: Place, view: &V) -> Option<u16> {
        let Place::Class(g) = place else { return None };
        // A free core of the group's own first, else the lowest free core that may serve it.
        let mut best: Option<(bool, u16)> = None;
        for &c in view.spinners() {
            if self.serves(c, g) {
                let key = (self.owner.get(c as usize).copied().flatten() != Some(g), c);
                if best.is_none_or(|b| key < b) {
                    best = Some(key);
                }
            }
        }
        best.map(|(_, c)| c)
    }

    fn next(&mut self, core: u16, view: &V) -> Next {
        for g in 0..self.groups {
            if self.serves(core, g) && view.queue_len(Place::Class(g)) > 0 {
                return Next::Run(Place::Class(g));
            }
        }
        Next::Idle
    }

    fn requeue(&mut self, core: u16, _why: Requeue, _view: &V) -> Place {
        // DARC never preempts; a yielded or woken request goes back to the core it was on.
        Place::Core(core)
    }

    /// Perséphone's workers run a request to completion, whatever `server.preemption.quantum_us`
    /// says. Were a quantum applied, the preempted request would go back to `Place::Core`, which
    /// `next` never reads (it serves the class queues): stranded to the end of the run.
    fn preemptible(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_follow_the_cpu_time_shares() {
        // Extreme on 14 workers: shorts 0.4975 / 2.9975 × 14 = 2.32 → 2 cores, longs 11.68 → 12.
        assert_eq!(reserve(&[(0.5, 0.995), (500.0, 0.005)], 14, 0.2).reserved(), vec![2, 12]);
        // High: 0.5 / 50.5 × 14 = 0.14 → 1 (at least one), 13.86 → 14 > 13 left: the rest + spillway.
        let d = reserve(&[(1.0, 0.5), (100.0, 0.5)], 14, 0.2);
        assert_eq!(d.reserved(), vec![1, 13]);
        assert_eq!(d.spill, Some(1));
        // Types within 20 % share a group.
        assert_eq!(reserve(&[(1.0, 0.5), (1.1, 0.5)], 4, 0.2).reserved(), vec![4]);
        // Shorts may use the longs' cores, never the reverse.
        let d = reserve(&[(0.5, 0.995), (500.0, 0.005)], 14, 0.2);
        assert!(d.serves(0, 0) && d.serves(5, 0) && d.serves(5, 1) && !d.serves(0, 1));
    }
}

impl super::SchedChecks for Config {
    fn validate(&self, field: &str, sc: &crate::scenario::Scenario) -> Result<(), ScenarioError> {
        Config::validate(self, field, sc)
    }
    fn dispatcher_routes(&self) -> super::dispatcher::Routes {
        DISPATCHER_ROUTES
    }
    fn warnings(&self, sc: &Scenario) -> Vec<String> {
        match sc.server.preemption.quantum_us {
            Some(q) => vec![format!(
                "server.preemption.quantum_us = {q} is ignored by policy.sched.kind = \"darc\": DARC never preempts \
                 (Perséphone's workers run each request to completion)"
            )],
            None => Vec::new(),
        }
    }
}

impl super::SchedConfig for Config {
    type Policy = Darc;
    fn build(&self, env: &crate::env::SchedEnv) -> Darc {
        Config::build(self, env)
    }
}
