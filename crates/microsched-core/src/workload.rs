//! The open-loop workload both drivers generate: Poisson arrivals whose rate may change over
//! time, sessions, and the request mix. The simulator and the real load generator build it from
//! the same scenario and the same named streams, so one seed gives them the same requests.
//!
//! The next arrival is found by drawing one unit exponential and walking the integrated rate
//! across steps, which is exact for a non-homogeneous Poisson process and consumes exactly one
//! draw per arrival, whatever the schedule: the arrival stream stays aligned across scenarios.

use std::path::Path;

use rand::Rng;
use rand_distr::{Distribution, Exp1};

use crate::dist::Sampler;
use crate::rng::{stream, Stream};
use crate::scenario::{Load, Scenario, Workload};
use crate::time::{ms, round_ns};
use crate::{Nanos, ScenarioError};

#[derive(Debug, Clone)]
pub struct Arrivals {
    /// (start time ns, rate in requests per ns), sorted, first at 0.
    steps: Vec<(f64, f64)>,
    idx: usize,
    /// Time of the last arrival, unrounded, so that rounding never accumulates.
    t: f64,
    /// The current step's rate and end, read on every arrival.
    rate: f64,
    seg_end: f64,
    rng: Stream,
    /// A recorded run's creation times, offered instead of drawn (`workload.replay`).
    replayed: Option<std::collections::VecDeque<Nanos>>,
}

impl Arrivals {
    pub fn new(steps: Vec<(f64, f64)>, rng: Stream) -> Self {
        debug_assert!(!steps.is_empty() && steps[0].0 == 0.0);
        let mut a = Self { steps, idx: 0, t: 0.0, rate: 0.0, seg_end: 0.0, rng, replayed: None };
        a.enter_step();
        a
    }

    /// These arrivals offer exactly `times` (ns, in order) and nothing after them; the steps
    /// only label the offered rate.
    pub fn replaying(mut self, times: impl IntoIterator<Item = Nanos>) -> Self {
        self.replayed = Some(times.into_iter().collect());
        self
    }

    fn enter_step(&mut self) {
        self.rate = self.steps[self.idx].1;
        self.seg_end = self.steps.get(self.idx + 1).map_or(f64::INFINITY, |s| s.0);
    }

    /// Rate (requests/s) in force at time `t` ns.
    pub fn rate_at(&self, t: f64) -> f64 {
        let i = self.steps.partition_point(|s| s.0 <= t).saturating_sub(1);
        self.steps[i].1 * 1e9
    }
}

/// Arrival times in ns, in order (an endless stream unless the rate drops to 0 for good).
impl Iterator for Arrivals {
    type Item = Nanos;

    /// The next arrival time, or `None` if the rate stays 0 forever.
    fn next(&mut self) -> Option<Nanos> {
        if let Some(q) = &mut self.replayed {
            return q.pop_front();
        }
        let mut e: f64 = Exp1.sample(&mut self.rng);
        loop {
            let (rate, seg_end) = (self.rate, self.seg_end);
            if rate > 0.0 {
                let dt = e / rate;
                if self.t + dt < seg_end {
                    self.t += dt;
                    return Some(round_ns(self.t));
                }
                e -= (seg_end - self.t) * rate;
            }
            if seg_end.is_infinite() {
                return None;
            }
            self.t = seg_end;
            self.idx += 1;
            self.enter_step();
        }
    }
}

/// Uniform pick in 0..n from a stream (a thin wrapper so call sites say what they draw).
#[inline]
pub fn pick(rng: &mut Stream, n: u32) -> u32 {
    rng.gen_range(0..n)
}

/// The offered-load steps of a scenario: (start ns, requests/s), the first at 0.
pub fn load_steps(sc: &Scenario, base_dir: &Path) -> Result<Vec<(f64, f64)>, ScenarioError> {
    Ok(load_steps_for(&sc.load, sc.capacity_rps(base_dir)?))
}

/// The steps of one load table, fractions taken of `capacity` (requests/s).
pub fn load_steps_for(load: &Load, capacity: f64) -> Vec<(f64, f64)> {
    let rate = |fraction: Option<f64>, rps: Option<f64>| rps.unwrap_or_else(|| fraction.unwrap_or(0.0) * capacity);
    let mut steps = vec![(0.0, rate(load.fraction, load.rps))];
    for s in &load.schedule {
        let t = ms(s.at_ms) as f64;
        if t == 0.0 {
            steps[0].1 = rate(s.fraction, s.rps);
        } else {
            steps.push((t, rate(s.fraction, s.rps)));
        }
    }
    match &load.on_off {
        Some(o) => modulate(&steps, o),
        None => steps,
    }
}

/// `steps` with the on/off pattern applied: every boundary of either, each segment's rate the
/// step's times the pattern's factor (set up once, so arrivals pay nothing for it).
fn modulate(steps: &[(f64, f64)], o: &crate::scenario::OnOff) -> Vec<(f64, f64)> {
    let (period, until) = (ms(o.period_ms) as f64, ms(o.until_ms) as f64);
    let on = (o.period_ms * o.duty * 1e6).round();
    let on_mult = 1.0 / (o.duty + (1.0 - o.duty) * o.off_ratio);
    let mut bounds: Vec<f64> = steps.iter().map(|s| s.0).collect();
    let mut k = 0.0;
    while k * period < until {
        bounds.push(k * period);
        bounds.push((k * period + on).min(until));
        k += 1.0;
    }
    bounds.push(until);
    bounds.sort_by(f64::total_cmp);
    bounds.dedup();
    let base = |t: f64| steps[steps.partition_point(|s| s.0 <= t).saturating_sub(1)].1;
    let factor = |t: f64| match t < until {
        true if t % period < on => on_mult,
        true => on_mult * o.off_ratio,
        false => 1.0,
    };
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(bounds.len());
    for t in bounds {
        let r = base(t) * factor(t);
        if out.last().is_none_or(|l| l.1 != r) {
            out.push((t, r));
        }
    }
    out
}

impl Arrivals {
    /// The arrival process of run `seed` over `steps` (start ns, requests/s).
    pub fn from_steps(steps: &[(f64, f64)], seed: u64) -> Self {
        Self::from_steps_named(steps, seed, "")
    }

    /// The same, from the stream `<prefix>arrivals` (applications after the first).
    pub fn from_steps_named(steps: &[(f64, f64)], seed: u64, prefix: &str) -> Self {
        Self::new(steps.iter().map(|&(t, r)| (t, r / 1e9)).collect(), stream(seed, &format!("{prefix}arrivals")))
    }
}

/// The request mix: type by weight, service time from the type's own stream.
#[derive(Debug, Clone)]
pub struct RequestMix {
    cumulative: Vec<f64>,
    samplers: Vec<Sampler>,
    service_rngs: Vec<Stream>,
    type_rng: Stream,
}

impl RequestMix {
    pub fn new(sc: &Scenario, base_dir: &Path, seed: u64) -> Result<Self, ScenarioError> {
        Self::for_workload(&sc.workload, base_dir, seed, "")
    }

    /// The mix of `w`, its streams named with `prefix` (applications after the first).
    pub fn for_workload(w: &Workload, base_dir: &Path, seed: u64, prefix: &str) -> Result<Self, ScenarioError> {
        let total: f64 = w.types.iter().map(|t| t.ratio).sum();
        let mut acc = 0.0;
        let (mut cumulative, mut samplers, mut service_rngs) = (vec![], vec![], vec![]);
        for (i, t) in w.types.iter().enumerate() {
            acc += t.ratio / total;
            cumulative.push(acc);
            samplers.push(Sampler::build(&t.service, base_dir, &format!("workload.types[{i}].service"))?);
            service_rngs.push(stream(seed, &format!("{prefix}service.{i}")));
        }
        Ok(Self { cumulative, samplers, service_rngs, type_rng: stream(seed, &format!("{prefix}types")) })
    }

    pub fn samplers(&self) -> &[Sampler] {
        &self.samplers
    }

    /// The next request's type and service time.
    #[inline]
    pub fn draw(&mut self) -> (u16, Nanos) {
        let t = if self.cumulative.len() == 1 {
            0
        } else {
            let u: f64 = self.type_rng.gen();
            self.cumulative.iter().position(|&c| u < c).unwrap_or(self.cumulative.len() - 1)
        };
        (t as u16, self.samplers[t].sample(&mut self.service_rngs[t]))
    }
}
