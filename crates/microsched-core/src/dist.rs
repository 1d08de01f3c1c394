//! Service-time sampling, shared by the simulator and the real load generator so that both draw
//! from the very same distributions.

use std::path::Path;

use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal};

use crate::error::ScenarioError;
use crate::scenario::{non_negative, positive, Dist};
use crate::time::{round_ns, Nanos};

/// A ready-to-draw distribution of service times, in nanoseconds (never 0: a request always
/// costs at least 1 ns, so slowdown is defined).
#[derive(Debug, Clone)]
pub enum Sampler {
    Constant(Nanos),
    Exponential { dist: Exp<f64>, mean_ns: f64 },
    Bimodal { first_ns: Nanos, second_ns: Nanos, p_first: f64 },
    Lognormal { dist: LogNormal<f64>, mean_ns: f64 },
    Empirical(Vec<Nanos>),
}

impl Sampler {
    /// Builds a sampler, checking the parameters; `field` names the distribution in errors.
    pub fn build(d: &Dist, base_dir: &Path, field: &str) -> Result<Self, ScenarioError> {
        Ok(match d {
            Dist::Constant { value_us } => {
                resolvable(&format!("{field}.value_us"), *value_us)?;
                Sampler::Constant(to_ns(*value_us))
            }
            Dist::Exponential { mean_us } => {
                resolvable(&format!("{field}.mean_us"), *mean_us)?;
                let mean_ns = mean_us * 1e3;
                Sampler::Exponential { dist: Exp::new(1.0 / mean_ns).expect("positive rate"), mean_ns }
            }
            Dist::Bimodal { modes } => {
                if modes.len() != 2 {
                    return Err(ScenarioError::new(
                        format!("{field}.modes"),
                        format!("a bimodal needs exactly 2 modes, got {}", modes.len()),
                    ));
                }
                for (i, m) in modes.iter().enumerate() {
                    resolvable(&format!("{field}.modes[{i}].value_us"), m.value_us)?;
                    non_negative(&format!("{field}.modes[{i}].prob"), m.prob)?;
                }
                let sum = modes[0].prob + modes[1].prob;
                if (sum - 1.0).abs() > 1e-9 {
                    return Err(ScenarioError::new(
                        format!("{field}.modes"),
                        format!("probabilities sum to {sum}, they must sum to 1"),
                    ));
                }
                Sampler::Bimodal {
                    first_ns: to_ns(modes[0].value_us),
                    second_ns: to_ns(modes[1].value_us),
                    p_first: modes[0].prob,
                }
            }
            Dist::Lognormal { mean_us, sigma } => {
                resolvable(&format!("{field}.mean_us"), *mean_us)?;
                positive(&format!("{field}.sigma"), *sigma)?;
                let mean_ns = mean_us * 1e3;
                let mu = mean_ns.ln() - sigma * sigma / 2.0;
                let dist = LogNormal::new(mu, *sigma)
                    .map_err(|e| ScenarioError::new(format!("{field}.sigma"), e.to_string()))?;
                Sampler::Lognormal { dist, mean_ns }
            }
            Dist::Empirical { csv, column } => {
                Sampler::Empirical(read_samples(&base_dir.join(csv), column.as_deref(), &format!("{field}.csv"))?)
            }
        })
    }

    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Nanos {
        let v = match self {
            Sampler::Constant(v) => *v,
            Sampler::Exponential { dist, .. } => round_ns(dist.sample(rng)),
            Sampler::Bimodal { first_ns, second_ns, p_first } => {
                if rng.gen::<f64>() < *p_first {
                    *first_ns
                } else {
                    *second_ns
                }
            }
            Sampler::Lognormal { dist, .. } => round_ns(dist.sample(rng)),
            Sampler::Empirical(samples) => samples[rng.gen_range(0..samples.len())],
        };
        // A heavy tail (lognormal, large sigma) may draw past what a time can hold.
        v.clamp(1, crate::scenario::MAX_NS)
    }

    /// Mean in µs (exact for the parametric distributions, the sample mean for empirical).
    pub fn mean_us(&self) -> f64 {
        match self {
            Sampler::Constant(v) => *v as f64 / 1e3,
            Sampler::Exponential { mean_ns, .. } | Sampler::Lognormal { mean_ns, .. } => mean_ns / 1e3,
            Sampler::Bimodal { first_ns, second_ns, p_first } => {
                (p_first * *first_ns as f64 + (1.0 - p_first) * *second_ns as f64) / 1e3
            }
            Sampler::Empirical(s) => s.iter().map(|&v| v as f64).sum::<f64>() / s.len() as f64 / 1e3,
        }
    }
}

/// A service time (µs) the simulator can represent: finite, and at least its 1 ns resolution
/// (a smaller one would be rounded up to 1 ns, silently a different workload).
fn resolvable(field: &str, us: f64) -> Result<(), ScenarioError> {
    positive(field, us)?;
    if us * 1e3 < 1.0 {
        return Err(ScenarioError::new(
            field,
            format!("{us} µs is not allowed: it is below the simulator's resolution of 1 ns: use 0.001 µs or more"),
        ));
    }
    Ok(())
}

fn to_ns(us: f64) -> Nanos {
    ((us * 1e3).round() as Nanos).max(1)
}

fn read_samples(path: &Path, column: Option<&str>, field: &str) -> Result<Vec<Nanos>, ScenarioError> {
    let text = crate::files::read_regular(path, field, crate::files::MAX_CSV_BYTES)?;
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).peekable();
    let mut col = 0usize;
    if let Some((_, first)) = lines.peek() {
        let cells: Vec<&str> = first.split(',').map(str::trim).collect();
        if cells.iter().any(|c| c.parse::<f64>().is_err()) {
            if let Some(name) = column {
                col = cells.iter().position(|c| *c == name).ok_or_else(|| {
                    ScenarioError::new(field, format!("column `{name}` not in header: {}", cells.join(", ")))
                })?;
            }
            lines.next();
        } else if let Some(name) = column {
            return Err(ScenarioError::new(field, format!("column `{name}` given, but the file has no header row")));
        }
    }
    let mut out = Vec::new();
    for (lineno, line) in lines {
        let cell = line.split(',').nth(col).map(str::trim).unwrap_or("");
        let v: f64 = cell.parse().map_err(|_| {
            ScenarioError::new(field, format!("line {}: `{cell}` is not a number (service time in µs)", lineno + 1))
        })?;
        if !(v.is_finite() && v > 0.0) {
            return Err(ScenarioError::new(field, format!("line {}: {v} is not a positive service time", lineno + 1)));
        }
        if v * 1e3 > crate::scenario::MAX_NS as f64 {
            return Err(ScenarioError::new(
                field,
                format!("line {}: {cell} µs is more than the longest time allowed ({} µs)", lineno + 1, crate::scenario::MAX_NS / 1000),
            ));
        }
        out.push(to_ns(v));
    }
    if out.is_empty() {
        return Err(ScenarioError::new(field, format!("`{}` has no samples", path.display())));
    }
    Ok(out)
}
