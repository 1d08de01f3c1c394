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
//! With [`breakwater::PoolTrigger::Completion`] (Breakwater v2) pool updates ride on
//! `on_response` (and an AQM drop in `on_request`), so the driver calls `take_wakeups` after those
//! too; calling it after every call into the controller is always correct.
//!
//! Sessions `0..N` are connected from the start and hold no credits until they ask for some with
//! [`CreditController::on_credit_request`].
//!
//! The "none" controller is no object at all: drivers skip credits entirely for it ([`build`]
//! returns `None`).

pub mod client;

/// The registry: one line per controller, `file::Variant` (see [`crate::alloc`]'s registry).
/// `none` is no controller at all and `python` a controller written in Python.
macro_rules! registry {
    ($( $(#[$attr:meta])* $file:ident :: $Variant:ident ),* $(,)?) => {
        $( pub mod $file; )*

        /// Overload (admission) control.
        #[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum OverloadCfg {
            /// Everything is admitted; clients send as soon as a request is created.
            #[default]
            None,
            $( $(#[$attr])* $Variant($file::Config), )*
            /// A credit controller written in Python (see the "write your own policy" docs page).
            Python(crate::plugin::PythonPolicy),
        }

        impl OverloadCfg {
            /// The built-in controller's configuration; `None` for `none` and Python.
            fn registered(&self) -> Option<&dyn OverloadConfig> {
                match self {
                    $( OverloadCfg::$Variant(c) => Some(c), )*
                    OverloadCfg::None | OverloadCfg::Python(_) => None,
                }
            }
        }
    };
}

registry! {
    breakwater::Breakwater,
    protego::Protego,
    seda::Seda,
}

/// A controller's `[policy.overload]` table: how it is checked and built.
pub trait OverloadConfig {
    /// Checks the parameters; `field` is the table's dotted path, which errors name.
    fn validate(&self, field: &str) -> Result<(), ScenarioError>;
    /// The controller, with sessions `0..env.sessions` connected; `None` for a policy that runs
    /// no credits at the server. The configuration has passed [`OverloadConfig::validate`].
    fn build(&self, env: &OverloadEnv) -> Option<Box<dyn CreditController>>;
}

pub use breakwater::Breakwater;

use crate::env::OverloadEnv;
use crate::error::ScenarioError;
use crate::time::Nanos;

pub type SessionId = u32;

/// Starts loading `x` into the cache without waiting for it. With 100 000 sessions, the state of
/// the session a request belongs to is seldom cached: asked for one event ahead, its miss
/// overlaps with that event instead of stalling the next.
#[inline]
pub(crate) fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache; it never faults and reads nothing into the program.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((x as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

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
    /// still queued at the client after this one was sent). The request counts as pending at the
    /// server until its `on_response`, whether admitted or dropped; a dropped one still gets a
    /// response (a failure reply, with credits).
    fn on_request(&mut self, now: Nanos, session: SessionId, demand: u32, delay_ns: Nanos) -> Admission;

    /// A response (completion, or drop notice when `dropped`) for `session` leaves the server;
    /// returns the absolute credits the client may hold, piggybacked on it.
    fn on_response(&mut self, now: Nanos, session: SessionId, dropped: bool, delay_ns: Nanos) -> u32;

    /// A session with no credits asks for some, reporting its demand (Breakwater's first
    /// request / WINUPDATE). Returns credits to send in an explicit credit message, if any. `None`
    /// means the session must wait: it is then on a drained list, and a later pool update wakes
    /// it through [`CreditController::take_wakeups`]. A demand of 0 tells the server the client's
    /// queue emptied (e.g. by client-side timeouts) and releases unused credits.
    fn on_credit_request(&mut self, now: Nanos, session: SessionId, demand: u32) -> Option<u32>;

    /// Drained sessions woken since the last call, with the credits to send them explicitly.
    fn take_wakeups(&mut self, out: &mut Vec<(SessionId, u32)>);

    /// Whether [`CreditController::take_wakeups`] has anything to give: the simulator asks after
    /// every request and response, and most of the time no session was woken.
    fn has_wakeups(&self) -> bool {
        true
    }

    /// The core allocator changed the number of active cores to `active` (the simulation study's
    /// fix grows the pool in proportion to the cores added). Called on every change; controllers
    /// assume `max_cores` active until told otherwise, so a driver whose allocator does not start
    /// with every core reports the initial count at time 0.
    fn on_cores_changed(&mut self, _now: Nanos, _active: u32) {}

    /// A hint: `session`'s state is about to be needed (a request of it is on its way here).
    /// Changes nothing; lets a driver with many sessions overlap the cache miss with other work.
    fn prefetch(&self, _session: SessionId) {}

    fn stats(&self) -> CreditStats;

    /// The pool's floor and ceiling, for controllers that bound it (Breakwater's `[min_pool,
    /// N · max_pool_per_session]`).
    fn pool_bounds(&self) -> Option<(i64, i64)> {
        None
    }

    fn name(&self) -> &'static str;
}

/// Checks an overload-controller configuration; `field` is its dotted path.
pub fn validate(cfg: &OverloadCfg, field: &str) -> Result<(), ScenarioError> {
    match cfg {
        OverloadCfg::None => Ok(()),
        OverloadCfg::Python(p) => crate::plugin::python_bridge(field)?.validate(crate::plugin::PolicyKind::Overload, p, field).map(drop),
        _ => cfg.registered().expect("every built-in is registered").validate(field),
    }
}

/// Builds the controller a scenario names, `None` for the "none" controller (no credits at all)
/// and for client-side control (SEDA). `env.rtt_ns` is the network RTT: the default control
/// period, and the RTT of the core fix's minimum pool. `cfg` has passed [`validate`]; a Python
/// controller's constructor may still fail (the error names the table).
pub fn build(cfg: &OverloadCfg, env: &OverloadEnv) -> Result<Option<Box<dyn CreditController>>, ScenarioError> {
    match cfg {
        OverloadCfg::None => Ok(None),
        OverloadCfg::Python(p) => crate::plugin::python_bridge("policy.overload")?.controller(p, env).map(Some),
        _ => Ok(cfg.registered().expect("every built-in is registered").build(env)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::breakwater::Config as BreakwaterCfg;

    fn bw_err(f: impl FnOnce(&mut BreakwaterCfg)) -> ScenarioError {
        let mut c = BreakwaterCfg::default();
        f(&mut c);
        validate(&OverloadCfg::Breakwater(c), "policy.overload").unwrap_err()
    }

    fn env() -> OverloadEnv {
        OverloadEnv { sessions: 10, max_cores: 4, rtt_ns: 10_000, seed: 0 }
    }

    #[test]
    fn defaults_validate_and_build() {
        assert!(validate(&OverloadCfg::None, "policy.overload").is_ok());
        let c = OverloadCfg::Breakwater(BreakwaterCfg::default());
        assert!(validate(&c, "policy.overload").is_ok());
        assert!(build(&OverloadCfg::None, &env()).unwrap().is_none());
        let b = build(&c, &env()).unwrap().expect("breakwater builds");
        assert_eq!(b.name(), "breakwater");
        assert_eq!(b.pool(), 4);
        assert_eq!(b.sessions(), 10);
        assert_eq!(b.timer_interval(), Some(10_000));
    }

    #[test]
    fn bad_parameters_name_their_field() {
        assert_eq!(bw_err(|c| c.alpha = -0.1).field, "policy.overload.alpha");
        assert_eq!(bw_err(|c| c.alpha = f64::NAN).field, "policy.overload.alpha");
        assert_eq!(bw_err(|c| c.beta = 1.0).field, "policy.overload.beta");
        assert_eq!(bw_err(|c| c.beta = 1.5).field, "policy.overload.beta");
        assert_eq!(bw_err(|c| c.beta = 0.0).field, "policy.overload.beta");
        assert_eq!(bw_err(|c| c.beta = -0.02).field, "policy.overload.beta");
        assert_eq!(bw_err(|c| c.target_us = 0.0).field, "policy.overload.target_us");
        assert_eq!(bw_err(|c| c.target_us = -5.0).field, "policy.overload.target_us");
        assert_eq!(bw_err(|c| c.target_us = f64::INFINITY).field, "policy.overload.target_us");
        let e = bw_err(|c| c.drop_us = Some(79.0));
        assert_eq!(e.field, "policy.overload.drop_us");
        assert!(e.message.contains("79") && e.message.contains("target_us"), "{e}");
        assert_eq!(bw_err(|c| c.drop_us = Some(-1.0)).field, "policy.overload.drop_us");
        assert_eq!(bw_err(|c| c.rtt_us = Some(0.0)).field, "policy.overload.rtt_us");
        assert_eq!(bw_err(|c| c.max_window = 0).field, "policy.overload.max_window");
        assert_eq!(bw_err(|c| c.max_pool_per_session = 0).field, "policy.overload.max_pool_per_session");
        assert_eq!(bw_err(|c| c.min_pool = Some(0)).field, "policy.overload.min_pool");
        assert_eq!(bw_err(|c| c.initial_pool = Some(0)).field, "policy.overload.initial_pool");
        // Edge values that are allowed.
        let ok = |f: fn(&mut BreakwaterCfg)| {
            let mut c = BreakwaterCfg::default();
            f(&mut c);
            validate(&OverloadCfg::Breakwater(c), "p").is_ok()
        };
        assert!(ok(|c| c.drop_us = Some(80.0)), "drop threshold equal to the target");
        assert!(ok(|c| c.alpha = 0.0));
        assert!(ok(|c| c.beta = 0.999));
    }
}
