//! Concord (Iyer et al., SOSP'23), as its runtime (`rishabh246/concord-shinjuku`
//! `dp/core/dispatcher.c`, `worker.c`, `inc/ix/dispatch.h`) schedules, built as Synergy ran it
//! (`SCHEDULE_METHOD=3`, `DISPATCHER_DO_WORK=1`):
//!
//! * A dispatcher core (`server.dispatcher`) puts every request at the tail of one central FCFS
//!   queue (`Place::Shared`); a preempted request goes back to the same tail.
//! * JBSQ(k), `JBSQ_LEN` = 2: each worker has a mailbox of `k` slots (the request it runs
//!   counts as one), its own queue (`Place::Core`). `dispatch_requests()` hands the queue's
//!   head to an idle worker first (the most recently idled: `idle_list` is a stack), then to the
//!   lowest-numbered worker with a free slot, until the queue is empty or every mailbox is
//!   full. A worker runs its mailbox in order and never takes another's.
//! * The quantum (`server.preemption.quantum_us`, `PREEMPTION_DELAY` = 5 µs) expires for every
//!   request, whether or not anything waits (compiler-interrupt flag, no IPI).
//! * The dispatcher works when it has slack. Each loop, `epoch_slack` starts at
//!   `PREEMPTION_DELAY` = 5000 — used as cycles, 2 µs at the code's 2.5 GHz (`slack_cap_us`) —
//!   and drops to the smallest time any worker has spent in its current quantum (workers past
//!   their quantum, or that last started a request more than a quantum ago, do not count: the
//!   code names it `time_remaining` but measures elapsed time). If it exceeds
//!   `time_slice / 10` (`work_threshold_us`, 0.5 µs), the dispatcher runs a request itself for
//!   `epoch_slack − time_slice / 10`, then goes back to dispatching: it takes the oldest
//!   never-started request of the central queue (`tskq_dequeue_category(PACKET)`; after
//!   `dispatch_requests()` that queue only holds work when every mailbox is full), keeps it
//!   until it finishes, and never hands it to a worker.
//!
//! The dispatcher handles every completion and every preempted request and sends every
//! preemption (the `concord_preempt_now` write) (`DISPATCHER_ROUTES`), each at its
//! `server.dispatcher` cost.
//!
//! Simplified (the driver's side): while the dispatcher runs a request only arrivals and that
//! bookkeeping wait for it; mailbox refills and preemptions go on, and the worker does not wait
//! for the dispatcher to see its completion or preempted request. The dispatcher's own run pays
//! the packet cost and the instrumentation's inflation, but no preemption cost.
//!
//! Options: `jbsq` (mailbox slots; 1 with `dispatcher_work = false` is c-FCFS behind the same
//! dispatcher, to the bit), `dispatcher_work` (false: `DISPATCHER_DO_WORK=0`, the default of
//! the repository's `benchmark.h`), `work_threshold_us`, `slack_cap_us`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Next, Place, QueuePolicy, Requeue, ServerView, Slack};
use crate::scenario::{positive, Scenario};
use crate::time::us;
use crate::{Nanos, ScenarioError};

/// Concord's dispatcher (`rishabh246/concord-shinjuku` `dp/core/dispatcher.c`) handles the
/// workers' FINISHED and PREEMPTED reports (a preempted context is re-enqueued at the tail by
/// the dispatcher) and is the one that writes `concord_preempt_now` when a quantum has passed.
pub const DISPATCHER_ROUTES: super::dispatcher::Routes = super::dispatcher::Routes::ALL;

/// Concord (Iyer et al., SOSP'23): a dispatcher with one central FCFS queue, JBSQ(k) mailboxes,
/// and cooperative preemption at the quantum.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Mailbox slots per worker, the running request included (`JBSQ_LEN`).
    #[serde(default = "default_jbsq")]
    pub jbsq: u32,
    /// The dispatcher runs requests itself when it has slack (`DISPATCHER_DO_WORK`).
    #[serde(default = "yes")]
    pub dispatcher_work: bool,
    /// Slack the dispatcher keeps for itself (`time_slice / 10`); absent: a tenth of
    /// `server.preemption.quantum_us`.
    #[serde(default)]
    pub work_threshold_us: Option<f64>,
    /// Initial `epoch_slack`: `PREEMPTION_DELAY` (5000) read as cycles at 2.5 GHz.
    #[serde(default = "default_slack_cap")]
    pub slack_cap_us: f64,
}

fn default_jbsq() -> u32 {
    2
}

fn yes() -> bool {
    true
}

fn default_slack_cap() -> f64 {
    2.0
}

impl Default for Config {
    fn default() -> Self {
        Self { jbsq: default_jbsq(), dispatcher_work: true, work_threshold_us: None, slack_cap_us: default_slack_cap() }
    }
}

impl super::SchedChecks for Config {
    /// What a scenario choosing Concord (SOSP'23) leaves out of what makes it preemptive: a quantum (the one
    /// Synergy's evaluation runs it at); its dispatcher core is required by `validate`.
    fn warnings(&self, sc: &Scenario) -> Vec<String> {
        super::missing_preemption(sc, "concord", 5.0, false)
    }

    fn validate(&self, field: &str, sc: &Scenario) -> Result<(), ScenarioError> {
        if self.jbsq == 0 || self.jbsq > 64 {
            return Err(ScenarioError::new(format!("{field}.jbsq"), format!("{} is not allowed: use 1..=64 mailbox slots (the artifact: 2)", self.jbsq)));
        }
        positive(&format!("{field}.slack_cap_us"), self.slack_cap_us)?;
        if let Some(t) = self.work_threshold_us {
            positive(&format!("{field}.work_threshold_us"), t)?;
        }
        if sc.server.dispatcher.is_none() {
            return Err(ScenarioError::new(
                format!("{field}.kind"),
                "concord dispatches from a core of its own: set server.dispatcher.cost_ns (and one more server.max_cores)",
            ));
        }
        Ok(())
    }

    fn dispatcher_routes(&self) -> super::dispatcher::Routes {
        DISPATCHER_ROUTES
    }
}

impl super::SchedConfig for Config {
    type Policy = Concord;

    fn build(&self, env: &crate::env::SchedEnv) -> Concord {
        let quantum = env.quantum;
        let threshold = match self.work_threshold_us {
            Some(t) => us(t),
            None if quantum == Nanos::MAX => us(0.5),
            None => quantum / 10,
        };
        Concord {
            k: self.jbsq as usize,
            work: self.dispatcher_work,
            quantum,
            threshold,
            cap: us(self.slack_cap_us),
            last_start: Vec::new(),
            now: 0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Concord {
    k: usize,
    work: bool,
    quantum: Nanos,
    threshold: Nanos,
    cap: Nanos,
    /// Per worker: when it last started or resumed a request (`preempt_check[i].timestamp`).
    last_start: Vec<Option<Nanos>>,
    now: Nanos,
}

impl Concord {
    /// JBSQ's pick for the central queue's head: an idle worker (the last to become idle),
    /// else the lowest-numbered one with a free mailbox slot.
    fn target<V: ServerView + ?Sized>(&self, view: &V) -> Option<u16> {
        if let Some(&c) = view.spinners().last() {
            return Some(c);
        }
        (0..view.max_cores() as u16).find(|&c| view.is_active(c) && view.queue_len(Place::Core(c)) + 1 < self.k)
    }
}

impl<V: ServerView + ?Sized> QueuePolicy<V> for Concord {
    fn name(&self) -> &'static str {
        "concord"
    }

    fn steer(&mut self, _flow: u32, view: &V) -> Place {
        // FCFS: nothing overtakes what already waits centrally (which only waits when every
        // mailbox is full).
        if view.queue_len(Place::Shared) > 0 {
            return Place::Shared;
        }
        self.target(view).map_or(Place::Shared, Place::Core)
    }

    fn notify(&mut self, _place: Place, _view: &V) -> Option<u16> {
        None
    }

    fn next(&mut self, core: u16, view: &V) -> Next {
        if view.queue_len(Place::Core(core)) > 0 {
            Next::Run(Place::Core(core))
        } else if view.queue_len(Place::Shared) > 0 {
            Next::Run(Place::Shared)
        } else {
            Next::Idle
        }
    }

    fn requeue(&mut self, _core: u16, _why: Requeue, _view: &V) -> Place {
        Place::Shared
    }

    fn per_request(&self) -> bool {
        true
    }

    fn clock(&mut self, now: Nanos) {
        self.now = now;
    }

    fn quantum(&mut self, core: u16, _rtype: u16, _service: Nanos, default: Nanos) -> Nanos {
        let i = core as usize;
        if self.last_start.len() <= i {
            self.last_start.resize(i + 1, None);
        }
        self.last_start[i] = Some(self.now);
        default
    }

    fn pushes(&self) -> bool {
        true
    }

    fn push_target(&mut self, view: &V) -> Option<u16> {
        self.target(view)
    }

    fn dispatcher_slack(&mut self, now: Nanos) -> Slack {
        if !self.work {
            return Slack::Never;
        }
        let mut slack = self.cap;
        // When the workers that hold the slack down will all be past the threshold.
        let mut again = 0;
        for t in self.last_start.iter().flatten() {
            let elapsed = now - t;
            if elapsed < self.quantum {
                slack = slack.min(elapsed);
                if elapsed <= self.threshold {
                    again = again.max(t + self.threshold + 1);
                }
            }
        }
        if slack > self.threshold {
            Slack::Run(slack - self.threshold)
        } else if self.cap > self.threshold {
            Slack::After(again.max(now + 1))
        } else {
            Slack::Never
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::sched::toy_view::ToyView as View;

    fn policy() -> Concord {
        Concord { k: 2, work: true, quantum: 5000, threshold: 500, cap: 2000, last_start: Vec::new(), now: 0 }
    }

    #[test]
    fn jbsq_fills_idle_workers_then_free_slots_and_never_overfills() {
        let mut p = policy();
        let mut v = View { own: vec![0; 3], shared: 0, spinners: vec![0, 2, 1], ..Default::default() };
        // An idle worker first, the last to become idle.
        assert_eq!(QueuePolicy::<View>::steer(&mut p, 0, &v), Place::Core(1));
        v.spinners.clear();
        // Then the lowest-numbered worker with one free slot.
        v.own = vec![1, 0, 0];
        assert_eq!(QueuePolicy::<View>::steer(&mut p, 0, &v), Place::Core(1));
        // Every mailbox full: the central queue, and no push target.
        v.own = vec![1, 1, 1];
        assert_eq!(QueuePolicy::<View>::steer(&mut p, 0, &v), Place::Shared);
        assert_eq!(QueuePolicy::<View>::push_target(&mut p, &v), None);
        // Central work waits: an arrival queues behind it even if a slot is free.
        v.own = vec![1, 0, 1];
        v.shared = 3;
        assert_eq!(QueuePolicy::<View>::steer(&mut p, 0, &v), Place::Shared);
        assert_eq!(QueuePolicy::<View>::push_target(&mut p, &v), Some(1));
    }

    #[test]
    fn slack_is_the_shortest_time_into_a_quantum_less_the_threshold() {
        let mut p = policy();
        let at = |p: &mut Concord, core: u16, t: Nanos| {
            QueuePolicy::<View>::clock(p, t);
            QueuePolicy::<View>::quantum(p, core, 0, 0, 5000);
        };
        // No worker has started anything: the cap less the threshold.
        assert_eq!(QueuePolicy::<View>::dispatcher_slack(&mut p, 0), Slack::Run(1500));
        at(&mut p, 0, 10_000);
        at(&mut p, 1, 10_800);
        // Worker 1 started 200 ns ago: no slack until it is 500 ns into its quantum.
        assert_eq!(QueuePolicy::<View>::dispatcher_slack(&mut p, 11_000), Slack::After(11_301));
        // At 11 600: worker 1 is 800 ns in, worker 0 1600 ns.
        assert_eq!(QueuePolicy::<View>::dispatcher_slack(&mut p, 11_600), Slack::Run(300));
        // Worker 0 past its quantum no longer counts; worker 1 is 4000 ns in: capped at 2 µs.
        assert_eq!(QueuePolicy::<View>::dispatcher_slack(&mut p, 15_000), Slack::Run(1500));
    }
}
