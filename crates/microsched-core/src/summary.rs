//! The one result schema: what `microsched run` prints with `--json`, what the real runtime
//! writes, what plots and reports read.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Percentiles {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Slowdown {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Cores {
    pub max: u32,
    /// Mean cores held by the LC application: busy, searching, or waking (the allocation delay
    /// of a granted core). allocated_mean + be_cores_mean = max.
    pub allocated_mean: f64,
    pub busy_mean: f64,
    /// Mean cores in the allocation delay (part of allocated_mean, except under `harvest_cfs`,
    /// where the Secondary runs on the core until CFS preempts it: then part of be_cores_mean).
    pub transition_mean: f64,
}

/// Conservation counters over the whole run (warm-up included): generated = completed + dropped
/// + in_flight, exactly.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Requests {
    pub generated: u64,
    pub completed: u64,
    pub dropped: u64,
    pub in_flight: u64,
}

/// Core time over the whole run, in ns: busy + searching + parked + transition = cores × time.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CoreTime {
    pub busy_ns: u64,
    pub search_ns: u64,
    pub parked_ns: u64,
    pub transition_ns: u64,
    /// Preemption mechanism time on the worker cores (receive and return costs).
    #[serde(default)]
    pub overhead_ns: u64,
    pub total_ns: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TypeSummary {
    pub name: String,
    pub throughput_rps: f64,
    pub goodput_rps: f64,
    pub drop_rate: f64,
    pub latency_us: Percentiles,
    pub queueing_delay_us: Percentiles,
    pub slowdown: Slowdown,
    pub completed: u64,
}

/// Credit-based overload control over the measured window (absent, `null`, with the "none"
/// controller). Means are over the time-series samples taken in the window; counts are events
/// in the window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Credits {
    /// Mean credit pool C_total.
    pub pool_mean: f64,
    /// Largest sampled pool in the window.
    #[serde(default)]
    pub pool_max: f64,
    /// The controller's pool bounds (Breakwater: `[floor, N · max_pool_per_session]`); absent
    /// for a controller without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_floor: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_ceiling: Option<i64>,
    /// Mean credits issued C_issued (held by clients, in flight, or used at the server).
    pub issued_mean: f64,
    /// Mean number of sessions on the drained list.
    pub drained_mean: f64,
    /// Mean number of requests waiting for credits at clients.
    pub client_queued_mean: f64,
    /// Requests dropped by the server's AQM (answered with a failure reply).
    pub aqm_drops: u64,
    /// Requests dropped at clients: `client_timeouts + client_overflows`.
    pub client_drops: u64,
    /// Dropped at a client after waiting longer than `clients.timeout_us` for a credit.
    pub client_timeouts: u64,
    /// Dropped as the oldest entry of a full client queue.
    pub client_overflows: u64,
    /// Explicit credit messages sent by the server (answers to credit requests and wake-ups).
    pub credit_messages: u64,
    /// Explicit credit requests sent by clients.
    pub credit_requests: u64,
    /// Cores parked while at least one session was drained (CoreSync never does this).
    pub parks_while_drained: u64,
    /// Requests dropped at worker start (Breakwater v2's `latency_budget_us`), answered with a
    /// failure reply; not in `aqm_drops`, which counts drops on arrival. Absent without a budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_drops: Option<u64>,
}

/// What the scheduling mechanism did over the measured window: preemptions, yields, lock
/// traffic (the engine's resumable requests).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Sched {
    /// The queueing policy (c-fcfs, d-fcfs+steal, ...).
    pub queue_policy: String,
    pub preemptions: u64,
    pub yields: u64,
    pub lock_acquisitions: u64,
    /// Acquisitions that found the mutex held and were handed it after waiting.
    pub lock_waits: u64,
    /// Mean wait of those.
    pub lock_wait_us_mean: f64,
    /// Interrupt-sending time spent outside the worker cores (timer or dispatcher core).
    pub preempt_send_ns: u64,
    /// Quantum expiries at which the policy let the request run on (conditional preemption).
    #[serde(default)]
    pub avoided_preemptions: u64,
    /// Per worker core: the share of the window it ran requests (busy and preemption overhead).
    #[serde(default)]
    pub worker_utilization: Spread,
    /// Requests a dispatcher core ran itself when it had slack (Concord), and its time running
    /// them; absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dispatcher_requests: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dispatcher_work_ns: u64,
    /// The dispatcher core's load; absent without a dispatcher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatcher: Option<DispatcherLoad>,
}

/// What a dispatcher core did over the measured window: its busy share and its work per kind
/// (count, and time on it). A kind the policy does not route through the dispatcher stays 0.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct DispatcherLoad {
    /// Share of the window it was busy (steering, bookkeeping, requests of its own).
    pub utilization: f64,
    /// Busy at least 99 % of the window: the dispatcher, not the workers, sets the throughput,
    /// and requests queue in front of it (`queued_end`).
    pub saturated: bool,
    /// Requests waiting for it at the end of the window.
    pub queued_end: u64,
    /// Arrivals steered.
    pub arrivals: u64,
    pub arrival_ns: u64,
    /// Completions reported to it.
    pub completions: u64,
    pub completion_ns: u64,
    /// Preempted requests it took back and requeued.
    pub requeues: u64,
    pub requeue_ns: u64,
    /// Preemption signals it sent.
    pub signals: u64,
    pub signal_ns: u64,
}

impl DispatcherLoad {
    /// Busy share at or above which a dispatcher counts as saturated.
    pub const SATURATED: f64 = 0.99;
}

/// Core parking over the measured window (dynamic allocators only): park attempts (a core idle
/// for the allocator's poll period asks it whether it may park), how many of them parked, and
/// how many parked cores were woken. `gate`: CoreSync's account of every attempt.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Parking {
    pub attempts: u64,
    pub parks: u64,
    pub wakeups: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<ParkGate>,
}

/// CoreSync's Algorithm 1, counted: why each park attempt kept polling or parked. Every attempt
/// is exactly one of `vetoed_drained`, `waited_for_parker`, `waited_for_revocation`, `cuts`,
/// `parked_at_once`, `parked_after_cut`, `parked_without_credits`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct ParkGate {
    /// Kept polling: some session held no credit (step 1, the overload veto).
    pub vetoed_drained: u64,
    /// Kept polling: another core was mid-park (step 4, one parker at a time).
    pub waited_for_parker: u64,
    /// Kept polling after its cut: issued credits still above R · N_cores + N_sess (step 3).
    pub waited_for_revocation: u64,
    /// Violated attempts that cut C_sub from the pool and kept polling (step 5).
    pub cuts: u64,
    /// Credits those cuts withheld from the pool, in total.
    pub credits_cut: u64,
    /// Parked at once: the proportionality bound held (step 5).
    pub parked_at_once: u64,
    /// Parked once the issued credits came down after a cut (step 3).
    pub parked_after_cut: u64,
    /// Parked as Caladan does: no credit controller to gate on.
    pub parked_without_credits: u64,
}

impl ParkGate {
    /// Attempts that kept the core polling, whatever the reason.
    pub fn vetoes(&self) -> u64 {
        self.vetoed_drained + self.waited_for_parker + self.waited_for_revocation + self.cuts
    }

    /// Each count of `self` and `o` combined by `f`.
    fn zip(&self, o: &ParkGate, f: impl Fn(u64, u64) -> u64) -> ParkGate {
        ParkGate {
            vetoed_drained: f(self.vetoed_drained, o.vetoed_drained),
            waited_for_parker: f(self.waited_for_parker, o.waited_for_parker),
            waited_for_revocation: f(self.waited_for_revocation, o.waited_for_revocation),
            cuts: f(self.cuts, o.cuts),
            credits_cut: f(self.credits_cut, o.credits_cut),
            parked_at_once: f(self.parked_at_once, o.parked_at_once),
            parked_after_cut: f(self.parked_after_cut, o.parked_after_cut),
            parked_without_credits: f(self.parked_without_credits, o.parked_without_credits),
        }
    }
}

impl Parking {
    /// Each count of `self` and `o` combined by `f`; a gate on one side only is kept as is
    /// against zeros.
    fn zip(&self, o: &Parking, f: impl Fn(u64, u64) -> u64 + Copy) -> Parking {
        Parking {
            attempts: f(self.attempts, o.attempts),
            parks: f(self.parks, o.parks),
            wakeups: f(self.wakeups, o.wakeups),
            gate: match (self.gate, o.gate) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or_default().zip(&b.unwrap_or_default(), f)),
            },
        }
    }

    /// The counts between two snapshots (`self` the later).
    pub fn since(&self, start: &Parking) -> Parking {
        self.zip(start, |a, b| a - b)
    }

    /// The sum of two nodes' counts.
    pub fn plus(&self, o: &Parking) -> Parking {
        self.zip(o, |a, b| a + b)
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}

/// Mean, minimum and maximum over a set (cores).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Spread {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

/// One lock family's traffic over the measured window (all nodes).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LockSummary {
    pub name: String,
    pub acquisitions: u64,
    /// Acquisitions that found the mutex held and were handed it after waiting.
    pub waits: u64,
    /// Wait of those (µs).
    pub wait_us: Percentiles,
    /// Requests dropped at this lock by `server.lock_control` (ASQM or try_lock).
    pub drops: u64,
    /// Cleanup re-acquisitions of a dropped request (never dropped themselves).
    pub cleanups: u64,
    /// Waits (of requests that passed the drop test) that ended with the request's accumulated
    /// queueing delay past the budget: the lock queue's age is a lower bound of a joiner's wait.
    pub waits_over_budget: u64,
    /// Mean waiters over the window (time-weighted).
    pub queue_len_mean: f64,
}

/// One condition variable's traffic over the measured window (all nodes).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CondvarSummary {
    pub name: String,
    /// Waits: a `wait` step found no item and left its core (a notified waiter that finds the
    /// item gone waits again, counted again).
    pub waits: u64,
    /// Waiters a signal woke (notify one, oldest first).
    pub wakeups: u64,
    /// Items added (`signal` steps).
    pub signals: u64,
    /// Waits refused by `server.lock_control` asqm (the request was dropped).
    pub drops: u64,
    /// From joining the condvar's waiters to the signal that woke them (µs), woken waits.
    pub wait_us: Percentiles,
    /// Items left unconsumed at the end of the run.
    pub items_left: u64,
}

/// Drops at lock steps and what they cost the clients (only with `server.lock_control`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LockDrops {
    /// Requests dropped at a lock step, over the measured window (all nodes).
    pub drops: u64,
    /// From a request's creation to its failure reply reaching the client (µs), every failure
    /// reply of the window (retried ones included).
    pub failure_reply_us: Percentiles,
    /// Per lock family.
    pub locks: Vec<LockSummary>,
}

/// One application's results (its requests, latencies and goodput over the measured window).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AppSummary {
    pub name: String,
    pub slo_us: f64,
    pub offered_rps: f64,
    pub throughput_rps: f64,
    pub goodput_rps: f64,
    pub drop_rate: f64,
    pub latency_us: Percentiles,
    pub queueing_delay_us: Percentiles,
    pub slowdown: Slowdown,
    pub by_type: Vec<TypeSummary>,
    /// Whole-run conservation counts of this application.
    pub requests: Requests,
    /// Requests resent to another replica after a failure reply (measured window).
    pub retries: u64,
}

/// One server node's resources over the measured window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeSummary {
    pub node: u32,
    pub cores: Cores,
    pub cpu_utilization: f64,
    pub be_cores_mean: f64,
    pub core_time: CoreTime,
    pub sched: Sched,
    #[serde(default)]
    pub credits: Option<Credits>,
    /// This node's harvesting controller (with per-application core sets, its Primary's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harvest: Option<Harvest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq: Option<Irq>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parking: Option<Parking>,
}

impl NodeSummary {
    /// Adds another node's resources to these totals (`k` nodes added before it): core counts,
    /// core time and scheduling counts add up, the mean lock wait is weighted by waits, the
    /// worker utilisation's mean is the mean over nodes, and credit statistics add up. Harvest,
    /// interrupts and parking have their own merges ([`Harvest::add`], [`Irq::add`],
    /// [`Parking::plus`]); `cpu_utilization` is left to the caller, which knows the node count.
    pub fn add(&mut self, o: &NodeSummary, k: usize) {
        self.cores.max += o.cores.max;
        self.cores.allocated_mean += o.cores.allocated_mean;
        self.cores.busy_mean += o.cores.busy_mean;
        self.cores.transition_mean += o.cores.transition_mean;
        self.be_cores_mean += o.be_cores_mean;
        self.core_time.add(&o.core_time);
        self.sched.add(&o.sched, k);
        if let (Some(a), Some(b)) = (&mut self.credits, &o.credits) {
            a.add_node(b);
        }
    }
}

impl CoreTime {
    pub fn add(&mut self, o: &CoreTime) {
        self.busy_ns += o.busy_ns;
        self.search_ns += o.search_ns;
        self.parked_ns += o.parked_ns;
        self.transition_ns += o.transition_ns;
        self.overhead_ns += o.overhead_ns;
        self.total_ns += o.total_ns;
    }
}

impl Sched {
    /// Adds another node's scheduling counts (`k` nodes added before it).
    pub fn add(&mut self, o: &Sched, k: usize) {
        let waited = |s: &Sched| s.lock_wait_us_mean * s.lock_waits as f64;
        let waits = self.lock_waits + o.lock_waits;
        self.lock_wait_us_mean = if waits > 0 { (waited(self) + waited(o)) / waits as f64 } else { 0.0 };
        self.preemptions += o.preemptions;
        self.yields += o.yields;
        self.lock_acquisitions += o.lock_acquisitions;
        self.lock_waits = waits;
        self.preempt_send_ns += o.preempt_send_ns;
        self.avoided_preemptions += o.avoided_preemptions;
        self.dispatcher_requests += o.dispatcher_requests;
        self.dispatcher_work_ns += o.dispatcher_work_ns;
        self.dispatcher = match (self.dispatcher, o.dispatcher) {
            (Some(x), Some(y)) => Some(x.plus(&y)),
            (x, y) => x.or(y),
        };
        let (ua, ub) = (&mut self.worker_utilization, &o.worker_utilization);
        ua.mean = (ua.mean * k as f64 + ub.mean) / (k + 1) as f64;
        ua.min = ua.min.min(ub.min);
        ua.max = ua.max.max(ub.max);
    }
}

impl DispatcherLoad {
    /// Two nodes' dispatchers together: the busiest is the one that limits; counts add up.
    pub fn plus(&self, y: &DispatcherLoad) -> DispatcherLoad {
        let x = self;
        DispatcherLoad {
            utilization: x.utilization.max(y.utilization),
            saturated: x.saturated || y.saturated,
            queued_end: x.queued_end + y.queued_end,
            arrivals: x.arrivals + y.arrivals,
            arrival_ns: x.arrival_ns + y.arrival_ns,
            completions: x.completions + y.completions,
            completion_ns: x.completion_ns + y.completion_ns,
            requeues: x.requeues + y.requeues,
            requeue_ns: x.requeue_ns + y.requeue_ns,
            signals: x.signals + y.signals,
            signal_ns: x.signal_ns + y.signal_ns,
        }
    }
}

impl Credits {
    /// Adds another node's controller statistics (the node-side ones; the client-side counts
    /// are the driver's, over all clients).
    pub fn add_node(&mut self, b: &Credits) {
        self.pool_mean += b.pool_mean;
        self.issued_mean += b.issued_mean;
        self.drained_mean += b.drained_mean;
        self.aqm_drops += b.aqm_drops;
        self.credit_messages += b.credit_messages;
        self.parks_while_drained += b.parks_while_drained;
        self.pool_max += b.pool_max;
        self.pool_floor = self.pool_floor.zip(b.pool_floor).map(|(x, y)| x + y);
        self.pool_ceiling = self.pool_ceiling.zip(b.pool_ceiling).map(|(x, y)| x + y);
        if let Some(d) = b.start_drops {
            self.start_drops = Some(self.start_drops.unwrap_or(0) + d);
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SimStats {
    pub events: u64,
    pub wall_s: f64,
    pub requests_per_wall_s: f64,
    /// Simulated time (ms) at which an interrupted run stopped; its statistics cover the
    /// measured window up to there. Absent for a complete run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_at_ms: Option<f64>,
}

/// Statistics cover the measured window (after warm-up) unless a field says otherwise.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub scenario: String,
    pub seed: u64,
    pub allocator: String,
    pub overload: String,
    pub duration_s: f64,
    pub slo_us: f64,
    pub offered_rps: f64,
    pub throughput_rps: f64,
    pub goodput_rps: f64,
    pub drop_rate: f64,
    pub latency_us: Percentiles,
    pub queueing_delay_us: Percentiles,
    pub slowdown: Slowdown,
    pub cores: Cores,
    /// LC allocated cores / max cores: the share of the machine the LC application holds.
    pub cpu_utilization: f64,
    /// Mean cores given to the best-effort co-tenant (parked cores).
    pub be_cores_mean: f64,
    pub requests: Requests,
    pub core_time: CoreTime,
    pub by_type: Vec<TypeSummary>,
    /// Credit-based overload control; `None` with the "none" controller.
    #[serde(default)]
    pub credits: Option<Credits>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched: Option<Sched>,
    /// One section per application, the first being the one the flat keys describe.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applications: Vec<AppSummary>,
    /// One section per server node; the flat `cores`, `core_time`, `sched` and `credits` are
    /// their totals.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeSummary>,
    /// Harvesting controllers only, summed over the nodes (one Primary per node): the
    /// Secondary's share is `be_cores_mean`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harvest: Option<Harvest>,
    /// NIC interrupt load (`server.irq`), summed over the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq: Option<Irq>,
    /// Lock-level drops and per-lock statistics, with `server.lock_control` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_control: Option<LockDrops>,
    /// Per condition variable of the request programs (`workload.condvars`), measured window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub condvars: Vec<CondvarSummary>,
    /// Core parking, summed over the nodes (dynamic allocators only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parking: Option<Parking>,
    /// The measured window's histograms (the first application's), for percentiles pooled
    /// across runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histograms: Option<Histograms>,
    pub sim: SimStats,
}

/// HDR histograms of the measured window, each HdrHistogram's compressed V2 text
/// (`HISTFAAA...`, see [`crate::histograms`]): merging those of several runs and reading a
/// quantile gives the percentile of all their requests together.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Histograms {
    /// End-to-end latency, ns.
    pub latency_ns: String,
    /// Time waiting in server queues, ns.
    pub queueing_delay_ns: String,
    /// Slowdown (latency / service time) in thousandths.
    pub slowdown_milli: String,
    /// Per request type, named, for workloads with several types.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_type: Vec<TypeHistograms>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TypeHistograms {
    pub name: String,
    pub latency_ns: String,
    pub queueing_delay_ns: String,
    pub slowdown_milli: String,
}

/// A harvesting controller's counters over the whole run (warm-up included).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Harvest {
    /// Time-weighted mean buffer (idle Primary cores held back); 0 for a controller without one.
    pub buffer_mean: f64,
    /// Fraction of time no held Primary core was idle (lent cores count as busy).
    pub all_busy_fraction: f64,
    /// Cores lent to the Secondary.
    pub lends: u64,
    /// Cores taken back from the Secondary.
    pub evictions: u64,
    /// Evictions forced by a Primary request waiting with no idle held core.
    pub demand_evictions: u64,
    /// Eviction latency of the mechanism, µs (core time spent evicting is core_time.transition_ns).
    pub evict_us: f64,
    /// Cache refill the first Primary request on a core taken back pays, µs
    /// (`mechanism.refill_us`; its busy time is in core_time.busy_ns).
    #[serde(default)]
    pub refill_us: f64,
    /// The Secondary's turn on a core it shares with a Primary thread, µs (`mechanism.timeshare`;
    /// 0: off).
    #[serde(default)]
    pub timeshare_turn_us: f64,
    /// The Secondary's turns inside Primary requests on such cores, and their time, ms: the
    /// Primary's wait (in its latency), the Secondary's progress (in be_cores_mean).
    #[serde(default)]
    pub secondary_turns: u64,
    #[serde(default)]
    pub secondary_turn_ms: f64,
    /// Request-time the Primary spent waiting while an eviction was under way and no held core
    /// was idle, ms (sampled at the controller's poll period).
    pub eviction_wait_ms: f64,
    /// ACBF (paper variant): the Current Harvest Window at the end of the run (the lowest and
    /// highest all-busy fraction per window of its last observation phase), absent before the
    /// first observation phase ends; and the observation phases started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harvest_window_low: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harvest_window_high: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observations: Option<u32>,
}

impl Harvest {
    /// Adds the harvest of another node's Primary (`k` nodes added before it): counts and
    /// buffers add up, the all-busy fraction is the mean over the Primaries.
    pub fn add(&mut self, o: &Harvest, k: usize) {
        self.buffer_mean += o.buffer_mean;
        self.all_busy_fraction = (self.all_busy_fraction * k as f64 + o.all_busy_fraction) / (k + 1) as f64;
        self.lends += o.lends;
        self.evictions += o.evictions;
        self.demand_evictions += o.demand_evictions;
        self.eviction_wait_ms += o.eviction_wait_ms;
        self.secondary_turns += o.secondary_turns;
        self.secondary_turn_ms += o.secondary_turn_ms;
    }
}

/// NIC interrupt handling over the whole run (warm-up included), see `server.irq`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Irq {
    /// `spread`, `secondary` or `idle_first`.
    pub steering: String,
    /// Handlers per second on a core the Primary holds (0 when steered to the Secondary).
    pub held_core_rate_per_s: f64,
    /// Core time handlers took out of running requests (drawn, exact): part of `busy_ns`.
    pub in_service_ns: u64,
    pub in_service_count: u64,
    /// Expected handler time on idle held cores (rate × idle time: it delays no request);
    /// counted, not expected, under `idle_first`.
    pub held_idle_ns: f64,
    /// Expected handler time on the Secondary's cores (its lent cores, and with steering its
    /// dedicated core): core time the Secondary loses.
    pub secondary_ns: f64,
    /// `secondary_ns` over the run, in cores.
    pub secondary_cores_mean: f64,
    /// `server.irq.per_request`: handler runs the requests' packets brought (requests ×
    /// handlers), and that count per second of the run (absent without `per_request`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub per_request_handlers: u64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub per_request_rate_per_s: f64,
}

impl Irq {
    pub fn add(&mut self, o: &Irq) {
        self.in_service_ns += o.in_service_ns;
        self.in_service_count += o.in_service_count;
        self.held_idle_ns += o.held_idle_ns;
        self.secondary_ns += o.secondary_ns;
        self.secondary_cores_mean += o.secondary_cores_mean;
        self.per_request_handlers += o.per_request_handlers;
        self.per_request_rate_per_s += o.per_request_rate_per_s;
    }
}
