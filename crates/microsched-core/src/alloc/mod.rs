//! Core allocation: which cores the latency-critical (LC) application holds.
//!
//! Mechanism lives in the drivers (the simulator's server, the runtime's workers); policy lives
//! here, one file per policy, each a pure state machine behind [`CoreAllocator`]. The driver
//!
//! 1. calls [`CoreAllocator::tick`] every [`CoreAllocator::interval`] with an [`AllocObs`] of the
//!    cores (as stale as the driver's signals are: real systems sample them once per interval),
//!    and carries out the returned [`AllocAction`];
//! 2. when an active core has searched for work without success (its own queue, then stealing)
//!    for at least [`ParkRule::min_poll_ns`] and [`ParkRule::min_passes`] passes, asks
//!    [`CoreAllocator::on_park_attempt`] whether it may park, and parks it if so.

pub mod caladan;
mod common;
pub mod coresync;
pub mod delay_range;
pub mod shenango;
pub mod static_alloc;
pub mod utilization_range;

pub use caladan::CaladanAllocator;
pub use coresync::{CoreSyncAllocator, RRule};
pub use delay_range::DelayRangeAllocator;
pub use shenango::ShenangoAllocator;
pub use static_alloc::StaticAllocator;
pub use utilization_range::UtilizationRangeAllocator;

use crate::error::ScenarioError;
use crate::overload::CreditLink;
use crate::scenario::AllocatorCfg;
use crate::time::Nanos;

pub type CoreId = u16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoreState {
    /// Allocated to the LC application: running a request, or searching for work.
    Active,
    /// Given to the best-effort application.
    Parked,
    /// Granted, but not usable until the allocation delay has passed.
    Waking,
}

/// One core as the driver sees it at a tick. Counters are cumulative since the start of the run,
/// so that a policy can difference them over whatever window it wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreObs {
    pub state: CoreState,
    /// Requests waiting in this core's queues (not the one it is running).
    pub queued: u32,
    /// Enqueue time of the oldest waiting request, if any (its queueing delay is `now` minus it).
    pub oldest_enqueued_at: Option<Nanos>,
    /// Cumulative requests put into / taken out of this core's queues (steals included), for
    /// Shenango's "still queued since the last check" test.
    pub enqueued_total: u64,
    pub dequeued_total: u64,
    /// Cumulative time spent running requests.
    pub busy_ns: Nanos,
    /// Cumulative time spent active without a request: polling and stealing.
    pub search_ns: Nanos,
}

impl CoreObs {
    /// A core in `state` with empty queues and zero counters, as at the start of a run.
    pub fn new(state: CoreState) -> Self {
        Self { state, queued: 0, oldest_enqueued_at: None, enqueued_total: 0, dequeued_total: 0, busy_ns: 0, search_ns: 0 }
    }
}

/// What a policy sees at a tick.
#[derive(Debug, Clone, Copy)]
pub struct AllocObs<'a> {
    pub now: Nanos,
    pub cores: &'a [CoreObs],
}

impl AllocObs<'_> {
    pub fn active(&self) -> usize {
        self.cores.iter().filter(|c| c.state == CoreState::Active).count()
    }
    pub fn waking(&self) -> usize {
        self.cores.iter().filter(|c| c.state == CoreState::Waking).count()
    }
    /// Max over cores of the oldest waiting request's age: the delay signal of Caladan and
    /// Breakwater.
    pub fn max_delay(&self) -> Nanos {
        self.cores
            .iter()
            .filter_map(|c| c.oldest_enqueued_at.map(|t| self.now.saturating_sub(t)))
            .max()
            .unwrap_or(0)
    }
    /// Whether a parked core holds queued work (it counts as congestion in every policy).
    pub fn parked_with_work(&self) -> bool {
        self.cores.iter().any(|c| c.state == CoreState::Parked && c.queued > 0)
    }
}

/// A policy's decision at a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocAction {
    Nothing,
    /// Grant one more core (the driver picks a parked core, preferring one with queued work).
    Grant,
    /// Ask this active core to park at its next idle point (proactive revocation).
    Yield(CoreId),
}

/// When an idle core may park by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParkMode {
    /// Never (static allocation).
    Never,
    /// After the poll period and passes below.
    AfterPoll,
    /// Only when it is the last active core (the range policies: otherwise cores are revoked).
    OnlyLastCore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParkRule {
    pub mode: ParkMode,
    pub min_poll_ns: Nanos,
    pub min_passes: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParkVerdict {
    Park,
    /// Go on polling; the driver asks again after the next work-search pass.
    KeepPolling,
}

pub trait CoreAllocator: Send {
    /// Period of [`CoreAllocator::tick`]; `None` for a policy that never changes the allocation.
    fn interval(&self) -> Option<Nanos>;

    /// Called every interval; returns at most one change.
    fn tick(&mut self, obs: &AllocObs) -> AllocAction;

    fn park_rule(&self) -> ParkRule;

    /// Called when core `core` has met the park rule. `credits` is the RPC layer's credit state
    /// when a credit-based controller runs (CoreSync gates parking on it); `active` counts the
    /// active cores, the caller included. Policies that don't gate parking keep the default.
    fn on_park_attempt(
        &mut self,
        _now: Nanos,
        _core: CoreId,
        _active: usize,
        _credits: Option<&mut dyn CreditLink>,
    ) -> ParkVerdict {
        ParkVerdict::Park
    }

    /// Called when a core that was in a park attempt finds work again, or wakes up after parking
    /// (CoreSync returns the credits it withheld).
    fn on_park_abort(&mut self, _now: Nanos, _core: CoreId, _credits: Option<&mut dyn CreditLink>) {}

    /// The signal the policy decided on at its last tick, for the time series: each policy
    /// documents its unit (delays in nanoseconds, utilization as a fraction in [0, 1]). `None`
    /// before the first tick, and for policies without a signal.
    fn signal(&self) -> Option<f64> {
        None
    }

    /// Name for results.
    fn name(&self) -> &'static str;
}

/// Checks an allocator configuration; `field` is its dotted path. Each policy's file owns its
/// parameters and their checks.
pub fn validate(cfg: &AllocatorCfg, field: &str) -> Result<(), ScenarioError> {
    match cfg {
        AllocatorCfg::Static(c) => c.validate(field),
        AllocatorCfg::Shenango(c) => c.validate(field),
        AllocatorCfg::Caladan(c) => c.validate(field),
        AllocatorCfg::UtilizationRange(c) => c.validate(field),
        AllocatorCfg::DelayRange(c) => c.validate(field),
        AllocatorCfg::CoreSync(c) => c.validate(field),
    }
}

/// Builds the policy a configuration names; `cfg` must have passed [`validate`].
pub fn build(cfg: &AllocatorCfg, max_cores: u32) -> Box<dyn CoreAllocator> {
    match cfg {
        AllocatorCfg::Static(c) => c.build(max_cores),
        AllocatorCfg::Shenango(c) => c.build(max_cores),
        AllocatorCfg::Caladan(c) => c.build(max_cores),
        AllocatorCfg::UtilizationRange(c) => c.build(max_cores),
        AllocatorCfg::DelayRange(c) => c.build(max_cores),
        AllocatorCfg::CoreSync(c) => c.build(max_cores),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(cfg: AllocatorCfg) -> ScenarioError {
        validate(&cfg, "policy.allocator").unwrap_err()
    }

    fn defaults() -> [AllocatorCfg; 6] {
        // The serde defaults, as a scenario with only `kind` set gets them.
        ["static", "shenango", "caladan", "utilization_range", "delay_range", "coresync"]
            .map(|k| serde_json::from_value(serde_json::json!({ "kind": k })).unwrap())
    }

    #[test]
    fn defaults_validate_and_build() {
        for cfg in defaults() {
            validate(&cfg, "policy.allocator").unwrap();
            let a = build(&cfg, 16);
            assert_eq!(a.signal(), None, "{}", a.name());
            if a.name() != "static" {
                assert_eq!(a.interval(), Some(5_000), "{}", a.name());
            }
        }
        let a = build(&AllocatorCfg::Caladan(caladan::Config { interval_us: 5.0, delay_threshold_us: 10.0, poll_us: 2.0 }), 16);
        assert_eq!(a.park_rule().min_poll_ns, 2_000);
    }

    #[test]
    fn bad_parameters_name_their_field() {
        use AllocatorCfg::*;
        let shen = |interval_us, poll_us, min_passes| Shenango(shenango::Config { interval_us, poll_us, min_passes });
        let cal = |interval_us, delay_threshold_us, poll_us| Caladan(caladan::Config { interval_us, delay_threshold_us, poll_us });
        let util = |interval_us, lower, upper| UtilizationRange(utilization_range::Config { interval_us, lower, upper });
        let delay = |interval_us, lower_us, upper_us| DelayRange(delay_range::Config { interval_us, lower_us, upper_us });
        let cases = [
            (shen(0.0, 2.0, 4), "policy.allocator.interval_us"),
            (shen(-5.0, 2.0, 4), "policy.allocator.interval_us"),
            (shen(5.0, 2e6, 4), "policy.allocator.poll_us"),
            (shen(5.0, -1.0, 4), "policy.allocator.poll_us"),
            (cal(f64::NAN, 5.0, 2.0), "policy.allocator.interval_us"),
            (cal(5.0, 0.0, 2.0), "policy.allocator.delay_threshold_us"),
            (cal(5.0, 5.0, 1_000_001.0), "policy.allocator.poll_us"),
            (util(5.0, 0.95, 0.75), "policy.allocator.lower"),
            (util(5.0, 0.8, 0.8), "policy.allocator.lower"),
            (util(5.0, -0.1, 0.9), "policy.allocator.lower"),
            (util(5.0, 0.75, 95.0), "policy.allocator.upper"),
            (util(0.0, 0.75, 0.95), "policy.allocator.interval_us"),
            (delay(5.0, 4.0, 1.0), "policy.allocator.lower_us"),
            (delay(5.0, 1.0, 1.0), "policy.allocator.lower_us"),
            (delay(5.0, -1.0, 1.0), "policy.allocator.lower_us"),
            (delay(5.0, 1.0, f64::INFINITY), "policy.allocator.upper_us"),
        ];
        for (cfg, field) in cases {
            let e = err(cfg.clone());
            assert_eq!(e.field, field, "{cfg:?}: {e}");
            assert!(e.message.contains("not allowed"), "{e}");
        }
        // Zero bounds are meaningful: revoke only at zero utilization / delay; poll 0 parks at once.
        validate(&util(5.0, 0.0, 1.0), "a").unwrap();
        validate(&delay(5.0, 0.0, 4.0), "a").unwrap();
        validate(&cal(5.0, 10.0, 0.0), "a").unwrap();
    }
}
