//! Overload (admission) control at the server: credit controllers, one file per policy, each a
//! pure state machine behind [`CreditController`].
//!
//! The driver (simulator server or runtime RPC layer) calls, in this order of a request's life:
//! [`CreditController::on_request`] when it reaches the server (AQM may drop it),
//! [`CreditController::on_response`] when its response (completion or drop notice) leaves, to get
//! the absolute credit count to piggyback; [`CreditController::on_timer`] every
//! [`CreditController::timer_interval`]; and it sends an explicit credit message for each wake-up
//! returned by [`CreditController::take_wakeups`]. The delay passed in is the driver's congestion
//! signal (max over cores of the oldest queued item's age), as stale as the driver measures it.
//!
//! The "none" controller is no object at all: drivers skip credits entirely for it.

use crate::error::ScenarioError;
use crate::scenario::OverloadCfg;
use crate::time::Nanos;

pub type SessionId = u32;

/// The RPC-layer credit state a core allocator may see (CoreSync §III-D): the pool is the single
/// writable value; everything else is read-only.
pub trait CreditLink {
    /// C_total.
    fn pool(&self) -> i64;
    fn set_pool(&mut self, credits: i64);
    /// C_issued: credits currently held by clients, in flight and unused.
    fn issued(&self) -> i64;
    /// N_sess: connected sessions.
    fn sessions(&self) -> u32;
    /// Sessions holding zero credits (on a drained list).
    fn drained(&self) -> u32;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Admit,
    /// AQM drop: the server answers with a failure reply.
    Drop,
}

/// Counters and state for the time series.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CreditStats {
    pub pool: i64,
    pub issued: i64,
    pub drained: u32,
    pub aqm_drops: u64,
}

pub trait CreditController: CreditLink + Send {
    /// Period of `on_timer` (periodic pool updates); `None` when updates ride on completions.
    fn timer_interval(&self) -> Option<Nanos>;
    fn on_timer(&mut self, now: Nanos, delay_ns: Nanos);

    /// A request of `session` reaches the server, with the client's reported demand (requests
    /// still queued at the client).
    fn on_request(&mut self, now: Nanos, session: SessionId, demand: u32, delay_ns: Nanos) -> Admission;

    /// A response (completion, or drop notice when `dropped`) for `session` leaves the server;
    /// returns the absolute credits the client may hold, piggybacked on it.
    fn on_response(&mut self, now: Nanos, session: SessionId, dropped: bool, delay_ns: Nanos) -> u32;

    /// A session with no credits asks for some, reporting its demand (Breakwater's first
    /// request / WINUPDATE). Returns credits to send in an explicit credit message, if any.
    fn on_credit_request(&mut self, now: Nanos, session: SessionId, demand: u32) -> Option<u32>;

    /// Drained sessions woken since the last call, with the credits to send them explicitly.
    fn take_wakeups(&mut self, out: &mut Vec<(SessionId, u32)>);

    /// The core allocator changed the number of active cores (the simulation study's fix grows
    /// the pool in proportion).
    fn on_cores_changed(&mut self, _now: Nanos, _active: u32) {}

    fn stats(&self) -> CreditStats;

    fn name(&self) -> &'static str;
}

/// Checks an overload-controller configuration; `field` is its dotted path.
pub fn validate(cfg: &OverloadCfg, field: &str) -> Result<(), ScenarioError> {
    match cfg {
        OverloadCfg::None => Ok(()),
        OverloadCfg::Breakwater(_) => Err(ScenarioError::new(
            format!("{field}.kind"),
            "this controller is not implemented yet; allowed: none",
        )),
    }
}
