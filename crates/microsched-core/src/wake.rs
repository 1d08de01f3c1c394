//! Core wake-up latency: the time from the allocator's decision to grant a parked core until
//! that core runs the application's work (`server.wake_latency`).
//!
//! Absent, every grant takes the constant `server.allocation_delay_us` (5 µs by default), as
//! every result recorded before issue 12 assumes. A real IOKernel wakes a parked kthread through
//! the kernel, and that takes a variable time with a tail (scheduler wake-up, cache and TLB
//! refill, the IPI): sampled here, each grant draws from its own named random stream (`wake`),
//! so turning it on moves no other draw of the run (common random numbers across policies).
//!
//! Lognormal is given by its mean and its 99th percentile ("mean/tail") rather than by σ: that
//! is how wake-up latencies are reported. With z = Φ⁻¹(0.99), mean = e^(μ+σ²/2) and
//! p99 = e^(μ+zσ), so σ = z − √(z² − 2·ln(p99/mean)), which needs p99/mean ≤ e^(z²/2) ≈ 15.

use std::path::Path;

use rand::Rng;

use crate::dist::Sampler;
use crate::error::ScenarioError;
use crate::scenario::Dist;
use crate::time::Nanos;

/// Φ⁻¹(0.99).
const Z99: f64 = 2.326_347_874_040_841;

/// The `server.wake_latency` table.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(tag = "dist", rename_all = "snake_case", deny_unknown_fields)]
pub enum WakeLatency {
    /// Every wake-up takes `value_us` (the same as `server.allocation_delay_us`).
    Constant {
        /// The wake-up latency.
        value_us: f64,
    },
    /// Log-normal with this mean and 99th percentile (p99_us ≥ mean_us; p99/mean ≤ 15).
    Lognormal {
        /// The mean wake-up latency.
        mean_us: f64,
        /// Its 99th percentile.
        p99_us: f64,
    },
    /// Measured wake-ups (µs) read from a CSV file, path relative to the scenario file: the first
    /// column, or `column` by header name (e.g. the `wake_us` column a `microsched serve` report
    /// writes).
    Empirical {
        /// Path of the CSV file, relative to the scenario file.
        csv: String,
        /// Header name of the column to read; default: the first column.
        #[serde(default)]
        column: Option<String>,
    },
}

impl WakeLatency {
    /// σ of the underlying normal for a mean and a p99, or why there is none.
    pub fn lognormal_sigma(mean_us: f64, p99_us: f64) -> Result<f64, String> {
        let r = (p99_us / mean_us).ln();
        let disc = Z99 * Z99 - 2.0 * r;
        if disc < 0.0 {
            return Err(format!(
                "a log-normal's p99 is at most {:.2}× its mean, got {:.2}×",
                (Z99 * Z99 / 2.0).exp(),
                p99_us / mean_us
            ));
        }
        Ok(Z99 - disc.sqrt())
    }

    /// The ready-to-draw distribution; `field` is the table's dotted path.
    pub fn build(&self, base_dir: &Path, field: &str) -> Result<WakeSampler, ScenarioError> {
        let dist = match self {
            WakeLatency::Constant { value_us } => {
                if !(value_us.is_finite() && *value_us >= 0.0) {
                    return Err(ScenarioError::new(
                        format!("{field}.value_us"),
                        format!("{value_us} is not allowed: a wake-up latency is a finite number of µs ≥ 0"),
                    ));
                }
                return Ok(WakeSampler::Constant(crate::time::us(*value_us)));
            }
            WakeLatency::Lognormal { mean_us, p99_us } => {
                if !(mean_us.is_finite() && *mean_us > 0.0) {
                    return Err(ScenarioError::new(
                        format!("{field}.mean_us"),
                        format!("{mean_us} is not allowed: the mean must be a finite number of µs > 0"),
                    ));
                }
                if !(p99_us.is_finite() && p99_us >= mean_us) {
                    return Err(ScenarioError::new(
                        format!("{field}.p99_us"),
                        format!("{p99_us} is not allowed: the p99 must be finite and at least the mean ({mean_us} µs)"),
                    ));
                }
                let sigma = Self::lognormal_sigma(*mean_us, *p99_us)
                    .map_err(|m| ScenarioError::new(format!("{field}.p99_us"), format!("{p99_us} is not allowed: {m}")))?;
                if sigma == 0.0 {
                    return Ok(WakeSampler::Constant(crate::time::us(*mean_us)));
                }
                Dist::Lognormal { mean_us: *mean_us, sigma }
            }
            WakeLatency::Empirical { csv, column } => Dist::Empirical { csv: csv.clone(), column: column.clone() },
        };
        Ok(WakeSampler::Sampled(Sampler::build(&dist, base_dir, field)?))
    }
}

/// A built [`WakeLatency`].
#[derive(Debug, Clone)]
pub enum WakeSampler {
    Constant(Nanos),
    Sampled(Sampler),
}

impl WakeSampler {
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Nanos {
        match self {
            WakeSampler::Constant(v) => *v,
            WakeSampler::Sampled(s) => s.sample(rng),
        }
    }

    pub fn mean_us(&self) -> f64 {
        match self {
            WakeSampler::Constant(v) => *v as f64 / 1e3,
            WakeSampler::Sampled(s) => s.mean_us(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::stream;

    #[test]
    fn lognormal_hits_its_mean_and_tail() {
        let w = WakeLatency::Lognormal { mean_us: 5.0, p99_us: 50.0 }.build(Path::new("."), "server.wake_latency").unwrap();
        let mut rng = stream(7, "wake");
        let mut xs: Vec<Nanos> = (0..200_000).map(|_| w.sample(&mut rng)).collect();
        xs.sort_unstable();
        let mean = xs.iter().sum::<Nanos>() as f64 / xs.len() as f64;
        let p99 = xs[xs.len() * 99 / 100] as f64;
        assert!((mean / 5_000.0 - 1.0).abs() < 0.03, "mean {mean}");
        assert!((p99 / 50_000.0 - 1.0).abs() < 0.05, "p99 {p99}");
    }

    #[test]
    fn bad_tails_name_their_field() {
        let b = |w: WakeLatency| w.build(Path::new("."), "server.wake_latency").unwrap_err();
        assert_eq!(b(WakeLatency::Lognormal { mean_us: 5.0, p99_us: 100.0 }).field, "server.wake_latency.p99_us");
        assert_eq!(b(WakeLatency::Lognormal { mean_us: 5.0, p99_us: 4.0 }).field, "server.wake_latency.p99_us");
        assert_eq!(b(WakeLatency::Lognormal { mean_us: 0.0, p99_us: 4.0 }).field, "server.wake_latency.mean_us");
        assert_eq!(b(WakeLatency::Constant { value_us: -1.0 }).field, "server.wake_latency.value_us");
        // p99 = mean: no spread, a constant.
        let c = WakeLatency::Lognormal { mean_us: 5.0, p99_us: 5.0 }.build(Path::new("."), "w").unwrap();
        assert!(matches!(c, WakeSampler::Constant(5_000)));
    }
}
