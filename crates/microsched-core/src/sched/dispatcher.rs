//! A dispatcher core, as mechanism (Shinjuku's and Concord's centralized dispatcher): one of
//! the server's cores takes every arriving request off the network in arrival order, spends
//! `cost_ns` on each, and hands it to the queueing policy. It runs no requests. Its throughput
//! limit is not a cap written anywhere: it emerges from the serialized stage.
//!
//! The dispatcher's loop does more than steer arrivals. In Shinjuku's and Concord's code
//! (`stanford-mast/shinjuku` and `rishabh246/concord-shinjuku` `dp/core/dispatcher.c`, the loop
//! over workers) a worker reporting FINISHED has its context freed and its mbuf recycled by the
//! dispatcher, one reporting PREEMPTED has its context re-enqueued by the dispatcher, and the
//! dispatcher sends the preemption (Shinjuku: a Dune posted IPI; Concord and Shinjuku-CI: a
//! write of the worker's `concord_preempt_now` flag). Each of these is work on the dispatcher
//! core, serialized with the arrivals. Which of them a system routes through its dispatcher is
//! the policy's (each policy file's `DISPATCHER_ROUTES`, with its source); what each costs is
//! here.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::scenario::non_negative;
use crate::{Nanos, ScenarioError};

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DispatcherCfg {
    /// CPU time of the dispatcher per arriving request.
    pub cost_ns: f64,
    /// CPU time of the dispatcher per completion a worker reports to it (free the context,
    /// recycle the buffer: `dispatcher.c`'s FINISHED branch). Absent: `cost_ns`, because the
    /// sources measure no separate figure and the FINISHED branch is one pass of the same
    /// per-worker loop as an arrival's enqueue [inference]. Charged only where the policy routes
    /// completions through the dispatcher.
    #[serde(default)]
    pub completion_ns: Option<f64>,
    /// CPU time of the dispatcher per preempted request that comes back to it to be requeued
    /// (`dispatcher.c`'s PREEMPTED branch: `tskq_enqueue_tail`). Absent: `cost_ns`, for the
    /// same reason [inference]. Charged only where the policy routes preempted requests through
    /// the dispatcher.
    #[serde(default)]
    pub requeue_ns: Option<f64>,
    /// CPU time of the dispatcher per preemption signal it sends. Absent: the send cost of
    /// `server.preemption` (its `mechanism`'s, Synergy Table I, or `send_ns`), which until now
    /// was only counted. A Dune posted interrupt (Shinjuku's own dataplane) is entered here.
    /// Charged only where the policy's dispatcher sends the preemptions.
    #[serde(default)]
    pub signal_ns: Option<f64>,
}

/// Which of a worker's events go through the dispatcher core (each dispatcher policy gives its
/// own, from its code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Routes {
    /// Workers report completions to the dispatcher, which handles each one.
    pub completions: bool,
    /// A preempted request goes back to the dispatcher, which requeues it.
    pub preempted: bool,
    /// The dispatcher sends the preemption signal.
    pub signals: bool,
}

impl Routes {
    /// A dispatcher that only steers arrivals.
    pub const ARRIVALS_ONLY: Routes = Routes { completions: false, preempted: false, signals: false };
    /// A dispatcher that runs the whole loop (Shinjuku's, Concord's).
    pub const ALL: Routes = Routes { completions: true, preempted: true, signals: true };
}

/// What the dispatcher core spends per kind of work, resolved for a scenario (0: the kind does
/// not reach the dispatcher).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DispatcherCosts {
    pub arrival: Nanos,
    pub completion: Nanos,
    pub requeue: Nanos,
    pub signal: Nanos,
    /// Whether completions, preempted requests and signals reach the dispatcher at all (a kind
    /// routed to it at cost 0 is still counted).
    pub routes: Option<Routes>,
}

impl DispatcherCfg {
    pub fn validate(&self, field: &str, max_cores: u32) -> Result<(), ScenarioError> {
        non_negative(&format!("{field}.cost_ns"), self.cost_ns)?;
        for (name, v) in [("completion_ns", self.completion_ns), ("requeue_ns", self.requeue_ns), ("signal_ns", self.signal_ns)] {
            if let Some(v) = v {
                non_negative(&format!("{field}.{name}"), v)?;
            }
        }
        if max_cores < 2 {
            return Err(ScenarioError::new(
                field,
                format!("a dispatcher takes one of server.max_cores = {max_cores}: use at least 2 cores"),
            ));
        }
        Ok(())
    }

    pub fn cost(&self) -> Nanos {
        self.cost_ns.round() as Nanos
    }

    /// The costs per kind, for a policy routing `routes` through the dispatcher and a preemption
    /// mechanism whose send costs `send`.
    pub fn costs(&self, routes: Routes, send: Nanos) -> DispatcherCosts {
        let ns = |v: f64| v.round() as Nanos;
        let on = |routed: bool, v: Nanos| if routed { v } else { 0 };
        DispatcherCosts {
            arrival: self.cost(),
            completion: on(routes.completions, ns(self.completion_ns.unwrap_or(self.cost_ns))),
            requeue: on(routes.preempted, ns(self.requeue_ns.unwrap_or(self.cost_ns))),
            signal: on(routes.signals, self.signal_ns.map_or(send, ns)),
            routes: Some(routes),
        }
    }
}
