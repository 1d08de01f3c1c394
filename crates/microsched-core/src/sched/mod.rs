//! Queueing and dispatch as policy: where an arriving request waits, where a preempted, yielded
//! or woken one goes back to, and where an idle core looks for work. The driver (the
//! simulator's server, the runtime's workers) owns the queues and the core sets and carries the
//! decisions out; a policy only decides, from a [`ServerView`]. One file per policy:
//!
//! * [`cfcfs`]: one central FCFS queue served by every core (c-FCFS).
//! * [`dfcfs`]: a queue per core fed by RSS, idle cores steal half of a random victim's queue
//!   (d-FCFS with work stealing, as Shenango/Caladan).
//! * [`synergy`]: Synergy (RSS, own ring → wait queue of preempted requests → steal, application
//!   feedback, conditional preemption, dynamic quantum), with its ablation ladder.
//! * [`tiny_quanta`]: Tiny Quanta (a dispatcher steers by JSQ, per-worker round robin).
//! * [`darc`]: Perséphone's DARC (per-type central queues, cores reserved by type).
//! * [`shinjuku`]: Shinjuku (per-type central queues, the head with the largest wait / SLO).
//! * [`concord`]: Concord (a central FCFS queue pushed to per-worker JBSQ(2) mailboxes by a
//!   dispatcher that also runs requests itself when it has slack).
//!
//! How an idle core searches the queues (instantly, or probe by probe with a cost per probe) is
//! the [`search`] policy (`server.search`).
//!
//! Also here, as mechanism shared by the drivers: [`asqm`] (lock-level drops: ASQM, try_lock),
//! [`mutex`] (FIFO mutexes with waiter enqueue
//! times), [`preemption`] (quantum and its costs) and [`dispatcher`] (a serialized dispatch
//! stage on a core of its own).

pub mod asqm;
pub mod condvar;
pub mod cfcfs;
pub mod dfcfs;
pub mod dispatcher;
pub mod mutex;
pub mod irq;
pub mod preemption;
pub mod search;
#[cfg(test)]
pub(crate) mod toy_view;

use crate::env::SchedEnv;
use crate::scenario::{QueueMode, Scenario};
use crate::{Nanos, ScenarioError};

/// The registry: one line per queueing policy, `file::Variant` (see [`crate::alloc`]'s
/// registry). `queue` is the one `server.queue` names; `python` a policy written in Python.
macro_rules! registry {
    ($( $(#[$attr:meta])* $file:ident :: $Variant:ident ),* $(,)?) => {
        $( pub mod $file; )*

        /// The queueing policy: `queue` (default) is the one `server.queue` names (c-FCFS or
        /// d-FCFS); the others bring their own parameters (see [`crate::sched`]).
        #[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum SchedCfg {
            /// `server.queue` decides: `central` (c-FCFS) or `per_core` (d-FCFS, `server.steal`).
            #[default]
            Queue,
            $( $(#[$attr])* $Variant($file::Config), )*
            /// A queueing policy written in Python (see the "write your own policy" docs page).
            Python(crate::plugin::PythonPolicy),
        }

        /// The queueing policy `cfg` names, for a driver whose view is `V`.
        pub fn build_policy<V: ServerView + 'static>(cfg: &SchedCfg, env: &SchedEnv) -> Result<Box<dyn QueuePolicy<V>>, ScenarioError> {
            Ok(match cfg {
                SchedCfg::Queue => queue_policy(env),
                $( SchedCfg::$Variant(c) => Box::new(SchedConfig::build(c, env)), )*
                SchedCfg::Python(p) => Box::new(crate::plugin::Dyn(crate::plugin::python_bridge("policy.sched")?.queue_policy(p, env)?)),
            })
        }

        impl SchedCfg {
            /// The built-in policy's configuration as its trait sees it, for what does not
            /// depend on the policy type (checks, routes, warnings).
            fn with_registered<R>(&self, f: impl FnOnce(&dyn SchedChecks) -> R) -> Option<R> {
                match self {
                    $( SchedCfg::$Variant(c) => Some(f(c)), )*
                    SchedCfg::Queue | SchedCfg::Python(_) => None,
                }
            }
        }
    };
}

registry! {
    synergy::Synergy,
    tiny_quanta::TinyQuanta,
    darc::Darc,
    shinjuku::Shinjuku,
    concord::Concord,
}

/// What a queueing policy's configuration says of itself that does not need its policy type.
pub trait SchedChecks {
    /// Checks the parameters against the scenario (a policy may need parametric service times,
    /// a quantum, a dispatcher); `field` is the table's dotted path.
    fn validate(&self, field: &str, sc: &Scenario) -> Result<(), ScenarioError>;
    /// Which worker events go through the dispatcher core (its artifact's loop).
    fn dispatcher_routes(&self) -> dispatcher::Routes {
        dispatcher::Routes::ALL
    }
    /// Warnings about a policy chosen without what its paper runs it with.
    fn warnings(&self, _sc: &Scenario) -> Vec<String> {
        Vec::new()
    }
}

/// A queueing policy's `[policy.sched]` table: its checks, and how it is built from its
/// environment. The policy works with any driver's view.
pub trait SchedConfig: SchedChecks {
    type Policy;
    fn build(&self, env: &SchedEnv) -> Self::Policy;
}

/// The default `queue` policy: c-FCFS, or d-FCFS with or without stealing.
fn queue_policy<V: ServerView + 'static>(env: &SchedEnv) -> Box<dyn QueuePolicy<V>> {
    match env.queue {
        QueueMode::Central => Box::new(cfcfs::CentralFcfs),
        QueueMode::PerCore => {
            let mut p = dfcfs::DistributedFcfs::new(env.steal, env.legacy_stream("steal"));
            if env.steering == crate::scenario::Steering::Random {
                p.steer_randomly(env.legacy_stream("steering"));
            }
            Box::new(p)
        }
    }
}

/// A queue of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A core's own runqueue.
    Core(u16),
    /// The queue every core may serve.
    Shared,
    /// One of several central queues (a request class: Perséphone's per-type queues); which
    /// cores serve it is the policy's choice.
    Class(u8),
}

/// What an idle core does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Run the head of this queue.
    Run(Place),
    /// Steal from this core's queue (the amount is [`QueuePolicy::steal_amount`]).
    Steal(u16),
    /// Nothing found: spin (and perhaps park, as the core allocator says).
    Idle,
}

/// Why a request goes back to a runqueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// Its quantum expired.
    Preempted,
    /// It reached a yield point.
    Yielded,
    /// The mutex it waited for was handed to it (by a request running on `core`).
    Woken,
}

/// What a policy may read of the server. Core lists are in the driver's own order (policies
/// that pick "the last spinner" or "a random victim" depend on it, and so does determinism).
pub trait ServerView {
    fn max_cores(&self) -> usize;
    fn is_active(&self, core: u16) -> bool;
    /// Allocated cores (busy or spinning).
    fn active(&self) -> &[u16];
    /// Allocated cores with nothing to do.
    fn spinners(&self) -> &[u16];
    /// Cores whose own queue holds work another core may take.
    fn victims(&self) -> &[u16];
    fn queue_len(&self, place: Place) -> usize;
    /// Requests waiting in any queue.
    fn queued(&self) -> u64;
}

/// A queueing policy, generic over the driver's view so that the view's reads inline (one
/// virtual call per decision, not one per read). The driver calls `steer` for each arriving request, `notify` after it
/// queued one (a spinning core may go and take it), `next` whenever a core runs out of work,
/// `requeue` when a request goes back to a runqueue, and `preempt_at_quantum` when a running
/// request's quantum expires.
pub trait QueuePolicy<V: ServerView + ?Sized>: Send {
    fn name(&self) -> &'static str;
    /// The queue an arriving request of `flow` (its client session) joins. If that queue's
    /// core (or, for the shared queue, any core) is spinning, the driver runs it there at once.
    fn steer(&mut self, flow: u32, view: &V) -> Place;
    /// `steer` for a request of type `rtype` (its index in the application's workload): policies
    /// that queue by type override it.
    fn steer_typed(&mut self, flow: u32, _rtype: u16, view: &V) -> Place {
        self.steer(flow, view)
    }
    /// After a request was queued at a core's own queue `place`: a spinning core to send
    /// stealing from it, if any. For a class queue, before it is queued: the spinning core
    /// that runs it at once, if any.
    fn notify(&mut self, place: Place, view: &V) -> Option<u16>;
    /// Where idle `core` finds work.
    fn next(&mut self, core: u16, view: &V) -> Next;
    /// `next` sent `core` to run from `place`, and the driver found it empty. A concurrent
    /// driver's view runs ahead of its queues (the runtime counts a request before it pushes
    /// it, and two workers may both see the one request of a shared queue); a policy that
    /// counted the request as taken in `next` takes that back here. The simulator, whose
    /// view is exact, never calls it.
    fn missed(&mut self, _core: u16, _place: Place) {}
    /// How many of a victim's `len` queued requests a thief takes (oldest first).
    fn steal_amount(&self, len: usize) -> usize {
        len.div_ceil(2)
    }
    /// `thief` takes from `victim`'s `len` queued requests: how many (oldest first; at least
    /// one), as `steal_amount` says unless a policy tracks which of them are stealable. The
    /// thief runs the first at once.
    fn steal(&mut self, _thief: u16, _victim: u16, len: usize) -> usize {
        self.steal_amount(len)
    }
    /// Where a request that ran on `core` goes back to.
    fn requeue(&mut self, core: u16, why: Requeue, view: &V) -> Place;
    /// Whether the request running on `core` is preempted now that its quantum expired (else it
    /// runs another quantum).
    fn preempt_at_quantum(&self, _core: u16, _view: &V) -> bool {
        true
    }
    /// Whether `preempt_at_quantum` is exactly "the core's own queue holds work" (conditional
    /// preemption): the simulator then schedules a quantum expiry only once work queues there,
    /// instead of one event per expiry (the results are the same).
    fn preempts_only_for_own_queue(&self) -> bool {
        false
    }
    /// Whether the driver calls [`Self::quantum`] and [`Self::finished`] for every request (a
    /// policy that classifies requests by their service time, as Synergy's application
    /// feedback does). Read once, at construction: the others pay nothing.
    fn per_request(&self) -> bool {
        false
    }
    /// Whether a running request can be preempted at all: false for a run-to-completion policy
    /// (DARC), whose drivers then ignore `server.preemption.quantum_us` (the policy's `warnings`
    /// say so). Read once, at construction.
    fn preemptible(&self) -> bool {
        true
    }
    /// The driver's clock, before a per-request policy decides where an idle core looks
    /// (`next`) or which quantum a request gets: policies with timers of their own (Synergy's
    /// wait-queue congestion check) advance them here.
    fn clock(&mut self, _now: Nanos) {}
    /// The quantum of the request `core` starts or resumes, of type `rtype`, whose nominal
    /// service time is `service`; `default` is the server's (`server.preemption.quantum_us`).
    /// `Nanos::MAX`: it is not preemptible.
    fn quantum(&mut self, _core: u16, _rtype: u16, _service: Nanos, default: Nanos) -> Nanos {
        default
    }
    /// A request of nominal service time `service` finished on `core`.
    fn finished(&mut self, _core: u16, _service: Nanos) {}
    /// Whether the driver pushes shared-queue work to cores ([`Self::push_target`]) after a
    /// core took work (a dispatcher filling bounded per-worker queues, JBSQ). Read once.
    fn pushes(&self) -> bool {
        false
    }
    /// While the shared queue holds work: the core whose own queue its head is pushed to (a
    /// spinning core runs it at once), or None to leave it there.
    fn push_target(&mut self, _view: &V) -> Option<u16> {
        None
    }
    /// An idle dispatcher core with a request of its own to run (Concord's work-conserving
    /// dispatcher): for how long it may run it now, or when to ask again. Called at `now`
    /// after [`Self::clock`].
    fn dispatcher_slack(&mut self, _now: Nanos) -> Slack {
        Slack::Never
    }
}

/// What an idle dispatcher core may do with its slack ([`QueuePolicy::dispatcher_slack`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slack {
    /// It never runs requests.
    Never,
    /// Run its own request for at most this long, then come back.
    Run(Nanos),
    /// No slack now; ask again at this time.
    After(Nanos),
}

/// The queueing policy of a scenario, for a driver whose view is `V`, on a node whose seed is
/// `seed`.
pub fn build<V: ServerView + 'static>(sc: &Scenario, seed: u64) -> Result<Box<dyn QueuePolicy<V>>, ScenarioError> {
    build_policy(&sc.policy.sched, &SchedEnv::of(sc, seed))
}

/// Which worker events go through the dispatcher core, by policy (each policy file gives its
/// own with its source); a queue policy with a dispatcher has a central dispatcher that runs the
/// whole loop, as Shinjuku's and Concord's do.
pub fn dispatcher_routes(sc: &Scenario) -> dispatcher::Routes {
    sc.policy.sched.with_registered(|c| c.dispatcher_routes()).unwrap_or(dispatcher::Routes::ALL)
}

/// The dispatcher core's costs per kind of work, if the scenario has one.
pub fn dispatcher_costs(sc: &Scenario) -> Option<dispatcher::DispatcherCosts> {
    let d = sc.server.dispatcher.as_ref()?;
    Some(d.costs(dispatcher_routes(sc), sc.server.preemption.build().send))
}

/// Checks the scheduling mechanism's settings.
pub fn validate(sc: &Scenario) -> Result<(), ScenarioError> {
    sc.server.preemption.validate("server.preemption")?;
    sc.server.search.validate("server.search")?;
    if sc.server.steering == crate::scenario::Steering::Random && !(sc.server.queue == QueueMode::PerCore && matches!(sc.policy.sched, SchedCfg::Queue)) {
        return Err(ScenarioError::new(
            "server.steering",
            "\"random\" picks a per-core queue: it needs server.queue = \"per_core\" and policy.sched.kind = \"queue\" (else use \"rss\")",
        ));
    }
    if matches!(sc.server.search, search::SearchCfg::Probe(_)) && !probe_search_applies(sc) {
        return Err(ScenarioError::new(
            "server.search.kind",
            "\"probe\" models d-FCFS work stealing: it needs server.queue = \"per_core\", server.steal = true, policy.sched.kind = \"queue\" and no dispatcher (else use \"instant\")",
        ));
    }
    match &sc.policy.sched {
        SchedCfg::Python(p) => {
            crate::plugin::python_bridge("policy.sched")?.validate(crate::plugin::PolicyKind::Sched, p, "policy.sched")?;
        }
        cfg => cfg.with_registered(|c| c.validate("policy.sched", sc)).unwrap_or(Ok(()))?,
    }
    if let Some(d) = &sc.server.dispatcher {
        d.validate("server.dispatcher", sc.server.max_cores)?;
        if !matches!(sc.policy.allocator, crate::scenario::AllocatorCfg::Static(_)) {
            return Err(ScenarioError::new(
                "server.dispatcher",
                "a dispatcher core needs statically allocated workers: use policy.allocator.kind = \"static\"",
            ));
        }
    }
    Ok(())
}

/// Warnings about a scheduling policy chosen without what its paper runs it with (a preemptive
/// policy with no quantum, a dispatcher-based one with no dispatcher core): the run is valid but
/// is not the policy the name suggests. Each policy file says what it needs.
pub fn warnings(sc: &Scenario) -> Vec<String> {
    sc.policy.sched.with_registered(|c| c.warnings(sc)).unwrap_or_default()
}

/// The warnings of a policy `kind` that preempts at `server.preemption.quantum_us` (its paper's
/// quantum in Synergy's evaluation, `evaluated_quantum_us`) and, when `dispatcher` is true, schedules from a dispatcher core.
pub(crate) fn missing_preemption(sc: &Scenario, kind: &str, evaluated_quantum_us: f64, dispatcher: bool) -> Vec<String> {
    let mut out = Vec::new();
    if sc.server.preemption.quantum_us.is_none() {
        out.push(format!(
            "policy.sched.kind = \"{kind}\" preempts at a time quantum, but server.preemption.quantum_us is not set: no request \
             will be preempted (Synergy's evaluation runs it at server.preemption.quantum_us = {evaluated_quantum_us})"
        ));
    }
    if dispatcher && sc.server.dispatcher.is_none() {
        out.push(format!(
            "policy.sched.kind = \"{kind}\" schedules from a dispatcher core, but server.dispatcher is not set: every core is a \
             worker and no dispatcher work is paid (set server.dispatcher.cost_ns, the dispatcher's time per request)"
        ));
    }
    out
}

/// Whether the probe-cost search models this server's queueing: d-FCFS with work stealing
/// (per-core queues, `server.steal`, the `queue` policy) and no dispatcher.
pub fn probe_search_applies(sc: &Scenario) -> bool {
    sc.server.queue == QueueMode::PerCore && sc.server.steal && matches!(sc.policy.sched, SchedCfg::Queue) && sc.server.dispatcher.is_none()
}

/// The work search a scenario runs (`server.search`, `auto` resolved).
pub fn work_search(sc: &Scenario) -> search::SearchCfg {
    sc.server.search.resolved(probe_search_applies(sc))
}

/// Cores that run requests: all of them, less the dispatcher's.
pub fn worker_cores(sc: &Scenario) -> u32 {
    sc.server.max_cores - sc.server.dispatcher.is_some() as u32
}
