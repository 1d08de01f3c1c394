//! The mechanism the harvesting controllers share (HarvestContainers, Hall et al., NSDI'26, and
//! its baselines): a Primary (latency-sensitive) application provisioned with a fixed core set
//! lends its idle cores to an always-runnable Secondary. In the engine's terms a held core is an
//! active core (running a request, or idle), a lent core is a parked one (its time is the
//! Secondary's progress, `be_cores_mean`), and taking a lent core back is a grant whose wake-up
//! is the eviction of the Secondary (the actuation latency, [`Mechanism`]).
//!
//! The controllers differ only in how many idle cores they keep back (the buffer) and, for the
//! window-based ones, how many they may lend; the actuation is common:
//!
//! * **evict** when the held idle cores (plus those being evicted) fall below the buffer, or when
//!   Primary work waits with no idle held core (a Primary thread woken on a lent core waits for
//!   the eviction, as under Linux: the cost of lending the wrong core emerges here);
//! * **lend** the highest-numbered idle core when the idle cores have exceeded the buffer for the
//!   whole lend latency: a slow mechanism (cpuset: the Secondary's threads only move at the next
//!   load balance, milliseconds later) misses surpluses shorter than that.
//!
//! The monitor is the controller's tick (`poll_us`, 1 µs by default, standing in for the
//! artifact's busy-polling kthread): at each tick it reads which held cores are idle, and it
//! integrates the "all cores busy" time (no idle held core; lent cores count as busy) that ACBF
//! is built on, exact to the poll period.

use super::{AllocAction, AllocView, CoreId};
use crate::error::ScenarioError;
use crate::time::{us, Nanos};
use crate::wake::WakeLatency;

/// How the Secondary's core set is changed, with its latencies. The defaults are the paper's
/// (§4: two-phase affinity completes a reassignment in 30 µs; `cpuset` / `sched_setaffinity`
/// only moves threads onto new cores at the next periodic rebalance, "several milliseconds",
/// while taking a core away migrates its threads at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MechanismKind {
    /// HarvestContainers' two-phase affinity: lend and evict in 30 µs.
    TwoPhaseAffinity,
    /// A cpuset (or plain affinity) write: lending takes effect after 4 ms, evicting in 30 µs.
    Cpuset,
}

/// Cache refill a Primary request pays on a core taken back from the Secondary, µs: re-reading a
/// private-L2-sized working set after a CPU-bound Secondary (CPUBully, the paper's) ran on the
/// core, minus reading it warm. Measured with `cargo run --release -p microsched-runtime
/// --example cache_refill` on a 2-core AMD EPYC VM (1 MiB L2, 32 MiB L3): 0 to 2.7 µs, median
/// of 41 trials, over 8 runs; the Primary's data stays in the shared L3. A Secondary streaming
/// through more than the L3 sends it to memory: 87 to 105 µs there (set `refill_us` for it).
pub const REFILL_US: f64 = 1.0;

/// How long a Primary thread woken on a core the Secondary runs on waits before it runs, µs
/// (mean, p99 of a log-normal): the Linux scheduler has to preempt the Secondary there. The
/// artifact's balancer does not see such a thread (it reads only which Primary cores are idle,
/// and refills the buffer when idle cores fall below it), so with no held core idle the
/// Primary's wait is the scheduler's, not the 30 µs eviction. Measured with `cargo run --release
/// -p microsched-runtime --example wake_on_busy_core` on a 2-core AMD EPYC VM (Linux 6.18,
/// EEVDF), 8 runs of 300 wake-ups on a quiet machine: median 18.8 to 21.5 µs, p99 28.9 to 62.3
/// µs (medians of the runs: 19.4 and 42); the log-normal with that median and p99 has mean
/// 20.5 µs. The same wake-up on an idle core took longer there (median 44 to 47 µs: the idle
/// vCPU's exit), which the model does not charge: a standalone Primary starts at once on an idle
/// core, so this wait is charged in full and bounds the lent core's extra cost from above.
pub const LENT_WAKE_MEAN_US: f64 = 20.5;
pub const LENT_WAKE_P99_US: f64 = 42.0;

/// How the Linux scheduler shares a core between a Primary thread and the Secondary it was lent
/// to, once the Primary runs there: the artifact's balancer does not evict the Secondary from a
/// core a Primary thread woke on (it evicts only to refill the buffer), and both pods are
/// Kubernetes BestEffort (the artifact's pod files set no CPU requests: equal cpu.shares), so the
/// two threads take turns at equal weight. Measured with `cargo run --release -p
/// microsched-runtime --example timeshare_on_busy_core` on a 2-core AMD EPYC VM (Linux 6.18,
/// EEVDF, CONFIG_HZ=250), a Primary and a CPU-bound thread pinned to one core, two runs: after a
/// 2-5 ms sleep the Primary's first turn (60 computes of 16 ms each) is 1.1-1.2 ms at p10, 3.3-3.6
/// ms median and 4.8-5.0 ms at p90 (its slice, then up to the next 4 ms tick); every later turn,
/// its own and the Secondary's, is one tick (3.98 and 4.02 ms medians). The model: a first turn
/// uniform on [1, 5] ms (p10 1.4, median 3, p90 4.6), then 4 ms turns. It predicts a Primary
/// computing 2, 4 and 8 ms after a sleep to take 1.5, 1.75 and 1.88 times as long; measured
/// 1.44-1.62, 1.68-1.92 and 1.81-1.93. `turn_us = 0` turns it off (the Primary has the core to
/// itself once it runs, the model of earlier versions).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Timeshare {
    /// Each turn after the first, the Primary's and the Secondary's, µs (0: no sharing).
    pub turn_us: f64,
    /// The Primary's first turn after its thread wakes on the core is uniform on
    /// [`first_turn_min_us`, `first_turn_max_us`] (its slice, then the scheduler tick's phase), µs.
    pub first_turn_min_us: f64,
    /// The upper end of the Primary's first turn (see `first_turn_min_us`), µs.
    pub first_turn_max_us: f64,
}

pub const TIMESHARE_TURN_US: f64 = 4000.0;
pub const TIMESHARE_FIRST_TURN_MIN_US: f64 = 1000.0;
pub const TIMESHARE_FIRST_TURN_MAX_US: f64 = 5000.0;

impl Default for Timeshare {
    fn default() -> Self {
        Self { turn_us: TIMESHARE_TURN_US, first_turn_min_us: TIMESHARE_FIRST_TURN_MIN_US, first_turn_max_us: TIMESHARE_FIRST_TURN_MAX_US }
    }
}

impl Timeshare {
    /// Off: the Primary keeps a core once its thread runs there.
    pub const OFF: Self = Self { turn_us: 0.0, first_turn_min_us: 0.0, first_turn_max_us: 0.0 };

    pub fn is_on(&self) -> bool {
        self.turn_us > 0.0
    }
}

/// Actuation: the mechanism and, optionally, its latencies set by hand.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Mechanism {
    /// `two_phase_affinity` (lend 30 µs, evict 30 µs) or `cpuset` (lend 4000 µs, evict 30 µs).
    pub kind: MechanismKind,
    /// Overrides the mechanism's lend latency: how long a surplus of idle cores must last
    /// before the Secondary runs on one.
    pub lend_us: Option<f64>,
    /// Overrides the mechanism's eviction latency: how long a Primary waits for a lent core.
    pub evict_us: Option<f64>,
    /// Cache refill the first Primary request pays on a core taken back from the Secondary, µs
    /// (default [`REFILL_US`], measured for a CPU-bound Secondary; 0: none).
    pub refill_us: f64,
    /// How long Primary work that finds no held core idle waits for the lent core its thread
    /// woke on (the scheduler preempting the Secondary there), drawn per such wake-up (default:
    /// log-normal, mean [`LENT_WAKE_MEAN_US`], p99 [`LENT_WAKE_P99_US`], measured by the runtime's
    /// `wake_on_busy_core` example). `{ dist = "constant", value_us = 30 }` is the eviction
    /// reading of earlier versions: the agent takes the core back on demand in `evict_us`.
    pub lent_wake: WakeLatency,
    /// How a Primary thread running on a lent core takes turns with the Secondary there, until
    /// the core is lent again (default: measured here, see [`Timeshare`]; `{ turn_us = 0 }`:
    /// off).
    pub timeshare: Timeshare,
}

impl Default for Mechanism {
    fn default() -> Self {
        Self {
            kind: MechanismKind::TwoPhaseAffinity,
            lend_us: None,
            evict_us: None,
            refill_us: REFILL_US,
            lent_wake: WakeLatency::Lognormal { mean_us: LENT_WAKE_MEAN_US, p99_us: LENT_WAKE_P99_US },
            timeshare: Timeshare::default(),
        }
    }
}

impl Mechanism {
    pub fn cpuset() -> Self {
        Self { kind: MechanismKind::Cpuset, ..Self::default() }
    }
    /// (lend, evict) latencies in µs.
    pub fn latencies_us(&self) -> (f64, f64) {
        let (l, e) = match self.kind {
            MechanismKind::TwoPhaseAffinity => (30.0, 30.0),
            MechanismKind::Cpuset => (4000.0, 30.0),
        };
        (self.lend_us.unwrap_or(l), self.evict_us.unwrap_or(e))
    }
    pub fn validate(&self, field: &str) -> Result<(), ScenarioError> {
        use super::common::check_non_negative_us;
        if let Some(v) = self.lend_us {
            check_non_negative_us(format!("{field}.lend_us"), v)?;
        }
        if let Some(v) = self.evict_us {
            check_non_negative_us(format!("{field}.evict_us"), v)?;
        }
        check_non_negative_us(format!("{field}.refill_us"), self.refill_us)?;
        check_non_negative_us(format!("{field}.timeshare.turn_us"), self.timeshare.turn_us)?;
        check_non_negative_us(format!("{field}.timeshare.first_turn_min_us"), self.timeshare.first_turn_min_us)?;
        check_non_negative_us(format!("{field}.timeshare.first_turn_max_us"), self.timeshare.first_turn_max_us)?;
        if self.timeshare.first_turn_min_us > self.timeshare.first_turn_max_us {
            return Err(ScenarioError::new(
                format!("{field}.timeshare.first_turn_min_us"),
                format!(
                    "{} is not allowed: must be at most first_turn_max_us ({})",
                    self.timeshare.first_turn_min_us, self.timeshare.first_turn_max_us
                ),
            ));
        }
        // A measured CSV is read (relative to the scenario file) when the run is built.
        if !matches!(self.lent_wake, WakeLatency::Empirical { .. }) {
            self.lent_wake.build(std::path::Path::new("."), &format!("{field}.lent_wake"))?;
        }
        Ok(())
    }
}

/// What a harvesting controller reports for the summary (over the whole run, warm-up included).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HarvestReport {
    /// Time-weighted mean of the buffer the controller aimed at (idle cores kept back).
    pub buffer_mean: f64,
    /// Fraction of time with no idle held core (lent cores count as busy): the ACBF of the run.
    pub all_busy_fraction: f64,
    /// Cores lent to the Secondary.
    pub lends: u64,
    /// Cores taken back from the Secondary (each costs the Primary the eviction latency).
    pub evictions: u64,
    /// Lent cores taken by waiting Primary work (a thread woken on a lent core, which waits for
    /// the scheduler there: `mechanism.lent_wake`), a subset.
    pub demand_evictions: u64,
    /// Request-time spent waiting while no held core was idle and an eviction was under way
    /// (Σ waiting requests × time, sampled at the poll period), ns: the Primary's eviction wait.
    pub eviction_wait_ns: f64,
    /// ACBF (paper variant): the Current Harvest Window at the end of the run, the lowest and
    /// highest per-window all-busy fraction of its last observation phase; `None` before the
    /// first phase ends, and for other controllers.
    pub harvest_window: Option<(f64, f64)>,
    /// ACBF (paper variant): observation phases started, the first included.
    pub observations: Option<u32>,
}

/// The held cores as the monitor reads them at a tick.
#[derive(Debug, Clone, Copy, Default)]
pub struct Snapshot {
    pub now: Nanos,
    /// Held cores without a request.
    pub idle: usize,
    /// The highest-numbered idle held core: the next to lend (the artifact lends from the end of
    /// the Primary's core list, keeping the low-numbered, warm cores).
    pub top_idle: Option<CoreId>,
    pub active: usize,
    pub waking: usize,
    pub parked: usize,
    /// Primary requests waiting for a core.
    pub queued: u64,
}

impl Snapshot {
    pub fn read(obs: &dyn AllocView) -> Self {
        let mut s = Snapshot { now: obs.now(), active: obs.active(), waking: obs.waking(), parked: obs.parked(), ..Default::default() };
        obs.for_each_idle(&mut |c| {
            s.idle += 1;
            s.top_idle = Some(s.top_idle.map_or(c, |t: CoreId| t.max(c)));
        });
        obs.for_each_queued(&mut |_, c| s.queued += c.queued as u64);
        s
    }
    /// Held cores running Primary work (or about to: the queued requests), at most all cores.
    pub fn demand(&self, max_cores: usize) -> usize {
        (self.active - self.idle + self.waking + self.queued as usize).min(max_cores)
    }
}

/// The shared actuation and monitoring state.
#[derive(Debug, Clone)]
pub struct Harvester {
    pub lend_delay: Nanos,
    pub evict_delay: Nanos,
    /// The cache refill of the first request on a core taken back.
    pub refill: Nanos,
    /// The wait of Primary work on the lent core its thread woke on.
    pub lent_wake: WakeLatency,
    /// How the Primary then shares that core with the Secondary.
    pub timeshare: Timeshare,
    /// Whether the core granted at the last tick went to waiting work (its delay is then
    /// `lent_wake`'s, not the eviction's).
    pub last_grant_demand: bool,
    surplus_since: Option<Nanos>,
    last: Option<Snapshot>,
    last_buffer: usize,
    started: Nanos,
    /// Cumulative time with no idle held core, as of the last tick.
    pub all_busy_ns: Nanos,
    buffer_ns: f64,
    pub lends: u64,
    pub evictions: u64,
    pub demand_evictions: u64,
    eviction_wait_ns: f64,
}

impl Harvester {
    pub fn new(m: &Mechanism) -> Self {
        let (l, e) = m.latencies_us();
        Self {
            lend_delay: us(l),
            evict_delay: us(e),
            refill: us(m.refill_us),
            lent_wake: m.lent_wake.clone(),
            timeshare: m.timeshare,
            last_grant_demand: false,
            surplus_since: None,
            last: None,
            last_buffer: 0,
            started: 0,
            all_busy_ns: 0,
            buffer_ns: 0.0,
            lends: 0,
            evictions: 0,
            demand_evictions: 0,
            eviction_wait_ns: 0.0,
        }
    }

    /// Reads the cores and integrates the monitor's counters over the time since the last tick
    /// (the state seen then is taken to have held since: exact to the poll period).
    pub fn observe(&mut self, obs: &dyn AllocView) -> Snapshot {
        let s = Snapshot::read(obs);
        if let Some(p) = self.last {
            let dt = s.now - p.now;
            if p.idle == 0 {
                self.all_busy_ns += dt;
                if p.waking > 0 {
                    self.eviction_wait_ns += dt as f64 * p.queued as f64;
                }
            }
            self.buffer_ns += dt as f64 * self.last_buffer as f64;
        } else {
            self.started = s.now;
        }
        self.last = Some(s);
        s
    }

    /// Keeps `buffer` idle cores held and lends the rest, at most `max_lent` in all.
    pub fn act(&mut self, s: &Snapshot, buffer: usize, max_lent: usize) -> AllocAction {
        self.last_buffer = buffer;
        let demand = s.queued > s.waking as u64 && s.idle == 0;
        self.last_grant_demand = false;
        if s.parked > 0 && (s.idle + s.waking < buffer || demand || s.parked > max_lent) {
            self.surplus_since = None;
            self.evictions += 1;
            self.demand_evictions += demand as u64;
            self.last_grant_demand = demand;
            return AllocAction::Grant;
        }
        if s.idle > buffer && s.parked < max_lent {
            let since = *self.surplus_since.get_or_insert(s.now);
            if s.now - since >= self.lend_delay {
                if let Some(c) = s.top_idle {
                    self.lends += 1;
                    return AllocAction::Yield(c);
                }
            }
        } else {
            self.surplus_since = None;
        }
        AllocAction::Nothing
    }

    pub fn report(&self) -> HarvestReport {
        let span = self.last.map_or(0, |l| l.now - self.started);
        let f = |x: f64| if span == 0 { 0.0 } else { x / span as f64 };
        HarvestReport {
            buffer_mean: f(self.buffer_ns),
            all_busy_fraction: f(self.all_busy_ns as f64),
            lends: self.lends,
            evictions: self.evictions,
            demand_evictions: self.demand_evictions,
            eviction_wait_ns: self.eviction_wait_ns,
            harvest_window: None,
            observations: None,
        }
    }
}

#[cfg(test)]
pub(crate) mod test_view {
    //! A hand-built view: which held cores are idle, for the controllers' unit tests.
    use super::super::{AllocView, CoreId, CoreObs, CoreState};
    use crate::time::Nanos;

    pub struct View {
        pub now: Nanos,
        /// Per core: state, and whether a held core is idle.
        pub cores: Vec<(CoreState, bool)>,
        pub queued: u32,
    }

    impl View {
        /// `n` held cores of which the first `busy` run requests.
        pub fn held(now: Nanos, n: usize, busy: usize) -> Self {
            Self { now, cores: (0..n).map(|i| (CoreState::Active, i >= busy)).collect(), queued: 0 }
        }
    }

    impl AllocView for View {
        fn now(&self) -> Nanos {
            self.now
        }
        fn active(&self) -> usize {
            self.cores.iter().filter(|c| c.0 == CoreState::Active).count()
        }
        fn waking(&self) -> usize {
            self.cores.iter().filter(|c| c.0 == CoreState::Waking).count()
        }
        fn parked(&self) -> usize {
            self.cores.iter().filter(|c| c.0 == CoreState::Parked).count()
        }
        fn busy_search_totals(&self) -> (Nanos, Nanos) {
            (0, 0)
        }
        fn for_each_queued(&self, f: &mut dyn FnMut(CoreId, &CoreObs)) {
            if self.queued > 0 {
                let mut o = CoreObs::new(CoreState::Active);
                o.queued = self.queued;
                f(0, &o);
            }
        }
        fn for_each_active(&self, f: &mut dyn FnMut(CoreId, &CoreObs)) {
            for (i, c) in self.cores.iter().enumerate() {
                if c.0 == CoreState::Active {
                    f(i as CoreId, &CoreObs::new(c.0));
                }
            }
        }
        fn prev(&self, _core: CoreId) -> CoreObs {
            CoreObs::new(CoreState::Active)
        }
        fn for_each_idle(&self, f: &mut dyn FnMut(CoreId)) {
            for (i, c) in self.cores.iter().enumerate() {
                if c.0 == CoreState::Active && c.1 {
                    f(i as CoreId);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_view::View;
    use super::*;
    use crate::alloc::CoreState;

    #[test]
    fn lends_only_after_the_lend_latency_and_evicts_below_the_buffer() {
        let mut h = Harvester::new(&Mechanism { lend_us: Some(10.0), ..Mechanism::default() });
        // 8 held cores, 2 busy: 6 idle, buffer 2 -> surplus of 4, but only after 10 µs.
        let v = View::held(0, 8, 2);
        let s = h.observe(&v);
        assert_eq!(s.idle, 6);
        assert_eq!(h.act(&s, 2, 8), AllocAction::Nothing);
        let v = View::held(5_000, 8, 2);
        let s = h.observe(&v);
        assert_eq!(h.act(&s, 2, 8), AllocAction::Nothing);
        let v = View::held(10_000, 8, 2);
        let s = h.observe(&v);
        assert_eq!(h.act(&s, 2, 8), AllocAction::Yield(7));
        // A surplus that vanishes restarts the clock.
        let v = View::held(11_000, 8, 6);
        let s = h.observe(&v);
        assert_eq!(h.act(&s, 2, 8), AllocAction::Nothing);
        // One core lent, 6 of 7 held busy: 1 idle < buffer 2 -> evict.
        let mut v = View::held(12_000, 8, 6);
        v.cores[7] = (CoreState::Parked, false);
        let s = h.observe(&v);
        assert_eq!(s.idle, 1);
        assert_eq!(h.act(&s, 2, 8), AllocAction::Grant);
        // Buffer 0, no idle held core, work waiting: a demand eviction.
        let mut v = View::held(13_000, 8, 7);
        v.cores[7] = (CoreState::Parked, false);
        v.queued = 1;
        let s = h.observe(&v);
        assert_eq!(h.act(&s, 0, 8), AllocAction::Grant);
        let r = h.report();
        assert_eq!((r.lends, r.evictions, r.demand_evictions), (1, 2, 1));
        // No tick has yet closed an interval that began with no idle held core.
        assert_eq!(h.all_busy_ns, 0);
    }
}
