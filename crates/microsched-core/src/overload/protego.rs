//! Protego's performance-driven admission control (NSDI'23 §3.1), as a credit controller.
//!
//! Only the size of the credit pool is Protego's own: credit distribution to sessions, drained
//! lists, the explicit credit messages and the client are Breakwater v2's, reused as is (an inner
//! [`Breakwater`] whose own AIMD never runs; its ingress AQM drops at the latency budget, as the
//! artifact's `runtime_queue_us() > SBW_LATENCY_BUDGET` does). See
//! `shared/reference/overload-control-and-core-allocation.md` §2.
//!
//! Counters, as the artifact keeps them: `in` counts requests that reach the server with a credit
//! (before AQM), `out` responses that are not drops (goodput, latency not checked), `drop` failure
//! replies (ingress AQM and ASQM alike).
//!
//! * [`Variant::Paper`] (default, Algorithm 1): every iteration of `4 × e2e RTT`, counts taken
//!   over the iteration after its first e2e RTT (the load needs one RTT to follow the new pool):
//!   `drop > t_d·in` → `C ← (1−d)·C`; else if `(in − in_last)(out − out_last) > 0` and
//!   `|out − out_last| > t_e·|in − in_last|` → `C ← C + a`; otherwise `C ← (1−d)·C`; clamped to
//!   `[C_min, C_max]` (Breakwater's floor and ceiling).
//! * [`Variant::Artifact`] (`srpc_update_credit_pool` of the protego branch): checked on every
//!   response and drop, 200 µs iterations whose first 100 µs are discarded; increase by one step
//!   if the last change of admitted load brought a change of goodput of at least 1/4 of it in the
//!   same direction **and** every credit is out; otherwise decrease by one step (additive both
//!   ways, step `max(1, N·0.0005)`).
//!
//! The end-to-end RTT is what the paper measures with an 8-byte credit id: from a credit's issue
//! to the response of the request that used it, which includes the time a credit waits at a
//! client for a request. By default it is measured without per-credit ids, by Little's law over
//! the last iteration: credits issued / responses per unit time (every issued credit is either
//! waiting at a client, on the network or at the server until its response); the first
//! iteration uses the network RTT + budget. `e2e_rtt_us` fixes it instead.

use super::breakwater::{self, Breakwater};
use super::{Admission, CreditController, CreditLink, CreditStats, SessionId};
use crate::error::ScenarioError;
use crate::time::{us, Nanos};

/// Which pool rule runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// Algorithm 1 of the paper: AIMD on marginal efficiency and drop rate.
    Paper,
    /// The artifact's code: ±1 steps, slope 1/4, 200 µs iterations, all credits out to grow.
    Artifact,
}

/// `[policy.overload]` of `kind = "protego"`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub variant: Variant,
    /// Efficiency threshold t_e: grow only if Δgoodput > t_e · Δadmitted (paper).
    pub efficiency_threshold: f64,
    /// Maximum drop rate t_d: shrink when drops exceed t_d · admitted (paper; 1 = no cap).
    pub max_drop_rate: f64,
    /// Additive increase a (credits per iteration; paper: 0.1 % of sessions, 1 in its runs).
    pub increase: f64,
    /// Multiplicative decrease d (paper: 2 %).
    pub decrease: f64,
    /// End-to-end RTT, fixed; an iteration is 4 of them (paper). Default: measured (Little's law).
    pub e2e_rtt_us: Option<f64>,
    /// Artifact variant: iteration length (`SRPC_CM_UPDATE_INTERVAL`).
    pub artifact_interval_us: f64,
    /// Artifact variant: settling time discarded after an update (`SRPC_CM_P99_RTT`).
    pub artifact_settle_us: f64,
    /// Artifact variant: the slope threshold's inverse (`SRPC_CM_SLOPE_INV`).
    pub artifact_slope_inv: f64,
    /// Artifact variant: step per session (`SBW_AI`), at least 1.
    pub artifact_ai: f64,
    /// Ingress AQM: a request arriving when the congestion signal exceeds this is dropped
    /// (`SBW_LATENCY_BUDGET`, 55 µs in the artifact; set it to the workload's budget).
    pub budget_us: f64,
    /// Pool at the start; default 10 × max_cores (the artifact).
    pub initial_pool: Option<u32>,
    /// Pool floor; default max_cores.
    pub min_pool: Option<u32>,
    /// Credits one session may hold (Breakwater's 63).
    pub max_window: u32,
    /// Pool ceiling per session (Breakwater's 64).
    pub max_pool_per_session: u32,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            variant: Variant::Paper,
            efficiency_threshold: 0.1,
            max_drop_rate: 1.0,
            increase: 1.0,
            decrease: 0.02,
            e2e_rtt_us: None,
            artifact_interval_us: 200.0,
            artifact_settle_us: 100.0,
            artifact_slope_inv: 4.0,
            artifact_ai: 0.0005,
            budget_us: 55.0,
            initial_pool: None,
            min_pool: None,
            max_window: 63,
            max_pool_per_session: 64,
        }
    }
}

impl Config {
    pub fn validate(&self, field: &str) -> Result<(), ScenarioError> {
        let check = |key: &str, v: f64, ok: bool, what: &str| {
            if v.is_finite() && ok {
                Ok(())
            } else {
                Err(ScenarioError::new(format!("{field}.{key}"), format!("{v} is not allowed: {what}")))
            }
        };
        check("efficiency_threshold", self.efficiency_threshold, (0.0..=1.0).contains(&self.efficiency_threshold), "use a fraction in [0, 1]")?;
        check("max_drop_rate", self.max_drop_rate, (0.0..=1.0).contains(&self.max_drop_rate), "use a fraction in [0, 1]")?;
        check("increase", self.increase, self.increase > 0.0, "must be > 0")?;
        check("decrease", self.decrease, self.decrease > 0.0 && self.decrease < 1.0, "use a fraction in (0, 1)")?;
        if let Some(r) = self.e2e_rtt_us {
            check("e2e_rtt_us", r, r > 0.0, "must be > 0")?;
        }
        check("artifact_interval_us", self.artifact_interval_us, self.artifact_interval_us > 0.0, "must be > 0")?;
        check(
            "artifact_settle_us",
            self.artifact_settle_us,
            self.artifact_settle_us >= 0.0 && self.artifact_settle_us < self.artifact_interval_us,
            "must be >= 0 and below artifact_interval_us",
        )?;
        check("artifact_slope_inv", self.artifact_slope_inv, self.artifact_slope_inv > 0.0, "must be > 0")?;
        check("artifact_ai", self.artifact_ai, self.artifact_ai >= 0.0, "must be >= 0")?;
        check("budget_us", self.budget_us, self.budget_us > 0.0, "must be > 0")?;
        for (k, v) in [("initial_pool", self.initial_pool), ("min_pool", self.min_pool)] {
            if v == Some(0) {
                return Err(ScenarioError::new(format!("{field}.{k}"), "0 is not allowed: must be at least 1"));
            }
        }
        if self.max_window == 0 || self.max_pool_per_session == 0 {
            let k = if self.max_window == 0 { "max_window" } else { "max_pool_per_session" };
            return Err(ScenarioError::new(format!("{field}.{k}"), "0 is not allowed: must be at least 1"));
        }
        Ok(())
    }

    pub fn build(&self, sessions: u32, max_cores: u32, rtt_ns: Nanos) -> Box<dyn CreditController> {
        Box::new(Protego::new(self, sessions, max_cores, rtt_ns))
    }
}

/// Protego's controller. See the module docs.
#[derive(Debug, Clone)]
pub struct Protego {
    bw: Breakwater,
    variant: Variant,
    te: f64,
    td: f64,
    a: f64,
    d: f64,
    /// Paper: one e2e RTT (the timer period); an iteration is 4 of them.
    rtt_ns: Nanos,
    /// Measure the e2e RTT (Little's law) rather than keep `rtt_ns`.
    measure_rtt: bool,
    net_rtt_ns: Nanos,
    /// Responses since the iteration began, and when it began.
    responses: u64,
    iter_start: Nanos,
    interval_ns: Nanos,
    settle_ns: Nanos,
    slope_inv: f64,
    step: i64,
    /// Fractional pool (AIMD on a real number, applied as its floor).
    pool: f64,
    ticks: u32,
    in_cur: u64,
    out_cur: u64,
    drop_cur: u64,
    in_last: u64,
    out_last: u64,
    last_update: Nanos,
    reset_done: bool,
}

impl Protego {
    pub fn new(cfg: &Config, sessions: u32, max_cores: u32, net_rtt_ns: Nanos) -> Self {
        let inner = breakwater::Config {
            target_us: cfg.budget_us,
            drop_us: Some(cfg.budget_us),
            trigger: breakwater::PoolTrigger::Periodic,
            max_window: cfg.max_window,
            max_pool_per_session: cfg.max_pool_per_session,
            min_pool: cfg.min_pool,
            initial_pool: Some(cfg.initial_pool.unwrap_or(10 * max_cores)),
            ..breakwater::Config::default()
        };
        let bw = Breakwater::new(&inner, sessions, max_cores, net_rtt_ns);
        let rtt_ns = cfg.e2e_rtt_us.map_or(net_rtt_ns + us(cfg.budget_us), us).max(1);
        Self {
            pool: bw.pool() as f64,
            bw,
            variant: cfg.variant,
            te: cfg.efficiency_threshold,
            td: cfg.max_drop_rate,
            a: cfg.increase,
            d: cfg.decrease,
            rtt_ns,
            measure_rtt: cfg.e2e_rtt_us.is_none(),
            net_rtt_ns,
            responses: 0,
            iter_start: 0,
            interval_ns: us(cfg.artifact_interval_us).max(1),
            settle_ns: us(cfg.artifact_settle_us),
            slope_inv: cfg.artifact_slope_inv,
            step: ((f64::from(sessions) * cfg.artifact_ai) as i64).max(1),
            ticks: 0,
            in_cur: 0,
            out_cur: 0,
            drop_cur: 0,
            in_last: 0,
            out_last: 0,
            last_update: 0,
            reset_done: false,
        }
    }

    fn set(&mut self, pool: f64) {
        let p = self.bw.clamp_pool(pool.floor() as i64);
        // The fraction survives only within bounds, so that a clamp does not leave a debt.
        self.pool = if pool.floor() as i64 == p { pool } else { p as f64 };
        self.bw.apply_pool(p);
    }

    /// Algorithm 1's decision at the end of an iteration.
    fn paper_update(&mut self) {
        let (inc, outc) = (self.in_cur as f64, self.out_cur as f64);
        let (din, dout) = (inc - self.in_last as f64, outc - self.out_last as f64);
        let grow = self.drop_cur as f64 <= self.td * inc && din * dout > 0.0 && dout.abs() > self.te * din.abs();
        let next = if grow { self.pool + self.a } else { self.pool * (1.0 - self.d) };
        self.set(next);
        self.in_last = self.in_cur;
        self.out_last = self.out_cur;
    }

    /// `srpc_update_credit_pool()` of the artifact, run on every response and drop.
    fn artifact_check(&mut self, now: Nanos) {
        let t = now.saturating_sub(self.last_update);
        if t < self.settle_ns {
            return;
        }
        if !self.reset_done {
            self.in_cur = 0;
            self.out_cur = 0;
            self.drop_cur = 0;
            self.reset_done = true;
        }
        if t < self.interval_ns {
            return;
        }
        self.last_update = now;
        self.reset_done = false;
        let (inc, outc, inl, outl) = (self.in_cur as f64, self.out_cur as f64, self.in_last as f64, self.out_last as f64);
        let full = self.bw.issued() >= self.bw.pool();
        let grow = if self.in_cur == 0 {
            true
        } else if inc >= inl {
            outc > outl && self.slope_inv * (outc - outl) >= inc - inl && full
        } else {
            outl > outc && self.slope_inv * (outl - outc) > inl - inc && full
        };
        let p = self.bw.pool();
        let next = if grow { p + self.step } else { p - self.step };
        self.set(next as f64);
        self.in_last = self.in_cur;
        self.out_last = self.out_cur;
        self.in_cur = 0;
        self.out_cur = 0;
    }
}

impl CreditLink for Protego {
    fn pool(&self) -> i64 {
        self.bw.pool()
    }
    fn set_pool(&mut self, credits: i64) {
        self.pool = credits as f64;
        self.bw.set_pool(credits);
    }
    fn issued(&self) -> i64 {
        self.bw.issued()
    }
    fn sessions(&self) -> u32 {
        self.bw.sessions()
    }
    fn drained(&self) -> u32 {
        self.bw.drained()
    }
}

impl CreditController for Protego {
    fn timer_interval(&self) -> Option<Nanos> {
        match self.variant {
            Variant::Paper => Some(self.rtt_ns),
            Variant::Artifact => None,
        }
    }

    /// Paper variant, every e2e RTT: the first after an update starts the counts, the fourth ends
    /// the iteration.
    fn on_timer(&mut self, now: Nanos, _delay_ns: Nanos) {
        if self.variant != Variant::Paper {
            return;
        }
        self.ticks += 1;
        if self.ticks == 1 {
            self.in_cur = 0;
            self.out_cur = 0;
            self.drop_cur = 0;
        } else if self.ticks >= 4 {
            if self.measure_rtt && self.responses > 0 {
                let t = now.saturating_sub(self.iter_start) as f64;
                let rtt = self.bw.issued().max(1) as f64 * t / self.responses as f64;
                // Within [network RTT, 100 ms]: an idle server must still be looked at.
                self.rtt_ns = (rtt as Nanos).clamp(self.net_rtt_ns.max(1), 100_000_000);
            }
            self.responses = 0;
            self.iter_start = now;
            self.paper_update();
            self.ticks = 0;
        }
    }

    fn on_request(&mut self, now: Nanos, session: SessionId, demand: u32, delay_ns: Nanos) -> Admission {
        self.in_cur += 1;
        // The artifact's ingress test is `>`; Breakwater's is `>=`: one nanosecond apart.
        self.bw.on_request(now, session, demand, delay_ns.saturating_sub(1))
    }

    fn on_response(&mut self, now: Nanos, session: SessionId, dropped: bool, delay_ns: Nanos) -> u32 {
        self.responses += 1;
        if dropped {
            self.drop_cur += 1;
        } else {
            self.out_cur += 1;
        }
        if self.variant == Variant::Artifact {
            self.artifact_check(now);
        }
        self.bw.on_response(now, session, dropped, delay_ns)
    }

    fn on_credit_request(&mut self, now: Nanos, session: SessionId, demand: u32) -> Option<u32> {
        self.bw.on_credit_request(now, session, demand)
    }

    fn take_wakeups(&mut self, out: &mut Vec<(SessionId, u32)>) {
        self.bw.take_wakeups(out);
    }

    fn has_wakeups(&self) -> bool {
        self.bw.has_wakeups()
    }

    fn prefetch(&self, session: SessionId) {
        self.bw.prefetch(session);
    }

    fn stats(&self) -> CreditStats {
        self.bw.stats()
    }

    fn pool_bounds(&self) -> Option<(i64, i64)> {
        self.bw.pool_bounds()
    }

    fn name(&self) -> &'static str {
        match self.variant {
            Variant::Paper => "protego",
            Variant::Artifact => "protego-artifact",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctl(c: &Config) -> Protego {
        Protego::new(c, 1000, 4, 10_000)
    }

    /// Feeds one iteration (4 timer ticks) with `inn` admitted and `out` completed requests
    /// counted after the first tick, and `drops` failure replies.
    fn iteration(p: &mut Protego, inn: u64, out: u64, drops: u64) {
        p.on_timer(0, 0);
        for i in 0..inn {
            p.on_request(0, (i % 1000) as u32, 0, 0);
        }
        for i in 0..out {
            p.on_response(0, (i % 1000) as u32, false, 0);
        }
        for i in 0..drops {
            p.on_response(0, (i % 1000) as u32, true, 0);
        }
        for _ in 0..3 {
            p.on_timer(0, 0);
        }
    }

    #[test]
    fn algorithm_1_grows_on_efficient_load_and_backs_off_otherwise() {
        let mut p = ctl(&Config { e2e_rtt_us: Some(65.0), ..Config::default() });
        assert_eq!(p.pool(), 40, "10 × max_cores");
        assert_eq!(p.timer_interval(), Some(10_000 + 55_000), "e2e RTT = network RTT + budget");
        iteration(&mut p, 100, 100, 0);
        assert_eq!(p.pool(), 41, "+a: more admitted, more out, slope 1");
        iteration(&mut p, 200, 105, 0);
        assert_eq!(p.pool(), 40, "Δout 5 ≤ t_e · Δin 100: × (1 − d) = 40.18, applied as 40");
    }

    #[test]
    fn algorithm_1_decreases() {
        let mut p = ctl(&Config::default());
        iteration(&mut p, 100, 100, 0);
        iteration(&mut p, 300, 101, 0);
        assert_eq!(p.pool(), 40, "Δout 1 ≤ 0.1 · Δin 200: × (1 − 2 %) = 40.18 → 40");
        let mut p = ctl(&Config { max_drop_rate: 0.1, ..Config::default() });
        iteration(&mut p, 100, 100, 0);
        iteration(&mut p, 200, 200, 50);
        assert_eq!(p.pool(), 40, "drops 50 > 0.1 · 200: decrease even though efficient");
        let mut p = ctl(&Config::default());
        iteration(&mut p, 100, 100, 0);
        iteration(&mut p, 100, 100, 0);
        assert_eq!(p.pool(), 40, "no change of admitted load: Δin·Δout = 0 → decrease");
    }

    #[test]
    fn pool_stays_within_breakwater_bounds() {
        let mut p = ctl(&Config { initial_pool: Some(5), ..Config::default() });
        for _ in 0..50 {
            iteration(&mut p, 100, 100, 0);
        }
        assert_eq!(p.pool(), 4, "floor: max_cores");
    }

    #[test]
    fn artifact_variant_needs_all_credits_out_to_grow() {
        let c = Config { variant: Variant::Artifact, ..Config::default() };
        let mut p = ctl(&c);
        assert_eq!(p.timer_interval(), None);
        // No credits out: every check after 200 µs decreases by one.
        p.on_response(200_000, 0, false, 0);
        assert_eq!(p.pool(), 41, "in_cnt == 0 → increase");
        p.on_response(300_001, 0, false, 0); // the first check after the settling time resets the counts
        p.on_request(350_000, 0, 0, 0);
        p.on_response(400_001, 0, false, 0);
        assert_eq!(p.pool(), 40, "credits not exhausted → decrease");
    }

    #[test]
    fn bad_parameters_name_their_field() {
        let e = |f: fn(&mut Config)| {
            let mut c = Config::default();
            f(&mut c);
            c.validate("policy.overload").unwrap_err().field
        };
        assert_eq!(e(|c| c.efficiency_threshold = 1.5), "policy.overload.efficiency_threshold");
        assert_eq!(e(|c| c.decrease = 1.0), "policy.overload.decrease");
        assert_eq!(e(|c| c.artifact_settle_us = 300.0), "policy.overload.artifact_settle_us");
        assert_eq!(e(|c| c.initial_pool = Some(0)), "policy.overload.initial_pool");
        assert!(Config::default().validate("p").is_ok());
    }
}

impl super::OverloadConfig for Config {
    fn validate(&self, field: &str) -> Result<(), crate::error::ScenarioError> {
        Config::validate(self, field)
    }
    fn build(&self, env: &crate::env::OverloadEnv) -> Option<Box<dyn super::CreditController>> {
        Some(Config::build(self, env.sessions, env.max_cores, env.rtt_ns))
    }
}
