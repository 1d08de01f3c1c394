//! CoreSync (Pardeshi, Stuhr and Saeed, ICNP'25): joint core parking and overload control.
//!
//! CoreSync is a reactive core allocator whose *parking* rule reads the credit state of the RPC
//! layer (the paper's §III-D interface, [`CreditLink`]: C_total writable; C_issued, N_sess and
//! drained sessions read-only) to keep the credits issued to clients partially proportional to
//! the cores allocated.
//!
//! **Allocation side.** Delegated to a [`CaladanAllocator`]: every interval, grant one core when
//! the max queueing delay reaches the threshold or a parked core holds work, skipping the interval
//! after a grant (the waking skip). The paper calls its base policy "Shenango-style" but describes
//! a delay threshold (5 µs, interval 5 µs), and its artifact runs Caladan's IOKernel with
//! `runtime_qdelay_us 5`: that congestion rule, not Shenango's standing-queue test, is what runs
//! here. (The artifact's IOKernel is `ias`, which tests congestion before the waking skip; we use
//! the `simple` ordering of [`CaladanAllocator`]: with one LC application and no BE controllers
//! the two differ only in whether an uncongested interval spends the skip.)
//!
//! **Parking side** (Algorithm 1, as the artifact's `replace/sched.c` implements it). A core that
//! found no work for the poll period (2 µs) asks [`CoreAllocator::on_park_attempt`]:
//!
//! 1. some session is drained (holds zero credits): the server is persistently overloaded, keep
//!    polling;
//! 2. `violated = (C_issued − N_sess) > R · N_cores  and  C_total > C_issued`, with N_cores the
//!    active cores, the caller included (each session keeps about one credit as a baseline, so
//!    only credits above one per session count toward the R-per-core budget);
//! 3. a core that already subtracted its share keeps polling while `violated`, then parks;
//! 4. only one core at a time may be mid-park (the artifact's global atomic flag: here a field,
//!    since the driver holds one allocator for all cores); any other core keeps polling;
//! 5. if `violated`, the core takes the flag, subtracts `C_sub = (C_issued − N_sess) / N_cores`
//!    (integer division) from C_total and keeps polling until Breakwater has revoked enough issued
//!    credits; otherwise it parks at once.
//!
//! The withheld C_sub goes back to the pool when the core finds work mid-attempt or wakes up
//! after parking ([`CoreAllocator::on_park_abort`]).
//!
//! **The drained-session quirk** (reference notes §3.5). In the artifact, a core that has already
//! subtracted C_sub and then sees a drained session zeroes C_sub without returning it, and keeps
//! the flag: the pool loses C_sub for good (only Breakwater's additive increase regrows it). We
//! handle it deliberately: by default (`keep_quirk = false`) the drained veto *cancels* the
//! attempt: C_sub goes back to the pool, the flag is released, and the next attempt starts
//! afresh. `keep_quirk = true` reproduces the artifact: C_sub is dropped, the core keeps the flag
//! and its "started" state, and later parks (or finds work) with nothing to return.
//!
//! **R.** A fixed `r` (50 for the synthetic workloads, 20 for Memcached), or, with
//! `r_per_session = Some(k)`, `R = k · N_sess` read from the credit link at each attempt (it then
//! replaces `r`). The paper's §IV-D scales R linearly with the sessions (R = 50, 500, 5 000 for
//! 100, 1 000, 10 000 sessions, i.e. k = 0.5; the artifact's sweep uses R = N_conns/10 · {1, 2, 5,
//! 10}, i.e. k ∈ {0.1, 0.2, 0.5, 1}).
//!
//! **Without credits** (overload controller "none": the driver passes `credits = None`) there is
//! nothing to gate on, and CoreSync degenerates to its allocation side with Caladan's park rule:
//! park after the poll period.
//!
//! Requests to park by the allocator (yields) never happen: the allocation side never revokes, so
//! the question of whether a requested park should pass through the CoreSync block (§3.3) does
//! not arise.

use super::caladan::WakingSkip;
use super::{AllocAction, AllocView, CaladanAllocator, CoreAllocator, CoreId, ParkRule, ParkVerdict};
use crate::overload::CreditLink;
use crate::summary::ParkGate;
use crate::time::Nanos;

/// How R is set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RRule {
    /// A fixed R.
    Fixed(f64),
    /// R = k · N_sess (connected sessions, as the credit link reports them at each attempt).
    PerSession(f64),
}

impl RRule {
    fn value(self, sessions: u32) -> f64 {
        match self {
            RRule::Fixed(r) => r,
            RRule::PerSession(k) => k * f64::from(sessions),
        }
    }
}

#[derive(Debug, Clone)]
pub struct CoreSyncAllocator {
    base: CaladanAllocator,
    r: RRule,
    keep_quirk: bool,
    keep_cut: bool,
    /// The core holding the "a core is mid-park" flag: it has subtracted its C_sub and waits for
    /// the issued credits to come down (the artifact's `started`, which holds exactly while the
    /// flag is taken by that core).
    parker: Option<CoreId>,
    /// C_sub withheld from the pool, per core: by the parker, and by parked cores that went
    /// through a violated attempt. Returned by `on_park_abort`.
    withheld: Vec<i64>,
    gate: ParkGate,
}

impl CoreSyncAllocator {
    /// `interval`, `threshold`, `poll`: the allocation side (Caladan's delay rule) and the poll
    /// period before a park attempt; `r`: the proportionality parameter; `keep_quirk`: reproduce
    /// the artifact's loss of C_sub when a session drains mid-attempt (see the module docs).
    pub fn new(interval: Nanos, threshold: Nanos, poll: Nanos, r: RRule, keep_quirk: bool, max_cores: u32) -> Self {
        Self {
            base: CaladanAllocator::new(interval, threshold, poll),
            r,
            keep_quirk,
            keep_cut: false,
            parker: None,
            withheld: vec![0; max_cores as usize],
            gate: ParkGate::default(),
        }
    }

    /// The core currently mid-park (holding the one-parker flag), if any.
    pub fn parker(&self) -> Option<CoreId> {
        self.parker
    }

    /// Credits currently withheld from the pool, over all cores.
    pub fn withheld_total(&self) -> i64 {
        self.withheld.iter().sum()
    }

    fn slot(&mut self, core: CoreId) -> &mut i64 {
        let i = core as usize;
        if i >= self.withheld.len() {
            self.withheld.resize(i + 1, 0);
        }
        &mut self.withheld[i]
    }

    /// Gives core `core`'s withheld credits back to the pool.
    fn give_back(&mut self, core: CoreId, link: &mut dyn CreditLink) {
        let c = std::mem::take(self.slot(core));
        if c != 0 {
            link.set_pool(link.pool() + c);
        }
    }
}

impl CoreAllocator for CoreSyncAllocator {
    fn interval(&self) -> Option<Nanos> {
        self.base.interval()
    }

    fn tick(&mut self, obs: &dyn AllocView) -> AllocAction {
        self.base.tick(obs)
    }

    /// Caladan's: after polling and stealing for the poll period without work.
    fn park_rule(&self) -> ParkRule {
        self.base.park_rule()
    }

    fn on_park_attempt(
        &mut self,
        _now: Nanos,
        core: CoreId,
        active: usize,
        credits: Option<&mut dyn CreditLink>,
    ) -> ParkVerdict {
        let started = self.parker == Some(core);
        let Some(link) = credits else {
            // No credit controller: plain Caladan parking. (A driver that switches from passing
            // the link to not passing it mid-attempt loses the gate, not the credits: they stay
            // withheld until `on_park_abort` is called with the link.)
            if started {
                self.parker = None;
            }
            self.gate.parked_without_credits += 1;
            return ParkVerdict::Park;
        };
        if !started && *self.slot(core) != 0 {
            // A fresh attempt by a core that still holds credits from an earlier one: the driver
            // did not report its wake-up. Conserve the credits rather than overwrite them.
            self.give_back(core, link);
        }

        // (1) Drained sessions veto parking.
        if link.drained() > 0 {
            if started {
                if self.keep_quirk {
                    // Artifact: `C_sub = 0` — the credits are lost, the flag and "started" stay.
                    *self.slot(core) = 0;
                } else {
                    // Fix: cancel the attempt and give the credits back.
                    self.give_back(core, link);
                    self.parker = None;
                }
            }
            self.gate.vetoed_drained += 1;
            return ParkVerdict::KeepPolling;
        }

        // (2) Partial proportionality.
        let (pool, issued, sessions) = (link.pool(), link.issued(), link.sessions());
        let k = active.max(1) as i64;
        let excess = issued - i64::from(sessions);
        let violated = excess as f64 > self.r.value(sessions) * k as f64 && pool > issued;

        // (3) Already subtracted: wait for the issued credits to come down, then park with C_sub
        // still withheld (it comes back on wake-up).
        if started {
            if violated {
                self.gate.waited_for_revocation += 1;
                return ParkVerdict::KeepPolling;
            }
            self.parker = None;
            self.gate.parked_after_cut += 1;
            return ParkVerdict::Park;
        }

        // (4) One parker at a time.
        if self.parker.is_some() {
            self.gate.waited_for_parker += 1;
            return ParkVerdict::KeepPolling;
        }

        // (5) Subtract this core's share and wait, or park at once.
        if violated {
            let c_sub = excess / k;
            link.set_pool(pool - c_sub);
            *self.slot(core) = c_sub;
            self.parker = Some(core);
            self.gate.cuts += 1;
            self.gate.credits_cut += c_sub.max(0) as u64;
            ParkVerdict::KeepPolling
        } else {
            self.gate.parked_at_once += 1;
            ParkVerdict::Park
        }
    }

    fn on_park_abort(&mut self, _now: Nanos, core: CoreId, credits: Option<&mut dyn CreditLink>) {
        if self.parker == Some(core) {
            self.parker = None;
        } else if self.keep_cut {
            // Woken after a park: the cut stays.
            *self.slot(core) = 0;
        }
        if let Some(link) = credits {
            self.give_back(core, link);
        }
    }

    /// The allocation side's: max queueing delay at the last tick, in nanoseconds.
    fn signal(&self) -> Option<f64> {
        self.base.signal()
    }

    fn park_gate(&self) -> Option<ParkGate> {
        Some(self.gate)
    }

    fn name(&self) -> &'static str {
        "coresync"
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration: the `[policy.allocator]` table of `kind = "coresync"`.

/// CoreSync (ICNP'25): Caladan's delay rule for adding cores; parking gated on the credit
/// state (Algorithm 1): no park while a session is drained, one parker at a time, and when
/// `C_issued − N_sess > R · N_cores` withhold `(C_issued − N_sess) / N_cores` credits from
/// the pool until issued credits come down. Without an overload controller it parks like
/// Caladan.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Period of the congestion check (Caladan's IOKernel poll).
    pub interval_us: f64,
    /// Max queueing delay at or above which one core is added.
    pub delay_threshold_us: f64,
    /// Time an idle core polls without finding work before it attempts to park.
    pub poll_us: f64,
    /// Proportionality parameter R (paper: 50 synthetic, 20 Memcached).
    pub r: f64,
    /// When set, R = r_per_session × connected sessions, replacing `r` (paper §IV-D: 0.5).
    pub r_per_session: Option<f64>,
    /// Reproduce the artifact's loss of the withheld credits when a session drains
    /// mid-attempt (default: give them back and cancel the attempt).
    pub keep_quirk: bool,
    /// The allocation side's IOKernel ordering of the post-wake skip (`simple` or `ias`; the
    /// artifact ran CoreSync on `ias`).
    pub waking_skip: WakingSkip,
    /// Keep the cut: a core that parked with C_sub withheld does not give it back when it wakes
    /// (the pre-publication variant, issue 12's "keep-the-cut" testbed condition). The pool then
    /// shrinks by C_sub at every such park and only Breakwater's additive increase regrows it.
    /// Default: give it back, as the published `replace/sched.c` does.
    pub keep_cut: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            interval_us: 5.0,
            delay_threshold_us: 5.0,
            poll_us: 2.0,
            r: 50.0,
            r_per_session: None,
            keep_quirk: false,
            waking_skip: WakingSkip::Simple,
            keep_cut: false,
        }
    }
}

impl super::AllocatorConfig for Config {
    /// Checks the parameters; `field` is the table's dotted path.
    fn validate(&self, field: &str) -> Result<(), crate::error::ScenarioError> {
        use super::common::{check_non_negative_us, check_positive_us};
        let f = |key: &str| format!("{field}.{key}");
        check_positive_us(f("interval_us"), self.interval_us)?;
        check_positive_us(f("delay_threshold_us"), self.delay_threshold_us)?;
        check_non_negative_us(f("poll_us"), self.poll_us)?;
        let factor = |key: &str, v: f64, what: &str| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(crate::error::ScenarioError::new(f(key), format!("{v} is not allowed: {what}")))
            }
        };
        factor("r", self.r, "the proportionality parameter R must be a finite number > 0 (paper: 50; 20 for Memcached)")?;
        match self.r_per_session {
            Some(k) => factor(
                "r_per_session",
                k,
                "R per session must be a finite number > 0 (R = r_per_session × sessions; paper §IV-D: 0.5)",
            ),
            None => Ok(()),
        }
    }

    /// The allocator; the configuration must have passed [`Config::validate`].
    fn build(&self, env: &crate::env::AllocEnv) -> Box<dyn CoreAllocator> {
        let max_cores = env.max_cores;
        use crate::time::us;
        let r = self.r_per_session.map_or(RRule::Fixed(self.r), RRule::PerSession);
        let mut a = CoreSyncAllocator::new(
            us(self.interval_us),
            us(self.delay_threshold_us),
            us(self.poll_us),
            r,
            self.keep_quirk,
            max_cores,
        );
        a.base = a.base.with_waking_skip(self.waking_skip);
        a.keep_cut = self.keep_cut;
        Box::new(a)
    }
}

#[cfg(test)]
mod tests {
    use super::super::common::test_util::*;
    use super::super::{build, validate, CoreObs, ParkMode, SliceView};
    use super::*;
    use crate::scenario::AllocatorCfg;

    /// The RPC layer's state, set by hand.
    #[derive(Debug, Clone, Copy)]
    struct Link {
        pool: i64,
        issued: i64,
        sessions: u32,
        drained: u32,
    }

    impl CreditLink for Link {
        fn pool(&self) -> i64 {
            self.pool
        }
        fn set_pool(&mut self, credits: i64) {
            self.pool = credits;
        }
        fn issued(&self) -> i64 {
            self.issued
        }
        fn sessions(&self) -> u32 {
            self.sessions
        }
        fn drained(&self) -> u32 {
            self.drained
        }
    }

    const P: ParkVerdict = ParkVerdict::Park;
    const K: ParkVerdict = ParkVerdict::KeepPolling;

    fn cs(r: f64, keep_quirk: bool) -> CoreSyncAllocator {
        CoreSyncAllocator::new(5_000, 5_000, 2_000, RRule::Fixed(r), keep_quirk, 4)
    }

    fn attempt(a: &mut CoreSyncAllocator, core: CoreId, active: usize, l: &mut Link) -> ParkVerdict {
        a.on_park_attempt(0, core, active, Some(l))
    }

    /// 100 sessions; with 4 active cores and R = 50 the bound is issued − 100 > 200.
    fn link(pool: i64, issued: i64) -> Link {
        Link { pool, issued, sessions: 100, drained: 0 }
    }

    #[test]
    fn parks_at_once_within_the_bound() {
        let mut a = cs(50.0, false);
        // Exactly at the bound (300 − 100 = 200 = 50 · 4): not violated (strict >).
        let mut l = link(400, 300);
        assert_eq!(attempt(&mut a, 0, 4, &mut l), P);
        assert_eq!((l.pool, a.parker(), a.withheld_total()), (400, None, 0));
        // Over the bound but the pool is not above the issued credits: Breakwater is already
        // revoking, nothing to subtract.
        let mut l = link(350, 350);
        assert_eq!(attempt(&mut a, 1, 4, &mut l), P);
        assert_eq!(l.pool, 350);
    }

    #[test]
    fn never_parks_while_a_session_is_drained() {
        for quirk in [false, true] {
            let mut a = cs(50.0, quirk);
            let mut l = Link { drained: 1, ..link(400, 120) };
            for core in 0..4 {
                for _ in 0..3 {
                    assert_eq!(attempt(&mut a, core, 4, &mut l), K);
                }
            }
            assert_eq!((l.pool, a.parker()), (400, None), "the veto comes before any subtraction");
            l.drained = 0;
            assert_eq!(attempt(&mut a, 2, 4, &mut l), P);
        }
    }

    #[test]
    fn the_park_gate_counts_every_attempt_once_by_its_reason() {
        let mut a = cs(50.0, false);
        // A drained session: vetoed twice.
        let mut l = Link { drained: 1, ..link(1_000, 500) };
        attempt(&mut a, 0, 4, &mut l);
        attempt(&mut a, 1, 4, &mut l);
        // Violated: core 0 cuts C_sub = (500 − 100) / 4 = 100, core 1 waits for it, core 0
        // waits for the revocation, then parks once issued came down; core 2 parks at once.
        l.drained = 0;
        assert_eq!(attempt(&mut a, 0, 4, &mut l), K);
        assert_eq!(attempt(&mut a, 1, 4, &mut l), K);
        assert_eq!(attempt(&mut a, 0, 4, &mut l), K);
        l.issued = 150;
        assert_eq!(attempt(&mut a, 0, 4, &mut l), P);
        assert_eq!(attempt(&mut a, 2, 3, &mut l), P);
        // No credit controller: Caladan's park.
        assert_eq!(a.on_park_attempt(0, 3, 2, None), P);
        let g = a.park_gate().unwrap();
        assert_eq!(
            (g.vetoed_drained, g.cuts, g.credits_cut, g.waited_for_parker, g.waited_for_revocation),
            (2, 1, 100, 1, 1)
        );
        assert_eq!((g.parked_after_cut, g.parked_at_once, g.parked_without_credits), (1, 1, 1));
    }

    #[test]
    fn keep_cut_keeps_c_sub_after_a_park_but_not_after_finding_work() {
        for keep_cut in [false, true] {
            let mut a = cs(50.0, false);
            a.keep_cut = keep_cut;
            // 500 issued, 4 cores: C_sub = 100 withheld, then issued comes down and it parks.
            let mut l = link(1_000, 500);
            assert_eq!(attempt(&mut a, 0, 4, &mut l), K);
            assert_eq!(l.pool, 900);
            l.issued = 250;
            assert_eq!(attempt(&mut a, 0, 4, &mut l), P);
            a.on_park_abort(0, 0, Some(&mut l));
            assert_eq!(l.pool, if keep_cut { 900 } else { 1_000 }, "keep_cut = {keep_cut}");
            assert_eq!(a.withheld_total(), 0);
            // Mid-attempt (work found before parking) the cut always comes back.
            let mut l = link(1_000, 500);
            assert_eq!(attempt(&mut a, 1, 4, &mut l), K);
            a.on_park_abort(0, 1, Some(&mut l));
            assert_eq!(l.pool, 1_000);
        }
    }

    #[test]
    fn violation_subtracts_c_sub_and_parks_once_issued_came_down() {
        let mut a = cs(50.0, false);
        // 500 issued, 100 sessions, 4 cores: 400 > 200, C_sub = 400 / 4 = 100.
        let mut l = link(600, 500);
        assert_eq!(attempt(&mut a, 1, 4, &mut l), K);
        assert_eq!((l.pool, a.parker(), a.withheld_total()), (500, Some(1), 100));
        // Still violated: keep polling, no second subtraction.
        l.issued = 450;
        assert_eq!(attempt(&mut a, 1, 4, &mut l), K);
        assert_eq!(l.pool, 500);
        // Issued came down to the bound: park, still withholding C_sub, flag released.
        l.issued = 300;
        assert_eq!(attempt(&mut a, 1, 4, &mut l), P);
        assert_eq!((l.pool, a.parker(), a.withheld_total()), (500, None, 100));
        // Breakwater moved the pool meanwhile; the wake-up adds C_sub back on top.
        l.pool = 480;
        a.on_park_abort(0, 1, Some(&mut l));
        assert_eq!((l.pool, a.withheld_total()), (580, 0));
        // A second abort gives nothing more.
        a.on_park_abort(0, 1, Some(&mut l));
        assert_eq!(l.pool, 580);
    }

    #[test]
    fn c_sub_returned_when_work_is_found_mid_attempt() {
        let mut a = cs(50.0, false);
        let mut l = link(600, 500);
        assert_eq!(attempt(&mut a, 3, 4, &mut l), K);
        assert_eq!(l.pool, 500);
        a.on_park_abort(0, 3, Some(&mut l));
        assert_eq!((l.pool, a.parker(), a.withheld_total()), (600, None, 0));
        // The flag is free again: another core can start its own attempt.
        assert_eq!(attempt(&mut a, 0, 4, &mut l), K);
        assert_eq!(a.parker(), Some(0));
        // An abort by a core that holds nothing changes nothing.
        a.on_park_abort(0, 2, Some(&mut l));
        assert_eq!((l.pool, a.parker()), (500, Some(0)));
    }

    #[test]
    fn only_one_core_parks_at_a_time() {
        let mut a = cs(50.0, false);
        let mut l = link(600, 500);
        assert_eq!(attempt(&mut a, 0, 4, &mut l), K);
        // Others keep polling while core 0 is mid-park, even when the bound holds for them.
        for core in 1..4 {
            assert_eq!(attempt(&mut a, core, 4, &mut l), K);
        }
        l.issued = 250;
        assert_eq!(attempt(&mut a, 2, 4, &mut l), K, "core 0 still holds the flag");
        assert_eq!(l.pool, 500, "no second subtraction");
        assert_eq!(attempt(&mut a, 0, 4, &mut l), P);
        assert_eq!(a.parker(), None);
        // Now core 2 may go (3 active: bound 150, excess 150: not violated).
        assert_eq!(attempt(&mut a, 2, 3, &mut l), P);
    }

    #[test]
    fn bound_scales_with_active_cores() {
        // excess 150: violated with 2 cores (R·K = 100), not with 4 (200).
        let mut a = cs(50.0, false);
        let mut l = link(400, 250);
        assert_eq!(attempt(&mut a, 0, 4, &mut l), P);
        assert_eq!(attempt(&mut a, 1, 2, &mut l), K);
        // C_sub = 150 / 2 = 75.
        assert_eq!(l.pool, 325);
        // The last core is subject to the same rule (K = 1).
        let mut a = cs(50.0, false);
        let mut l = link(400, 160);
        assert_eq!(attempt(&mut a, 0, 1, &mut l), K);
        assert_eq!(l.pool, 340);
    }

    #[test]
    fn drained_mid_attempt_returns_c_sub_by_default() {
        let mut a = cs(50.0, false);
        let mut l = link(600, 500);
        assert_eq!(attempt(&mut a, 1, 4, &mut l), K);
        assert_eq!(l.pool, 500);
        l.drained = 2;
        assert_eq!(attempt(&mut a, 1, 4, &mut l), K);
        // Credits back, attempt cancelled.
        assert_eq!((l.pool, a.parker(), a.withheld_total()), (600, None, 0));
        // Drained sessions gone, still violated: a fresh attempt subtracts again.
        l.drained = 0;
        assert_eq!(attempt(&mut a, 2, 4, &mut l), K);
        assert_eq!((l.pool, a.parker()), (500, Some(2)));
    }

    #[test]
    fn keep_quirk_loses_c_sub_and_keeps_the_flag() {
        let mut a = cs(50.0, true);
        let mut l = link(600, 500);
        assert_eq!(attempt(&mut a, 1, 4, &mut l), K);
        assert_eq!(l.pool, 500);
        l.drained = 2;
        assert_eq!(attempt(&mut a, 1, 4, &mut l), K);
        // C_sub forgotten: the pool stays cut, core 1 still "started" and holding the flag.
        assert_eq!((l.pool, a.parker(), a.withheld_total()), (500, Some(1), 0));
        l.drained = 0;
        assert_eq!(attempt(&mut a, 2, 4, &mut l), K, "core 1 still holds the flag");
        l.issued = 450;
        assert_eq!(attempt(&mut a, 1, 4, &mut l), K, "still violated, waits without subtracting");
        assert_eq!(l.pool, 500);
        l.issued = 300;
        assert_eq!(attempt(&mut a, 1, 4, &mut l), P);
        a.on_park_abort(0, 1, Some(&mut l));
        assert_eq!(l.pool, 500, "nothing to give back on wake-up: 100 credits lost");
        // Without the drained episode the quirk flag changes nothing.
        let mut a = cs(50.0, true);
        let mut l = link(600, 500);
        assert_eq!(attempt(&mut a, 1, 4, &mut l), K);
        a.on_park_abort(0, 1, Some(&mut l));
        assert_eq!(l.pool, 600);
    }

    #[test]
    fn r_per_session_scales_the_bound() {
        // k = 0.5 with 100 sessions: R = 50, as the fixed default.
        let mut a = CoreSyncAllocator::new(5_000, 5_000, 2_000, RRule::PerSession(0.5), false, 4);
        let mut l = link(400, 300);
        assert_eq!(attempt(&mut a, 0, 4, &mut l), P);
        let mut l = link(600, 301);
        assert_eq!(attempt(&mut a, 0, 4, &mut l), K);
        a.on_park_abort(0, 0, Some(&mut l));
        // 1 000 sessions: R = 500; 1 000 + 4·500 issued is within the bound.
        let mut l = Link { pool: 4_000, issued: 3_000, sessions: 1_000, drained: 0 };
        assert_eq!(attempt(&mut a, 0, 4, &mut l), P);
        l.issued = 3_001;
        assert_eq!(attempt(&mut a, 0, 4, &mut l), K);
        assert_eq!(l.pool, 4_000 - 2_001 / 4);
    }

    #[test]
    fn without_credits_it_parks_like_caladan() {
        let mut a = cs(50.0, false);
        for core in 0..4 {
            assert_eq!(a.on_park_attempt(0, core, 4, None), P);
        }
        a.on_park_abort(0, 0, None);
        assert_eq!(a.park_rule(), ParkRule { mode: ParkMode::AfterPoll, min_poll_ns: 2_000, min_passes: 0 });
    }

    #[test]
    fn stale_withheld_credits_are_returned_on_a_fresh_attempt() {
        let mut a = cs(50.0, false);
        let mut l = link(600, 500);
        assert_eq!(attempt(&mut a, 1, 4, &mut l), K);
        l.issued = 300;
        assert_eq!(attempt(&mut a, 1, 4, &mut l), P);
        assert_eq!(l.pool, 500);
        // The driver forgot the wake-up; the next attempt of core 1 conserves the credits.
        assert_eq!(attempt(&mut a, 1, 4, &mut l), P);
        assert_eq!((l.pool, a.withheld_total()), (600, 0));
    }

    fn tick(a: &mut CoreSyncAllocator, now: Nanos, cores: &[CoreObs]) -> AllocAction {
        // The allocation side only reads the present: no previous tick to carry.
        a.tick(&SliceView { now, cores, prev: cores })
    }

    #[test]
    fn allocation_side_grants_on_delay_with_the_waking_skip() {
        let mut a = cs(50.0, false);
        assert_eq!(a.interval(), Some(5_000));
        assert_eq!(a.signal(), None);
        assert_eq!(tick(&mut a, 10_000, &[queued(active(), 2, 5_001), parked()]), AllocAction::Nothing);
        assert_eq!(a.signal(), Some(4_999.0));
        let congested = |now: Nanos| [queued(active(), 3, now - 5_000), parked(), parked()];
        assert_eq!(tick(&mut a, 15_000, &congested(15_000)), AllocAction::Grant);
        assert_eq!(tick(&mut a, 20_000, &congested(20_000)), AllocAction::Nothing, "waking skip");
        assert_eq!(tick(&mut a, 25_000, &congested(25_000)), AllocAction::Grant);
        // A parked core with work is congestion; nothing to grant without a parked core.
        let mut a = cs(50.0, false);
        assert_eq!(tick(&mut a, 5_000, &[active(), queued(parked(), 1, 4_900)]), AllocAction::Grant);
        let mut a = cs(50.0, false);
        assert_eq!(tick(&mut a, 50_000, &[queued(active(), 9, 0), active()]), AllocAction::Nothing);
    }

    fn cfg(j: serde_json::Value) -> AllocatorCfg {
        serde_json::from_value(j).unwrap()
    }

    #[test]
    fn config_defaults_build_and_validate() {
        let c = cfg(serde_json::json!({ "kind": "coresync" }));
        match c {
            AllocatorCfg::CoreSync(Config { interval_us, delay_threshold_us, poll_us, r, r_per_session, keep_quirk, waking_skip, keep_cut }) => {
                assert_eq!((waking_skip, keep_cut), (WakingSkip::Simple, false));
                assert_eq!((interval_us, delay_threshold_us, poll_us, r), (5.0, 5.0, 2.0, 50.0));
                assert_eq!((r_per_session, keep_quirk), (None, false));
            }
            ref other => panic!("{other:?}"),
        }
        validate(&c, "policy.allocator").unwrap();
        let a = build(&c, &crate::env::AllocEnv::unseeded(16)).unwrap();
        assert_eq!((a.name(), a.interval(), a.park_rule().min_poll_ns), ("coresync", Some(5_000), 2_000));
        // Unknown fields are rejected.
        assert!(serde_json::from_value::<AllocatorCfg>(serde_json::json!({ "kind": "coresync", "R": 5 })).is_err());
        // The per-session form builds and gates on the sessions it sees.
        let c = cfg(serde_json::json!({ "kind": "coresync", "r_per_session": 0.5, "keep_quirk": true }));
        validate(&c, "p").unwrap();
        let mut a = build(&c, &crate::env::AllocEnv::unseeded(4)).unwrap();
        let mut l = link(600, 301);
        assert_eq!(a.on_park_attempt(0, 0, 4, Some(&mut l)), K);
        assert_eq!(l.pool, 550);
    }

    #[test]
    fn bad_parameters_name_their_field() {
        let base = serde_json::json!({ "kind": "coresync" });
        let cases: [(&str, serde_json::Value, &str); 10] = [
            ("interval_us", 0.0.into(), "interval_us"),
            ("interval_us", (-5.0).into(), "interval_us"),
            ("delay_threshold_us", 0.0.into(), "delay_threshold_us"),
            ("poll_us", (-1.0).into(), "poll_us"),
            ("poll_us", 2e6.into(), "poll_us"),
            ("r", 0.0.into(), "r"),
            ("r", (-50.0).into(), "r"),
            ("r", 1e300.into(), "ok"),
            ("r_per_session", 0.0.into(), "r_per_session"),
            ("r_per_session", (-0.5).into(), "r_per_session"),
        ];
        for (key, v, field) in cases {
            let mut j = base.clone();
            j[key] = v.clone();
            let res = validate(&cfg(j), "policy.allocator");
            if field == "ok" {
                assert!(res.is_ok(), "{key} = {v}");
                continue;
            }
            let e = res.unwrap_err();
            assert_eq!(e.field, format!("policy.allocator.{field}"), "{key} = {v}: {e}");
            assert!(e.message.contains("not allowed"), "{e}");
        }
        // Non-finite values cannot come from JSON/TOML literals easily; check them directly.
        let nan = AllocatorCfg::CoreSync(Config {
            interval_us: 5.0,
            delay_threshold_us: 5.0,
            poll_us: 2.0,
            r: f64::NAN,
            r_per_session: None,
            keep_quirk: false,
            ..Default::default()
        });
        assert_eq!(validate(&nan, "a").unwrap_err().field, "a.r");
        let inf = AllocatorCfg::CoreSync(Config {
            interval_us: 5.0,
            delay_threshold_us: 5.0,
            poll_us: 2.0,
            r: 50.0,
            r_per_session: Some(f64::INFINITY),
            keep_quirk: false,
            ..Default::default()
        });
        assert_eq!(validate(&inf, "a").unwrap_err().field, "a.r_per_session");
        // Poll 0 is allowed (park right after a failed pass, then the CoreSync gate).
        let mut j = base.clone();
        j["poll_us"] = 0.0.into();
        validate(&cfg(j), "a").unwrap();
    }
}
