//! Lock-level load shedding: Protego's Active Synchronization Queue Management (ASQM) and the
//! `try_lock` baseline, as a decision the drivers consult at each lock step of a request's
//! program (`[server.lock_control]`; absent: plain blocking mutexes).
//!
//! * **asqm** (`mutex_lock_if_uncongested`, see `shared/reference/overload-control-and-core-allocation.md`
//!   §2.4): a request is dropped, without waiting, when its accumulated queueing delay plus the
//!   mutex's current queueing delay (its oldest waiter's age) exceeds the delay budget (`>`, as
//!   the artifact compares TSC values). The oldest waiter's age is a lower bound on what the
//!   request would wait, so a request that joins a queue is predicted to fit its budget.
//! * **try_lock**: dropped whenever the mutex is held, whatever the delays.
//!
//! The accumulated delay is the request's runqueue and lock waits. With [`Seed::Signal`] (the
//! artifact's `set_acc_qdel(runtime_queue_us())` at worker start) the waits before the request
//! first runs are replaced by the server's congestion signal at that moment (max over cores of
//! the oldest queued request's age): the artifact cannot measure the wait of a request whose
//! thread did not exist yet. [`Seed::Measured`] counts the request's own waits from its arrival.
//!
//! A dropped request spends `drop_cost_ns` of CPU producing its failure reply, which leaves at
//! once; if it had already taken `cleanup_lock` (a Memcached SET that allocated its item under
//! the slab lock), its thread then re-takes that lock, without any drop check (memory must not
//! leak), and holds it `cleanup_ns`, after the reply has gone.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::scenario::non_negative;
use crate::time::us;
use crate::{Nanos, ScenarioError};

/// What a lock step does when its lock is congested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Protego's `lock_if_uncongested`: drop when accumulated delay + lock queue delay > budget.
    Asqm,
    /// Drop whenever the lock is held.
    TryLock,
}

/// How a request's accumulated queueing delay starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Seed {
    /// The server's congestion signal when the request first runs (the artifact).
    #[default]
    Signal,
    /// The request's own waits from its arrival.
    Measured,
}

/// `[server.lock_control]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub mode: Mode,
    /// Queueing-delay budget of a request. Absent: derived as the paper does,
    /// `target_us − network_p99_us − service_p99_us`.
    pub budget_us: Option<f64>,
    /// Per-server target delay, for the derived budget (the paper: SLO / attempts).
    pub target_us: Option<f64>,
    /// 99th percentile one-way-and-back network latency, for the derived budget (paper: 20 µs).
    pub network_p99_us: f64,
    /// 99th percentile service time, for the derived budget.
    pub service_p99_us: Option<f64>,
    pub seed: Seed,
    /// CPU time of a drop: unwinding the request and producing its failure reply.
    pub drop_cost_ns: f64,
    /// A lock a dropped request re-takes (never dropped) if it had already taken it.
    pub cleanup_lock: Option<String>,
    /// Time the cleanup holds `cleanup_lock`.
    pub cleanup_ns: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            mode: Mode::Asqm,
            budget_us: None,
            target_us: None,
            network_p99_us: 20.0,
            service_p99_us: None,
            seed: Seed::Signal,
            drop_cost_ns: 0.0,
            cleanup_lock: None,
            cleanup_ns: 0.0,
        }
    }
}

impl Config {
    /// The budget in µs: given, or derived.
    pub fn budget(&self) -> Option<f64> {
        self.budget_us.or_else(|| Some(self.target_us? - self.network_p99_us - self.service_p99_us?))
    }

    /// Checks the table; `field` is its dotted path, `locks` the workload's lock names.
    pub fn validate(&self, field: &str, locks: &[&str]) -> Result<(), ScenarioError> {
        non_negative(&format!("{field}.network_p99_us"), self.network_p99_us)?;
        non_negative(&format!("{field}.drop_cost_ns"), self.drop_cost_ns)?;
        non_negative(&format!("{field}.cleanup_ns"), self.cleanup_ns)?;
        for (k, v) in [("budget_us", self.budget_us), ("target_us", self.target_us), ("service_p99_us", self.service_p99_us)] {
            if let Some(v) = v {
                non_negative(&format!("{field}.{k}"), v)?;
            }
        }
        if self.mode == Mode::Asqm {
            match self.budget() {
                None => {
                    return Err(ScenarioError::new(
                        format!("{field}.budget_us"),
                        "asqm needs a budget: give budget_us, or target_us and service_p99_us to derive it",
                    ))
                }
                Some(b) if b < 0.0 => {
                    return Err(ScenarioError::new(
                        format!("{field}.target_us"),
                        format!("the derived budget target_us − network_p99_us − service_p99_us is {b} µs: it must be >= 0"),
                    ))
                }
                _ => {}
            }
        }
        if let Some(l) = &self.cleanup_lock {
            if !locks.contains(&l.as_str()) {
                return Err(ScenarioError::new(
                    format!("{field}.cleanup_lock"),
                    format!("no lock `{l}` in workload.locks (declared: {})", if locks.is_empty() { "none".into() } else { locks.join(", ") }),
                ));
            }
        }
        Ok(())
    }

    /// The decision rule; `cfg` must have passed [`Config::validate`].
    pub fn build(&self) -> LockControl {
        LockControl {
            mode: self.mode,
            budget_ns: self.budget().map_or(Nanos::MAX, us),
            seed: self.seed,
            drop_cost_ns: self.drop_cost_ns.round() as Nanos,
            cleanup_ns: self.cleanup_ns.round() as Nanos,
        }
    }
}

/// The compiled rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockControl {
    pub mode: Mode,
    pub budget_ns: Nanos,
    pub seed: Seed,
    pub drop_cost_ns: Nanos,
    pub cleanup_ns: Nanos,
}

impl LockControl {
    /// Whether a request that has accumulated `acc_ns` of queueing delay is dropped at a lock
    /// that is `held` with its oldest waiter `lock_queue_ns` old.
    #[inline]
    pub fn drops(&self, acc_ns: Nanos, held: bool, lock_queue_ns: Nanos) -> bool {
        match self.mode {
            Mode::TryLock => held,
            Mode::Asqm => acc_ns.saturating_add(lock_queue_ns) > self.budget_ns,
        }
    }

    /// Whether a request with `acc_ns` of accumulated delay is refused a wait on a condition
    /// variable whose oldest waiter is `cv_queue_ns` old: the artifact's `condvar_is_congested`
    /// (acc + the condvar's queueing delay > budget). `try_lock` has no condvar form: it never
    /// refuses a wait.
    #[inline]
    pub fn condvar_drops(&self, acc_ns: Nanos, cv_queue_ns: Nanos) -> bool {
        match self.mode {
            Mode::TryLock => false,
            Mode::Asqm => acc_ns.saturating_add(cv_queue_ns) > self.budget_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asqm_rule_is_strict_and_counts_both_delays() {
        let c = Config { budget_us: Some(100.0), ..Config::default() }.build();
        assert!(!c.drops(60_000, true, 40_000), "exactly the budget is within it");
        assert!(c.drops(60_001, true, 40_000));
        assert!(c.drops(100_001, false, 0), "a request already past its budget is dropped even at a free lock");
        let t = Config { mode: Mode::TryLock, ..Config::default() }.build();
        assert!(t.drops(0, true, 0) && !t.drops(1_000_000, false, 0));
    }

    #[test]
    fn condvar_rule_adds_the_oldest_waiters_age_and_try_lock_never_refuses_a_wait() {
        let c = Config { budget_us: Some(100.0), ..Config::default() }.build();
        assert!(!c.condvar_drops(60_000, 40_000) && c.condvar_drops(60_001, 40_000));
        let t = Config { mode: Mode::TryLock, ..Config::default() }.build();
        assert!(!t.condvar_drops(u64::MAX, u64::MAX));
    }

    #[test]
    fn derived_budget_and_errors_name_fields() {
        let c = Config { target_us: Some(200.0), service_p99_us: Some(46.0), ..Config::default() };
        assert_eq!(c.budget(), Some(134.0), "the paper's 10 µs setting: 200 − 20 − 46");
        assert!(c.validate("server.lock_control", &[]).is_ok());
        let e = Config::default().validate("server.lock_control", &[]).unwrap_err();
        assert_eq!(e.field, "server.lock_control.budget_us");
        let e = Config { target_us: Some(10.0), service_p99_us: Some(46.0), ..Config::default() }.validate("s", &[]).unwrap_err();
        assert_eq!(e.field, "s.target_us");
        let e = Config { budget_us: Some(1.0), cleanup_lock: Some("slab".into()), ..Config::default() }.validate("s", &["item"]).unwrap_err();
        assert_eq!(e.field, "s.cleanup_lock");
        assert!(Config { mode: Mode::TryLock, ..Config::default() }.validate("s", &[]).is_ok(), "try_lock needs no budget");
    }
}

// ---------------------------------------------------------------------------------------------
// Per-lock statistics, kept by the drivers over the measured window.

/// One lock family's counters.
#[derive(Debug, Clone)]
pub struct FamilyStats {
    pub name: String,
    pub acquisitions: u64,
    pub waits: u64,
    wait: hdrhistogram::Histogram<u64>,
    wait_sum: u128,
    pub drops: u64,
    pub cleanups: u64,
    /// Waits that ended with the request's accumulated delay past the budget.
    pub over_budget: u64,
    /// ∫ waiters dt (ns · waiters), for the time-weighted mean queue length.
    waiters_ns: u128,
}

/// Every family's counters, and the mutex → family map.
#[derive(Debug, Clone, Default)]
pub struct LockStats {
    pub families: Vec<FamilyStats>,
    /// Per mutex id: its family.
    family: Vec<u16>,
    /// Per family: waiters now, and since when that count holds.
    queue: Vec<(u32, Nanos)>,
    pub measuring: bool,
}

impl LockStats {
    /// `families`: (name, members) in mutex-id order.
    pub fn new<'a>(families: impl IntoIterator<Item = (&'a str, u32)>) -> Self {
        let mut s = Self::default();
        for (i, (name, count)) in families.into_iter().enumerate() {
            s.families.push(FamilyStats {
                name: name.to_string(),
                acquisitions: 0,
                waits: 0,
                wait: hdrhistogram::Histogram::new(3).expect("valid sigfig"),
                wait_sum: 0,
                drops: 0,
                cleanups: 0,
                over_budget: 0,
                waiters_ns: 0,
            });
            s.family.extend(std::iter::repeat_n(i as u16, count as usize));
            s.queue.push((0, 0));
        }
        s
    }

    pub fn family_of(&self, mutex: u32) -> usize {
        self.family[mutex as usize] as usize
    }

    fn move_queue(&mut self, f: usize, now: Nanos, delta: i32) {
        let (n, since) = self.queue[f];
        if self.measuring {
            self.families[f].waiters_ns += u128::from(n) * u128::from(now.saturating_sub(since));
        }
        self.queue[f] = ((n as i32 + delta) as u32, now);
    }

    /// A lock step on `mutex`; `waits`: it joins the queue.
    pub fn acquire(&mut self, mutex: u32, waits: bool, now: Nanos) {
        let f = self.family_of(mutex);
        if self.measuring {
            self.families[f].acquisitions += 1;
        }
        if waits {
            self.move_queue(f, now, 1);
        }
    }

    /// A waiter of `mutex` was handed it after `wait_ns`; `over_budget`: its accumulated delay
    /// now exceeds the budget (it joined within it: the lock queue's age underestimated its wait).
    pub fn handed(&mut self, mutex: u32, wait_ns: Nanos, now: Nanos, over_budget: bool) {
        let f = self.family_of(mutex);
        self.move_queue(f, now, -1);
        if self.measuring {
            let s = &mut self.families[f];
            s.waits += 1;
            s.over_budget += u64::from(over_budget);
            s.wait.record(wait_ns).expect("auto-resizing histogram");
            s.wait_sum += u128::from(wait_ns);
        }
    }

    pub fn dropped(&mut self, mutex: u32) {
        let f = self.family_of(mutex);
        if self.measuring {
            self.families[f].drops += 1;
        }
    }

    pub fn cleanup(&mut self, mutex: u32) {
        let f = self.family_of(mutex);
        if self.measuring {
            self.families[f].cleanups += 1;
        }
    }

    /// Starts the measured window at `now`.
    pub fn start_window(&mut self, now: Nanos) {
        self.measuring = true;
        for q in &mut self.queue {
            q.1 = now;
        }
    }

    /// Summaries at `now`, over a window of `window_ns`, merged with `other` nodes' (same families).
    pub fn summaries(nodes: &[&LockStats], now: Nanos, window_ns: Nanos) -> Vec<crate::summary::LockSummary> {
        let Some(first) = nodes.first() else { return Vec::new() };
        (0..first.families.len())
            .map(|f| {
                let mut wait = hdrhistogram::Histogram::<u64>::new(3).expect("valid sigfig");
                let (mut acq, mut waits, mut sum, mut drops, mut cleanups, mut over, mut wn) = (0, 0, 0u128, 0, 0, 0, 0u128);
                for n in nodes {
                    let s = &n.families[f];
                    wait.add(&s.wait).expect("auto-resizing histogram");
                    acq += s.acquisitions;
                    waits += s.waits;
                    sum += s.wait_sum;
                    drops += s.drops;
                    cleanups += s.cleanups;
                    over += s.over_budget;
                    let (q, since) = n.queue[f];
                    wn += s.waiters_ns + u128::from(q) * u128::from(now.saturating_sub(since));
                }
                crate::summary::LockSummary {
                    name: first.families[f].name.clone(),
                    acquisitions: acq,
                    waits,
                    wait_us: crate::metrics::us_percentiles(&wait, sum, waits),
                    drops,
                    cleanups,
                    waits_over_budget: over,
                    queue_len_mean: wn as f64 / window_ns.max(1) as f64,
                }
            })
            .collect()
    }
}
