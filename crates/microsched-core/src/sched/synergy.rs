//! Synergy (Berghetti et al., IFIP Networking 2026), as its code (`Synergy-repo/synergy`
//! 2f884a6: `main.c get_request`, `netio.c try_steal`, `timer.c`, `feedback.c`) schedules:
//!
//! * **RSS**: a client flow (session) hashes onto a worker's queue; `clients.sessions` is the
//!   flow count (512 spreads evenly over 14 workers, 8 leaves some queues empty).
//! * **Idle worker order**: its own queue → the global wait queue of preempted requests (the
//!   server's shared queue: a preempted request resumes on whichever worker takes it) → steal:
//!   first from workers running a long request with ≥ `steal_busy_min` (1) queued, in worker
//!   order (the timer core's busy list), then from the others with ≥ `steal_min` (2), in cyclic
//!   order from the thief's id + 1; a steal takes half the victim's queue, rounded up, at most
//!   `max_stolen` (32).
//! * **Application feedback** (`feedback`): a request whose nominal service time is at least
//!   `long_threshold_us` (10 µs, the fake app's rule) is long; only long requests are
//!   preemptible, and a short one's service time feeds the worker's EMA (α = 0.5, i.e.
//!   `(avg + sample) / 2`, starting at `quantum_us`).
//! * **Dynamic quantum** (`feedback`): a long request's quantum, armed when it starts or resumes,
//!   is `quantum_factor` × the EMA of the worker it runs on. Without feedback every request has
//!   the fixed `quantum_us` (the code's `ENABLE_FEEDBACK=n`).
//! * **Conditional preemption** (`conditional`): at quantum expiry the timer core interrupts
//!   the worker only if new work waits in its own queue (`worker_has_new_jobs`); otherwise the
//!   request runs another quantum (an avoided preemption, counted by the server).
//!
//! * **NIC queue and soft ring** (`nic_ring`): a worker's queue is its soft ring (older, at the
//!   head) followed by its NIC queue. A worker takes the soft ring's head; with the ring empty, a
//!   burst of up to `burst` (8) from the NIC queue, running the first and moving the rest into
//!   the ring. Thieves see only soft rings (the NIC queue is invisible to them), but work in
//!   either makes the worker preemptible (`worker_has_new_jobs`). Off: the whole queue is
//!   stealable (the reference notes' "simpler approximation").
//!
//! Simplified: the short-request EMA sample is the nominal service time (the code's includes
//! parsing and the reply); ring capacities (127 / 128, excess dropped) are unbounded here.
//!
//! * **Wait-queue congestion** (`thresh_wqd_us`, THRESH_WQD; 0 = off, as published): every
//!   THRESH_WQD the timer core snapshots the wait queue's producer count; if at the next check the
//!   consumers have not reached the snapshot, a preempted request has waited at least that long:
//!   the queue is congested (checked at every pass until it clears). While congested, idle
//!   workers serve the wait queue before their own queue and newly armed quanta use
//!   `congested_quantum_factor` (10). The timer core's checks run here whenever a worker looks
//!   for work or arms a quantum; a congested worker with an empty wait queue and nothing to steal
//!   serves its own queue instead of spinning (the code loops until the congestion clears).
//!
//! The ablation ladder of the paper's Fig. 7 is these switches: `rss` (all off, no
//! preemption), `rss-ci` (+ `preemption`, fixed quantum), `+ws` (`steal`), `+wq`
//! (`wait_queue`), `+cp` (`conditional`), `+qa` (`feedback`, the default: everything on).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Next, Place, QueuePolicy, Requeue, ServerView};
use crate::rng::hash;
use crate::scenario::{non_negative, positive};
use crate::time::us;
use crate::{Nanos, ScenarioError};

/// Synergy (Berghetti et al.): per-worker queues fed by RSS, work stealing, a global wait queue
/// of preempted requests, conditional preemption of requests the application reports as long.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Preempt requests at their quantum (the code's compiler/user interrupts; the mechanism's
    /// costs are `server.preemption`'s). Off: every request runs to completion (`rss`).
    #[serde(default = "yes")]
    pub preemption: bool,
    /// Idle workers steal from other workers' queues (`+ws`).
    #[serde(default = "yes")]
    pub steal: bool,
    /// Preempted requests go to the global wait queue, which any idle worker serves after its
    /// own queue (`+wq`); off: back to the tail of their worker's own queue.
    #[serde(default = "yes")]
    pub wait_queue: bool,
    /// Preempt only if new work waits in the worker's own queue (`+cp`).
    #[serde(default = "yes")]
    pub conditional: bool,
    /// Application feedback: only long requests are preemptible, with a quantum of
    /// `quantum_factor` × the worker's EMA of short service times (`+qa`).
    #[serde(default = "yes")]
    pub feedback: bool,
    /// The fixed quantum without feedback, and the EMA's initial value with it (`QUANTUM`).
    #[serde(default = "default_quantum_us")]
    pub quantum_us: f64,
    /// `QUANTUM_FACTOR` (2 in the published configuration).
    #[serde(default = "default_quantum_factor")]
    pub quantum_factor: f64,
    /// Nominal service time from which the application declares a request long.
    #[serde(default = "default_long_threshold_us")]
    pub long_threshold_us: f64,
    /// Queued requests a worker running a long request needs to be stolen from.
    #[serde(default = "one")]
    pub steal_busy_min: u32,
    /// Queued requests any other worker needs to be stolen from (STEAL_THRESHOLD).
    #[serde(default = "two")]
    pub steal_min: u32,
    /// Most requests taken in one steal (`MAX_STOLEN`).
    #[serde(default = "default_max_stolen")]
    pub max_stolen: u32,
    /// THRESH_WQD: the wait-queue delay that makes it congested; 0 = never (the default).
    #[serde(default)]
    pub thresh_wqd_us: f64,
    /// CONGESTED_QUANTUM_FACTOR: the quantum factor while the wait queue is congested.
    #[serde(default = "default_congested_factor")]
    pub congested_quantum_factor: f64,
    /// Model the NIC queue apart from the soft ring: only the soft ring is stealable.
    #[serde(default = "yes")]
    pub nic_ring: bool,
    /// NIC receive burst (`BURST_SIZE`): a worker with an empty soft ring takes up to this many.
    #[serde(default = "default_burst")]
    pub burst: u32,
    /// Simulation only: with conditional preemption, schedule a quantum expiry only once work
    /// queues at the worker (expiries before it are counted, not simulated). The same model
    /// with far fewer events; only the order of events at the same nanosecond differs from
    /// `false` (one event per expiry).
    #[serde(default = "yes")]
    pub lazy_expiries: bool,
}

fn default_burst() -> u32 {
    8
}

fn default_congested_factor() -> f64 {
    10.0
}

fn yes() -> bool {
    true
}
fn one() -> u32 {
    1
}
fn two() -> u32 {
    2
}
fn default_quantum_us() -> f64 {
    5.0
}
fn default_quantum_factor() -> f64 {
    2.0
}
fn default_long_threshold_us() -> f64 {
    10.0
}
fn default_max_stolen() -> u32 {
    32
}

impl Default for Config {
    fn default() -> Self {
        Self {
            preemption: true,
            steal: true,
            wait_queue: true,
            conditional: true,
            feedback: true,
            quantum_us: default_quantum_us(),
            quantum_factor: default_quantum_factor(),
            long_threshold_us: default_long_threshold_us(),
            steal_busy_min: 1,
            steal_min: 2,
            max_stolen: default_max_stolen(),
            thresh_wqd_us: 0.0,
            congested_quantum_factor: default_congested_factor(),
            lazy_expiries: true,
            nic_ring: true,
            burst: default_burst(),
        }
    }
}

impl Config {
    pub fn validate(&self, field: &str) -> Result<(), ScenarioError> {
        positive(&format!("{field}.quantum_us"), self.quantum_us)?;
        positive(&format!("{field}.quantum_factor"), self.quantum_factor)?;
        non_negative(&format!("{field}.long_threshold_us"), self.long_threshold_us)?;
        non_negative(&format!("{field}.thresh_wqd_us"), self.thresh_wqd_us)?;
        positive(&format!("{field}.congested_quantum_factor"), self.congested_quantum_factor)?;
        for (name, v) in [
            ("steal_busy_min", self.steal_busy_min),
            ("steal_min", self.steal_min),
            ("max_stolen", self.max_stolen),
            ("burst", self.burst),
        ] {
            if v == 0 {
                return Err(ScenarioError::new(format!("{field}.{name}"), "0 is not allowed: use 1 or more"));
            }
        }
        Ok(())
    }

    pub fn build(&self) -> Synergy {
        Synergy {
            cfg: self.clone(),
            quantum: us(self.quantum_us).max(1),
            long: us(self.long_threshold_us),
            ema: Vec::new(),
            busy_long: Vec::new(),
            soft: Vec::new(),
            thresh: us(self.thresh_wqd_us),
            wq: WaitQueueCheck::default(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Synergy {
    cfg: Config,
    quantum: Nanos,
    long: Nanos,
    /// Per worker: EMA of short service times (ns, fractional).
    ema: Vec<f64>,
    /// Per worker: running a preemptible request (the timer core's busy-workers list).
    busy_long: Vec<bool>,
    /// Per worker, with `nic_ring`: how many of its queue's head are in its soft ring.
    soft: Vec<u32>,
    /// THRESH_WQD in ns (0: off).
    thresh: Nanos,
    wq: WaitQueueCheck,
}

/// The timer core's producer/consumer check of the wait queue (`wait_queue.c`).
#[derive(Debug, Clone, Copy, Default)]
struct WaitQueueCheck {
    produced: u64,
    consumed: u64,
    last_prod: u64,
    next_check: Nanos,
    congested: bool,
}

impl Synergy {
    fn ensure(&mut self, n: usize) {
        if self.ema.len() < n {
            self.ema.resize(n, self.quantum as f64);
            self.busy_long.resize(n, false);
            self.soft.resize(n, 0);
        }
    }

    /// Half, rounded up, at most `max_stolen`.
    fn amount(&self, len: usize) -> usize {
        len.div_ceil(2).min(self.cfg.max_stolen as usize)
    }

    /// What thieves can see of `core`'s `len` queued requests.
    fn visible(&self, core: u16, len: usize) -> usize {
        if self.cfg.nic_ring {
            self.soft.get(core as usize).map_or(0, |&s| s as usize).min(len)
        } else {
            len
        }
    }

    /// `core` takes the head of its own queue of `len`: the soft ring's, or a NIC burst's first.
    fn take_own(&mut self, core: u16, len: usize) -> Next {
        if self.cfg.nic_ring {
            self.ensure(core as usize + 1);
            let s = &mut self.soft[core as usize];
            *s = if *s > 0 { *s - 1 } else { (len.min(self.cfg.burst as usize) - 1) as u32 };
        }
        Next::Run(Place::Core(core))
    }

    fn is_busy_long(&self, core: u16) -> bool {
        self.busy_long.get(core as usize).copied().unwrap_or(false)
    }

    /// Whether `victim`'s `len` queued requests may be stolen.
    fn stealable(&self, victim: u16, len: usize) -> bool {
        let min = if self.is_busy_long(victim) { self.cfg.steal_busy_min } else { self.cfg.steal_min };
        len >= min as usize
    }
}

impl<V: ServerView + ?Sized> QueuePolicy<V> for Synergy {
    fn name(&self) -> &'static str {
        "synergy"
    }

    fn steer(&mut self, flow: u32, view: &V) -> Place {
        Place::Core((hash(flow as u64) % view.max_cores() as u64) as u16)
    }

    fn notify(&mut self, place: Place, view: &V) -> Option<u16> {
        // An idle worker spins through its loop and steals as soon as a victim qualifies.
        match place {
            Place::Core(v) if self.cfg.steal && self.stealable(v, self.visible(v, view.queue_len(place))) && view.victims().contains(&v) => {
                view.spinners().last().copied()
            }
            // A preempted request in the wait queue: an idle worker resumes it at once.
            Place::Shared => {
                let c = view.spinners().last().copied();
                self.wq.consumed += c.is_some() as u64;
                c
            }
            _ => None,
        }
    }

    fn clock(&mut self, now: Nanos) {
        let w = &mut self.wq;
        if self.thresh == 0 || (now < w.next_check && !w.congested) {
            return;
        }
        w.next_check = now + self.thresh;
        w.congested = w.consumed < w.last_prod;
        if !w.congested {
            w.last_prod = w.produced;
        }
    }

    fn missed(&mut self, _core: u16, place: Place) {
        // The wait queue's consumption counts takes that happened (its congestion check).
        if place == Place::Shared {
            self.wq.consumed = self.wq.consumed.saturating_sub(1);
        }
    }

    fn next(&mut self, core: u16, view: &V) -> Next {
        let len = view.queue_len(Place::Core(core));
        let own = len > 0;
        let wait = view.queue_len(Place::Shared) > 0;
        if self.wq.congested && wait {
            self.wq.consumed += 1;
            return Next::Run(Place::Shared);
        }
        if own && !self.wq.congested {
            return self.take_own(core, len);
        }
        if wait {
            self.wq.consumed += 1;
            return Next::Run(Place::Shared);
        }
        match self.find_victim(core, view) {
            Next::Idle if own => self.take_own(core, len),
            n => n,
        }
    }

    fn steal_amount(&self, len: usize) -> usize {
        self.amount(len)
    }

    fn steal(&mut self, thief: u16, victim: u16, len: usize) -> usize {
        let k = self.amount(self.visible(victim, len)).max(1);
        if self.cfg.nic_ring {
            self.ensure(thief.max(victim) as usize + 1);
            self.soft[victim as usize] = self.soft[victim as usize].saturating_sub(k as u32);
            // Into the thief's ring, less the one it runs at once.
            self.soft[thief as usize] += k as u32 - 1;
        }
        k
    }

    fn requeue(&mut self, core: u16, why: Requeue, _view: &V) -> Place {
        if let Some(b) = self.busy_long.get_mut(core as usize) {
            *b = false;
        }
        match why {
            Requeue::Preempted if self.cfg.wait_queue => {
                self.wq.produced += 1;
                Place::Shared
            }
            _ => Place::Core(core),
        }
    }

    fn preempt_at_quantum(&self, core: u16, view: &V) -> bool {
        !self.cfg.conditional || view.queue_len(Place::Core(core)) > 0
    }

    fn per_request(&self) -> bool {
        true
    }

    fn preempts_only_for_own_queue(&self) -> bool {
        self.cfg.conditional && self.cfg.lazy_expiries
    }

    fn quantum(&mut self, core: u16, _rtype: u16, service: Nanos, _default: Nanos) -> Nanos {
        self.ensure(core as usize + 1);
        let factor = if self.wq.congested { self.cfg.congested_quantum_factor } else { self.cfg.quantum_factor };
        let q = if !self.cfg.preemption {
            Nanos::MAX
        } else if !self.cfg.feedback {
            self.quantum
        } else if service >= self.long {
            ((factor * self.ema[core as usize]).round() as Nanos).max(1)
        } else {
            Nanos::MAX
        };
        self.busy_long[core as usize] = q != Nanos::MAX;
        q
    }

    fn finished(&mut self, core: u16, service: Nanos) {
        self.ensure(core as usize + 1);
        let c = core as usize;
        if self.busy_long[c] {
            self.busy_long[c] = false;
        } else if service < self.long {
            self.ema[c] = (self.ema[c] + service as f64) / 2.0;
        }
    }
}

impl Synergy {
    /// Busy victims first in worker order, then the others cyclically from `core` + 1.
    fn find_victim<V: ServerView + ?Sized>(&self, core: u16, view: &V) -> Next {
        if !self.cfg.steal || view.queued() == 0 {
            return Next::Idle;
        }
        let n = view.max_cores() as u32;
        let mut best: Option<(u32, u16)> = None;
        for &v in view.victims() {
            let len = self.visible(v, view.queue_len(Place::Core(v)));
            if !self.stealable(v, len) {
                continue;
            }
            let key = if self.is_busy_long(v) && len >= self.cfg.steal_busy_min as usize {
                v as u32
            } else {
                n + (v as u32 + n - core as u32 - 1) % n
            };
            if best.is_none_or(|(k, _)| key < k) {
                best = Some((key, v));
            }
        }
        best.map_or(Next::Idle, |(_, v)| Next::Steal(v))
    }
}

impl super::SchedChecks for Config {
    fn validate(&self, field: &str, _sc: &crate::scenario::Scenario) -> Result<(), ScenarioError> {
        Config::validate(self, field)
    }
}

impl super::SchedConfig for Config {
    type Policy = Synergy;
    fn build(&self, _env: &crate::env::SchedEnv) -> Synergy {
        Config::build(self)
    }
}
