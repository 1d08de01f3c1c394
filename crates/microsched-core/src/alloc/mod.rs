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

mod static_alloc;

pub use static_alloc::StaticAllocator;

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

    /// Name for results.
    fn name(&self) -> &'static str;
}

/// Checks an allocator configuration; `field` is its dotted path.
pub fn validate(cfg: &AllocatorCfg, field: &str) -> Result<(), ScenarioError> {
    match cfg {
        AllocatorCfg::Static => Ok(()),
        _ => Err(ScenarioError::new(
            format!("{field}.kind"),
            "this allocator is not implemented yet; allowed: static",
        )),
    }
}

/// Builds the policy a configuration names.
pub fn build(cfg: &AllocatorCfg, max_cores: u32) -> Box<dyn CoreAllocator> {
    match cfg {
        AllocatorCfg::Static => Box::new(StaticAllocator::new(max_cores)),
        other => unreachable!("validate() rejects {other:?}"),
    }
}
