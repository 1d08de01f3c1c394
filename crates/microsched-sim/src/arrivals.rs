//! Open-loop Poisson arrivals whose rate may change over time (piecewise constant).
//!
//! The next arrival is found by drawing one unit exponential and walking the integrated rate
//! across steps, which is exact for a non-homogeneous Poisson process and consumes exactly one
//! draw per arrival, whatever the schedule: the arrival stream stays aligned across scenarios.

use rand::Rng;
use rand_distr::{Distribution, Exp1};

use microsched_core::Nanos;

use crate::rng::Stream;

#[derive(Debug, Clone)]
pub struct Arrivals {
    /// (start time ns, rate in requests per ns), sorted, first at 0.
    steps: Vec<(f64, f64)>,
    idx: usize,
    /// Time of the last arrival, unrounded, so that rounding never accumulates.
    t: f64,
    rng: Stream,
}

impl Arrivals {
    pub fn new(steps: Vec<(f64, f64)>, rng: Stream) -> Self {
        debug_assert!(!steps.is_empty() && steps[0].0 == 0.0);
        Self { steps, idx: 0, t: 0.0, rng }
    }

    /// The next arrival time, or `None` if the rate stays 0 forever.
    pub fn next(&mut self) -> Option<Nanos> {
        let mut e: f64 = Exp1.sample(&mut self.rng);
        loop {
            let rate = self.steps[self.idx].1;
            let seg_end = self.steps.get(self.idx + 1).map_or(f64::INFINITY, |s| s.0);
            if rate > 0.0 {
                let dt = e / rate;
                if self.t + dt < seg_end {
                    self.t += dt;
                    return Some(self.t.round() as Nanos);
                }
                e -= (seg_end - self.t) * rate;
            }
            if seg_end.is_infinite() {
                return None;
            }
            self.t = seg_end;
            self.idx += 1;
        }
    }

    /// Rate (requests/s) in force at time `t` ns.
    pub fn rate_at(&self, t: f64) -> f64 {
        let i = self.steps.partition_point(|s| s.0 <= t).saturating_sub(1);
        self.steps[i].1 * 1e9
    }
}

/// Uniform pick in 0..n from a stream (a thin wrapper so call sites say what they draw).
#[inline]
pub fn pick(rng: &mut Stream, n: u32) -> u32 {
    rng.gen_range(0..n)
}
