//! SEDA's adaptive overload control (Welsh & Culler), as Protego's evaluation runs it: every
//! client session limits its own sending rate with a token bucket, and every `timeout_us` looks
//! at the 99th percentile of the end-to-end latency it observed in that interval: above the
//! target, the rate is divided by `adj_d`; otherwise `adj_i` requests/s are added. A request that
//! finds no token is rejected at the client (it never reaches the server; the server drops
//! nothing). No state at the server: the driver skips credits entirely, as for "none".
//!
//! Decisions the sources leave open: the rate starts at `initial_rps` per session (default: the
//! session's share of its application's offered load at the start, what a client sending
//! open-loop knows of itself), the
//! bucket holds at most `bucket` tokens (1: no bursts above the rate), an interval without a
//! response leaves the rate unchanged, and the rate never falls below `min_rps`.

use crate::error::ScenarioError;
use crate::time::{us, Nanos};

/// `[policy.overload]` of `kind = "seda"`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Latency target of the observed 99th percentile (Protego's target delay).
    pub target_us: f64,
    /// Rate-update interval.
    pub timeout_us: f64,
    /// Additive increase (requests/s per interval).
    pub adj_i: f64,
    /// Multiplicative decrease factor (> 1).
    pub adj_d: f64,
    /// A session's rate at the start (requests/s); default: its share of the offered load.
    pub initial_rps: Option<f64>,
    /// Lowest rate (requests/s).
    pub min_rps: f64,
    /// Bucket depth (tokens).
    pub bucket: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self { target_us: 200.0, timeout_us: 1000.0, adj_i: 10.0, adj_d: 1.04, initial_rps: None, min_rps: 1.0, bucket: 1.0 }
    }
}

impl Config {
    pub fn validate(&self, field: &str) -> Result<(), ScenarioError> {
        let pos = |k: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(ScenarioError::new(format!("{field}.{k}"), format!("{v} is not allowed: must be a finite number > 0")))
            }
        };
        pos("target_us", self.target_us)?;
        pos("timeout_us", self.timeout_us)?;
        pos("adj_i", self.adj_i)?;
        if let Some(r) = self.initial_rps {
            pos("initial_rps", r)?;
        }
        pos("min_rps", self.min_rps)?;
        if !(self.adj_d.is_finite() && self.adj_d > 1.0) {
            return Err(ScenarioError::new(format!("{field}.adj_d"), format!("{} is not allowed: the decrease factor must be > 1", self.adj_d)));
        }
        if !(self.bucket.is_finite() && self.bucket >= 1.0) {
            return Err(ScenarioError::new(format!("{field}.bucket"), format!("{} is not allowed: must be >= 1", self.bucket)));
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
struct Session {
    rate: f64,
    tokens: f64,
    refilled: Nanos,
    window_start: Nanos,
    /// Latencies observed in the current interval (ns).
    samples: Vec<Nanos>,
}

/// Every session's limiter.
#[derive(Debug, Clone)]
pub struct Seda {
    target_ns: Nanos,
    timeout_ns: Nanos,
    adj_i: f64,
    adj_d: f64,
    min_rps: f64,
    bucket: f64,
    sessions: Vec<Session>,
}

impl Seda {
    /// Limiters for sessions whose offered loads (requests/s) are `offered`; `initial_rps`, when
    /// set, replaces them.
    pub fn new(cfg: &Config, offered: Vec<f64>) -> Self {
        let session = |r: f64| Session { rate: cfg.initial_rps.unwrap_or(r).max(cfg.min_rps), tokens: cfg.bucket, refilled: 0, window_start: 0, samples: Vec::new() };
        Self {
            target_ns: us(cfg.target_us),
            timeout_ns: us(cfg.timeout_us).max(1),
            adj_i: cfg.adj_i,
            adj_d: cfg.adj_d,
            min_rps: cfg.min_rps,
            bucket: cfg.bucket,
            sessions: offered.into_iter().map(session).collect(),
        }
    }

    /// A request of `session` is to be sent at `now`: true if the bucket had a token for it.
    pub fn admit(&mut self, session: u32, now: Nanos) -> bool {
        let bucket = self.bucket;
        let s = &mut self.sessions[session as usize];
        s.tokens = (s.tokens + s.rate * now.saturating_sub(s.refilled) as f64 / 1e9).min(bucket);
        s.refilled = now;
        if s.tokens >= 1.0 {
            s.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// A response reached `session` with end-to-end latency `latency_ns`; at the end of an
    /// interval the rate is adjusted on the interval's 99th percentile.
    pub fn observe(&mut self, session: u32, latency_ns: Nanos, now: Nanos) {
        let (timeout, target, adj_i, adj_d, min) = (self.timeout_ns, self.target_ns, self.adj_i, self.adj_d, self.min_rps);
        let s = &mut self.sessions[session as usize];
        s.samples.push(latency_ns);
        if now.saturating_sub(s.window_start) < timeout {
            return;
        }
        s.window_start = now;
        let k = ((s.samples.len() as f64 * 0.99).ceil() as usize).clamp(1, s.samples.len()) - 1;
        let (_, p99, _) = s.samples.select_nth_unstable(k);
        if *p99 > target {
            s.rate = (s.rate / adj_d).max(min);
        } else {
            s.rate += adj_i;
        }
        s.samples.clear();
    }

    /// Mean rate limit over sessions (requests/s).
    pub fn mean_rate(&self) -> f64 {
        self.sessions.iter().map(|s| s.rate).sum::<f64>() / self.sessions.len().max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_limits_the_rate_and_p99_drives_it() {
        let mut s = Seda::new(&Config::default(), vec![1000.0]);
        assert!(s.admit(0, 0), "a full bucket");
        assert!(!s.admit(0, 500_000), "half a token after 0.5 ms at 1000/s");
        assert!(s.admit(0, 1_000_000));
        s.observe(0, 100_000, 1_000_000);
        assert_eq!(s.mean_rate(), 1010.0, "p99 100 µs within 200 µs: + adj_i");
        s.observe(0, 300_000, 1_500_000);
        assert_eq!(s.mean_rate(), 1010.0, "mid-interval: unchanged");
        s.observe(0, 300_000, 2_000_001);
        assert!((s.mean_rate() - 1010.0 / 1.04).abs() < 1e-9, "p99 300 µs: ÷ adj_d");
    }

    #[test]
    fn bad_parameters_name_their_field() {
        assert_eq!(Config { adj_d: 1.0, ..Config::default() }.validate("policy.overload").unwrap_err().field, "policy.overload.adj_d");
        assert_eq!(Config { bucket: 0.5, ..Config::default() }.validate("p").unwrap_err().field, "p.bucket");
        assert!(Config::default().validate("p").is_ok());
    }
}
