//! Pieces the dynamic allocators share: parameter checks, per-interval differencing of the
//! cumulative core counters, and the choice of the core to revoke.

use super::{AllocAction, AllocObs, CoreId, CoreObs, CoreState, ParkMode, ParkRule};
use crate::error::ScenarioError;
use crate::time::{us, Nanos, NS_PER_US};

/// Longest period any allocator parameter may name, in µs (one second). Core allocation works at
/// microsecond scale; a longer value is almost surely a unit mistake (ms or ns written as µs).
pub(crate) const MAX_PERIOD_US: f64 = 1_000_000.0;

/// A period that must be strictly positive (an interval, a threshold): finite, > 0, at least one
/// nanosecond once rounded, and at most one second.
pub(crate) fn check_positive_us(field: String, v: f64) -> Result<(), ScenarioError> {
    if !v.is_finite() || v <= 0.0 || us(v) == 0 || v > MAX_PERIOD_US {
        return Err(ScenarioError::new(
            field,
            format!(
                "{v} is not allowed: must be a number of µs > 0 (at least 0.001) and <= {MAX_PERIOD_US} (one second)"
            ),
        ));
    }
    Ok(())
}

/// A period that may be zero (a poll period: park right after a failed pass): finite, >= 0, and at
/// most one second.
pub(crate) fn check_non_negative_us(field: String, v: f64) -> Result<(), ScenarioError> {
    if !(0.0..=MAX_PERIOD_US).contains(&v) {
        return Err(ScenarioError::new(
            field,
            format!("{v} is not allowed: must be a number of µs >= 0 and <= {MAX_PERIOD_US} (one second)"),
        ));
    }
    Ok(())
}

/// `lower < upper`. Equal bounds are rejected too: with no band between "add" and "revoke" the
/// policy would change the allocation at every interval.
pub(crate) fn check_range(
    field: &str,
    lower_key: &str,
    lower: f64,
    upper_key: &str,
    upper: f64,
) -> Result<(), ScenarioError> {
    if lower >= upper {
        return Err(ScenarioError::new(
            format!("{field}.{lower_key}"),
            format!("{lower} is not allowed: must be below {field}.{upper_key} ({upper})"),
        ));
    }
    Ok(())
}

/// Queueing delay of a core's oldest waiting request at `now` (0 if its queues are empty).
pub(crate) fn core_delay(now: Nanos, c: &CoreObs) -> Nanos {
    c.oldest_enqueued_at.map_or(0, |t| now.saturating_sub(t))
}

/// Range policies skip the interval after a grant only when the interval is short (Caladan's
/// `simple` policy: `poll_interval < 10`), since then the new core has not had time to act.
pub(crate) const WAKING_SKIP_BELOW_NS: Nanos = 10 * NS_PER_US;

/// Busy and search time of each core over the last interval, from the cumulative counters the
/// driver reports. Parked and waking cores accumulate neither, so parked time counts in neither.
#[derive(Debug, Clone, Default)]
pub(crate) struct IntervalWindow {
    /// Cumulative (busy, search) at the previous call.
    prev: Vec<(Nanos, Nanos)>,
    /// (busy, search) between the previous call and the last one.
    delta: Vec<(Nanos, Nanos)>,
}

impl IntervalWindow {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self { prev: Vec::with_capacity(n), delta: Vec::with_capacity(n) }
    }

    /// Moves the window to `cores`. The first call (or one after the core count changed) measures
    /// from the start of the run, which is the first interval when ticks start one interval in.
    pub(crate) fn advance(&mut self, cores: &[CoreObs]) {
        if self.prev.len() != cores.len() {
            self.prev.clear();
            self.prev.resize(cores.len(), (0, 0));
        }
        self.delta.clear();
        for (c, p) in cores.iter().zip(self.prev.iter_mut()) {
            // saturating: a driver that resets its counters must not make a window wrap around.
            self.delta.push((c.busy_ns.saturating_sub(p.0), c.search_ns.saturating_sub(p.1)));
            *p = (c.busy_ns, c.search_ns);
        }
    }

    pub(crate) fn busy(&self, core: usize) -> Nanos {
        self.delta.get(core).map_or(0, |d| d.0)
    }

    /// Σ busy and Σ search over all cores in the last interval.
    pub(crate) fn totals(&self) -> (Nanos, Nanos) {
        self.delta.iter().fold((0, 0), |(b, s), d| (b + d.0, s + d.1))
    }
}

/// The active core to revoke: smallest queueing delay (Caladan's `min_delay_core`), then fewest
/// queued requests, then least busy in the last interval, then lowest index (determinism).
pub(crate) fn least_loaded(obs: &AllocObs, window: &IntervalWindow) -> Option<CoreId> {
    obs.cores
        .iter()
        .enumerate()
        .filter(|(_, c)| c.state == CoreState::Active)
        .min_by_key(|(i, c)| (core_delay(obs.now, c), c.queued, window.busy(*i), *i))
        .map(|(i, _)| i as CoreId)
}

/// Whether a Grant can be carried out: the driver only grants parked cores, so the LC application
/// never exceeds `max_cores`.
pub(crate) fn any_parked(obs: &AllocObs) -> bool {
    obs.cores.iter().any(|c| c.state == CoreState::Parked)
}

/// Where a range policy's signal stands this interval relative to its band.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RangeSignal {
    /// Above the band: add a core.
    pub above: bool,
    /// At or below the lower bound: revoke a core (when more than one is active).
    pub below: bool,
    /// Exactly zero: the last active core may go too.
    pub zero: bool,
}

/// The add/revoke rule both range policies share (McClure et al., as in Caladan's `simple`
/// policy with `range_policy`): at most one revoke every two intervals, the last core only at a
/// zero signal, a grant skipped after a grant when the interval is short.
#[derive(Debug, Clone)]
pub(crate) struct RangeRule {
    waking_skip: bool,
    granted_last: bool,
    yielded_last: bool,
}

impl RangeRule {
    pub(crate) fn new(interval: Nanos) -> Self {
        Self { waking_skip: interval < WAKING_SKIP_BELOW_NS, granted_last: false, yielded_last: false }
    }

    pub(crate) fn decide(&mut self, obs: &AllocObs, s: RangeSignal, window: &IntervalWindow) -> AllocAction {
        // A revoke asked for last interval is withdrawn now (Caladan clears the yield request),
        // and no new one is made: this is the "at most one revoke every two intervals".
        let may_revoke = !std::mem::take(&mut self.yielded_last);
        let woke_last = std::mem::take(&mut self.granted_last) && self.waking_skip;
        let parked_work = obs.parked_with_work();
        // Add first: Caladan can add and revoke in the same interval, a driver carries out one
        // action, and when both apply a parked core holds work that must not wait.
        if (s.above || parked_work) && !woke_last && any_parked(obs) {
            self.granted_last = true;
            return AllocAction::Grant;
        }
        let active = obs.active();
        let revoke = may_revoke && ((active > 1 && s.below) || (active == 1 && s.zero && !parked_work));
        match revoke.then(|| least_loaded(obs, window)).flatten() {
            Some(core) => {
                self.yielded_last = true;
                AllocAction::Yield(core)
            }
            None => AllocAction::Nothing,
        }
    }
}

/// Range policies: cores spin and steal while more than one is active (they are revoked instead);
/// the last one parks as soon as one work-search pass fails, with no poll-time minimum.
pub(crate) const RANGE_PARK_RULE: ParkRule = ParkRule { mode: ParkMode::OnlyLastCore, min_poll_ns: 0, min_passes: 1 };

#[cfg(test)]
pub(crate) mod test_util {
    //! Hand-built observations for the policies' unit tests.
    use super::super::{CoreObs, CoreState};
    use crate::time::Nanos;

    pub fn core(state: CoreState) -> CoreObs {
        CoreObs::new(state)
    }
    pub fn active() -> CoreObs {
        core(CoreState::Active)
    }
    pub fn parked() -> CoreObs {
        core(CoreState::Parked)
    }
    /// `c` with `n` requests queued, the oldest enqueued at `at`.
    pub fn queued(mut c: CoreObs, n: u32, at: Nanos) -> CoreObs {
        c.queued = n;
        c.oldest_enqueued_at = if n > 0 { Some(at) } else { None };
        c
    }
    pub fn times(mut c: CoreObs, busy: Nanos, search: Nanos) -> CoreObs {
        c.busy_ns = busy;
        c.search_ns = search;
        c
    }
}

#[cfg(test)]
mod tests {
    use super::test_util::*;
    use super::*;

    #[test]
    fn period_checks() {
        assert!(check_positive_us("f".into(), 5.0).is_ok());
        assert!(check_positive_us("f".into(), MAX_PERIOD_US).is_ok());
        for bad in [0.0, -1.0, 0.0001, f64::NAN, f64::INFINITY, MAX_PERIOD_US + 1.0] {
            let e = check_positive_us("a.b".into(), bad).unwrap_err();
            assert_eq!(e.field, "a.b", "{bad}");
        }
        assert!(check_non_negative_us("f".into(), 0.0).is_ok());
        for bad in [-0.5, f64::NAN, 2e6] {
            assert!(check_non_negative_us("f".into(), bad).is_err(), "{bad}");
        }
        assert!(check_range("p", "lower", 1.0, "upper", 2.0).is_ok());
        let e = check_range("p", "lower", 2.0, "upper", 2.0).unwrap_err();
        assert_eq!(e.field, "p.lower");
        assert!(e.message.contains("p.upper"));
    }

    #[test]
    fn window_differences_counters_and_least_loaded_breaks_ties() {
        let mut w = IntervalWindow::with_capacity(3);
        w.advance(&[times(active(), 100, 50), times(active(), 10, 5), times(parked(), 0, 0)]);
        assert_eq!(w.totals(), (110, 55));
        w.advance(&[times(active(), 130, 60), times(active(), 15, 9), times(parked(), 0, 0)]);
        assert_eq!(w.totals(), (35, 14));
        assert_eq!((w.busy(0), w.busy(1), w.busy(2)), (30, 5, 0));
        // Both active cores idle with empty queues: the one less busy in the interval goes.
        let cores = [times(active(), 130, 60), times(active(), 15, 9), parked()];
        let obs = AllocObs { now: 1000, cores: &cores };
        assert_eq!(least_loaded(&obs, &w), Some(1));
        // Delay dominates busy time.
        let cores = [times(active(), 130, 60), queued(times(active(), 15, 9), 1, 900), parked()];
        let obs = AllocObs { now: 1000, cores: &cores };
        assert_eq!(least_loaded(&obs, &w), Some(0));
    }
}
