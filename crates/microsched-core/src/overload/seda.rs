//! SEDA's adaptive overload control (Welsh & Culler), as Protego's evaluation runs it: every
//! client session limits its own sending rate with a token bucket and adjusts the rate on the
//! 99th percentile of the latencies it observes. No state at the server: the driver skips
//! credits entirely, as for "none".
//!
//! Two variants:
//!
//! * `artifact` (default): Protego's artifact, `breakwater/src/sd_client.c` and `sd_config.h`
//!   (shenango-protego, branch protego). A bucket of at most `bucket` 4 tokens, starting empty,
//!   refilled at a rate drawn uniformly in [`min_rps` 2, `initial_max_rps` 4] per session. A
//!   request that finds no token (or others waiting) waits in its session's queue (at most 16,
//!   `CRPC_QLEN`) and is sent when a token arrives, or dropped at the client once it has waited
//!   `client_wait_us` (100, `CSD_MAX_CLIENT_DELAY_US`). Each response's latency (from its
//!   sending, not its creation) is a sample; every 100 samples (`SEDA_NREQ`), or at the first
//!   response after `timeout_us` since the last update, the samples' 99th percentile enters an
//!   EWMA (`alpha` 0.7 on the old value); with err = (EWMA − target) / target, err > 0 divides
//!   the rate by `adj_d`, err < −0.5 adds (−err − 0.1) × `adj_i` (`SEDA_ERR_I`, `SEDA_CI`), and
//!   the rate never falls below `min_rps`.
//! * `simplified`: the first version. A 1-token bucket, full at the start, refilled at the
//!   session's share of the offered load; a request without a token is rejected at once; every
//!   `timeout_us` the raw 99th percentile of the interval's latencies (from creation) divides
//!   the rate by `adj_d` above the target, else adds `adj_i`; at least 1 request/s.
//!
//! The target, interval and steps are the evaluation's per experiment (`experiments/protego/`).

use std::collections::{HashMap, VecDeque};

use rand::Rng;

use crate::error::ScenarioError;
use crate::time::{us, Nanos};

/// Which SEDA client runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// Protego's artifact (`sd_client.c`, `sd_config.h`).
    #[default]
    Artifact,
    /// 1-token bucket rejecting at once, raw p99, a start at the offered rate.
    Simplified,
}

/// `[policy.overload]` of `kind = "seda"`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `artifact` (default) or `simplified`.
    pub variant: Variant,
    /// Latency target of the observed 99th percentile (SEDA_TARGET).
    pub target_us: f64,
    /// Longest time between rate updates while responses arrive (SEDA_TIMEOUT).
    pub timeout_us: f64,
    /// Additive increase (requests/s; SEDA_ADJ_I).
    pub adj_i: f64,
    /// Multiplicative decrease factor (> 1; SEDA_ADJ_D).
    pub adj_d: f64,
    /// A session's rate at the start (requests/s); default: artifact, uniform in [`min_rps`,
    /// `initial_max_rps`]; simplified, the session's share of the offered load.
    pub initial_rps: Option<f64>,
    /// artifact: the top of the initial rate's range (CSD_TB_INIT_RATE).
    pub initial_max_rps: f64,
    /// Lowest rate (requests/s); default 2 (CSD_TB_MIN_RATE), simplified 1.
    pub min_rps: Option<f64>,
    /// Bucket depth (tokens); default 4 (CSD_TB_MAX_TOKEN), simplified 1.
    pub bucket: Option<f64>,
    /// artifact: how long a request waits at its client for a token before it is dropped
    /// (CSD_MAX_CLIENT_DELAY_US).
    pub client_wait_us: f64,
    /// artifact: weight of the old value in the p99 EWMA (SEDA_ALPHA).
    pub alpha: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            variant: Variant::Artifact,
            target_us: 200.0,
            timeout_us: 1000.0,
            adj_i: 10.0,
            adj_d: 1.04,
            initial_rps: None,
            initial_max_rps: 4.0,
            min_rps: None,
            bucket: None,
            client_wait_us: 100.0,
            alpha: 0.7,
        }
    }
}

/// The artifact's client queue per connection (CRPC_QLEN) and samples per update (SEDA_NREQ).
const QUEUE: usize = 16;
const SAMPLES: usize = 100;
/// The artifact's increase threshold (SEDA_ERR_I) and increase offset (SEDA_CI).
const ERR_I: f64 = -0.5;
const CI: f64 = -0.1;

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
        pos("initial_max_rps", self.initial_max_rps)?;
        if let Some(r) = self.initial_rps {
            pos("initial_rps", r)?;
        }
        if let Some(r) = self.min_rps {
            pos("min_rps", r)?;
        }
        if !(self.adj_d.is_finite() && self.adj_d > 1.0) {
            return Err(ScenarioError::new(format!("{field}.adj_d"), format!("{} is not allowed: the decrease factor must be > 1", self.adj_d)));
        }
        if let Some(b) = self.bucket {
            if !(b.is_finite() && b >= 1.0) {
                return Err(ScenarioError::new(format!("{field}.bucket"), format!("{b} is not allowed: must be >= 1")));
            }
        }
        if !(self.client_wait_us.is_finite() && self.client_wait_us >= 0.0) {
            return Err(ScenarioError::new(
                format!("{field}.client_wait_us"),
                format!("{} is not allowed: must be a number of µs >= 0", self.client_wait_us),
            ));
        }
        if !(0.0..1.0).contains(&self.alpha) {
            return Err(ScenarioError::new(format!("{field}.alpha"), format!("{} is not allowed: must be a fraction in [0, 1)", self.alpha)));
        }
        if self.initial_max_rps < self.min_rps() {
            return Err(ScenarioError::new(
                format!("{field}.initial_max_rps"),
                format!("{} is not allowed: must be at least min_rps ({})", self.initial_max_rps, self.min_rps()),
            ));
        }
        Ok(())
    }

    fn min_rps(&self) -> f64 {
        self.min_rps.unwrap_or(match self.variant {
            Variant::Artifact => 2.0,
            Variant::Simplified => 1.0,
        })
    }

    fn bucket(&self) -> f64 {
        self.bucket.unwrap_or(match self.variant {
            Variant::Artifact => 4.0,
            Variant::Simplified => 1.0,
        })
    }
}

/// What became of a request a session is to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Sent now.
    Send,
    /// Waiting in its session's queue: call [`Seda::release`] at [`Seda::next_release`].
    Wait,
    /// Dropped at the client (no token and, artifact, its session's queue full).
    Drop,
}

#[derive(Debug, Clone)]
struct Session {
    rate: f64,
    tokens: f64,
    refilled: Nanos,
    /// Requests waiting for a token, with the time each was queued (artifact).
    waiting: VecDeque<(u64, Nanos)>,
    /// A release is scheduled for this session.
    armed: bool,
    /// Latencies observed since the last update (ns).
    samples: Vec<Nanos>,
    last_update: Nanos,
    /// The p99 EWMA (artifact), ns.
    ewma: f64,
}

/// Every session's limiter.
#[derive(Debug, Clone)]
pub struct Seda {
    variant: Variant,
    target_ns: Nanos,
    timeout_ns: Nanos,
    adj_i: f64,
    adj_d: f64,
    min_rps: f64,
    bucket: f64,
    wait_ns: Nanos,
    alpha: f64,
    sessions: Vec<Session>,
    /// When each request that waited at its client was finally sent (artifact): its latency
    /// sample runs from there.
    sent_late: HashMap<u64, Nanos>,
    /// Requests dropped at the client after waiting for a token.
    pub expired: u64,
}

impl Seda {
    /// Limiters for sessions whose offered loads (requests/s) are `offered`; `seed` draws the
    /// artifact's initial rates.
    pub fn new(cfg: &Config, offered: Vec<f64>, seed: u64) -> Self {
        let (min, bucket) = (cfg.min_rps(), cfg.bucket());
        let mut rng = crate::rng::stream(seed, "seda.initial_rate");
        let session = |offered: f64, rng: &mut crate::rng::Stream| {
            let rate = match (cfg.initial_rps, cfg.variant) {
                (Some(r), _) => r,
                (None, Variant::Simplified) => offered,
                (None, Variant::Artifact) => rng.gen_range(min..=cfg.initial_max_rps),
            };
            let tokens = match cfg.variant {
                Variant::Artifact => 0.0,
                Variant::Simplified => bucket,
            };
            Session {
                rate: rate.max(min),
                tokens,
                refilled: 0,
                waiting: VecDeque::new(),
                armed: false,
                samples: Vec::new(),
                last_update: 0,
                ewma: 0.0,
            }
        };
        Self {
            variant: cfg.variant,
            target_ns: us(cfg.target_us),
            timeout_ns: us(cfg.timeout_us).max(1),
            adj_i: cfg.adj_i,
            adj_d: cfg.adj_d,
            min_rps: min,
            bucket,
            wait_ns: us(cfg.client_wait_us),
            alpha: cfg.alpha,
            sessions: offered.into_iter().map(|o| session(o, &mut rng)).collect(),
            sent_late: HashMap::new(),
            expired: 0,
        }
    }

    fn refill(&mut self, session: u32, now: Nanos) -> &mut Session {
        let bucket = self.bucket;
        let s = &mut self.sessions[session as usize];
        s.tokens = (s.tokens + s.rate * now.saturating_sub(s.refilled) as f64 / 1e9).min(bucket);
        s.refilled = now;
        s
    }

    /// Request `req` of `session` is to be sent at `now`.
    pub fn admit(&mut self, session: u32, req: u64, now: Nanos) -> Admit {
        let variant = self.variant;
        let s = self.refill(session, now);
        if s.waiting.is_empty() && s.tokens >= 1.0 {
            s.tokens -= 1.0;
            return Admit::Send;
        }
        if variant == Variant::Simplified || s.waiting.len() >= QUEUE {
            return Admit::Drop;
        }
        s.waiting.push_back((req, now));
        Admit::Wait
    }

    /// When `session`'s waiting requests next need attention (a token arrives, or the oldest has
    /// waited too long), if they do and no release is scheduled yet; marks one as scheduled.
    pub fn next_release(&mut self, session: u32) -> Option<Nanos> {
        let wait = self.wait_ns;
        let s = &mut self.sessions[session as usize];
        let &(_, oldest) = s.waiting.front()?;
        if s.armed {
            return None;
        }
        s.armed = true;
        let token_at = s.refilled + ((1.0 - s.tokens).max(0.0) * 1e9 / s.rate).ceil() as Nanos;
        Some(token_at.min(oldest + wait + 1))
    }

    /// A scheduled release of `session` at `now`: the requests that waited too long are pushed to
    /// `dropped`, those the tokens allow to `sent` (in order).
    pub fn release(&mut self, session: u32, now: Nanos, sent: &mut Vec<u64>, dropped: &mut Vec<u64>) {
        let wait = self.wait_ns;
        let s = self.refill(session, now);
        s.armed = false;
        while let Some(&(req, at)) = s.waiting.front() {
            if now - at <= wait {
                break;
            }
            s.waiting.pop_front();
            dropped.push(req);
        }
        while s.tokens >= 1.0 {
            let Some((req, _)) = s.waiting.pop_front() else { break };
            s.tokens -= 1.0;
            sent.push(req);
        }
        self.expired += dropped.len() as u64;
        for &r in sent.iter() {
            self.sent_late.insert(r, now);
        }
    }

    /// A response to `req` reached `session` at `now`; `created` is when the request was made.
    pub fn observe(&mut self, session: u32, req: u64, created: Nanos, now: Nanos) {
        let sent = self.sent_late.remove(&req).unwrap_or(created);
        let (timeout, target, adj_i, adj_d, min, alpha) = (self.timeout_ns, self.target_ns, self.adj_i, self.adj_d, self.min_rps, self.alpha);
        let variant = self.variant;
        let s = &mut self.sessions[session as usize];
        s.samples.push(now - sent);
        let due = match variant {
            Variant::Artifact => now.saturating_sub(s.last_update) > timeout || s.samples.len() >= SAMPLES,
            Variant::Simplified => now.saturating_sub(s.last_update) >= timeout,
        };
        if !due {
            return;
        }
        s.last_update = now;
        let p99 = match variant {
            // The artifact's index: (len − 1) × 0.99, rounded down.
            Variant::Artifact => {
                let k = ((s.samples.len() - 1) as f64 * 0.99) as usize;
                *s.samples.select_nth_unstable(k).1
            }
            Variant::Simplified => {
                let k = ((s.samples.len() as f64 * 0.99).ceil() as usize).clamp(1, s.samples.len()) - 1;
                *s.samples.select_nth_unstable(k).1
            }
        };
        s.samples.clear();
        let rate = match variant {
            Variant::Artifact => {
                s.ewma = alpha * s.ewma + (1.0 - alpha) * p99 as f64;
                let err = (s.ewma - target as f64) / target as f64;
                if err > 0.0 {
                    s.rate / adj_d
                } else if err < ERR_I {
                    s.rate - (err - CI) * adj_i
                } else {
                    s.rate
                }
            }
            Variant::Simplified if p99 > target => s.rate / adj_d,
            Variant::Simplified => s.rate + adj_i,
        };
        if variant == Variant::Artifact {
            // The artifact refills the bucket at the old rate up to now before changing it.
            s.tokens = (s.tokens + s.rate * now.saturating_sub(s.refilled) as f64 / 1e9).min(self.bucket);
            s.refilled = now;
        }
        s.rate = rate.max(min);
    }

    /// Mean rate limit over sessions (requests/s).
    pub fn mean_rate(&self) -> f64 {
        self.sessions.iter().map(|s| s.rate).sum::<f64>() / self.sessions.len().max(1) as f64
    }

    /// Whether requests can wait at their client (the artifact), so that a driver must schedule
    /// releases.
    pub fn queues(&self) -> bool {
        self.variant == Variant::Artifact
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simplified() -> Config {
        Config { variant: Variant::Simplified, ..Config::default() }
    }

    #[test]
    fn simplified_bucket_limits_the_rate_and_p99_drives_it() {
        let mut s = Seda::new(&simplified(), vec![1000.0], 1);
        assert_eq!(s.admit(0, 0, 0), Admit::Send, "a full bucket");
        assert_eq!(s.admit(0, 1, 500_000), Admit::Drop, "half a token after 0.5 ms at 1000/s");
        assert_eq!(s.admit(0, 2, 1_000_000), Admit::Send);
        s.observe(0, 2, 900_000, 1_000_000);
        assert_eq!(s.mean_rate(), 1010.0, "p99 100 µs within 200 µs: + adj_i");
        s.observe(0, 3, 1_200_000, 1_500_000);
        assert_eq!(s.mean_rate(), 1010.0, "mid-interval: unchanged");
        s.observe(0, 4, 1_700_001, 2_000_001);
        assert!((s.mean_rate() - 1010.0 / 1.04).abs() < 1e-9, "p99 300 µs: ÷ adj_d");
    }

    #[test]
    fn artifact_starts_slow_and_empty_and_lets_requests_wait_for_a_token() {
        let cfg = Config::default();
        let s = Seda::new(&cfg, vec![1e6; 50], 7);
        let r = s.mean_rate();
        assert!((2.0..=4.0).contains(&r) && s.sessions.iter().any(|x| x.rate != s.sessions[0].rate), "rates drawn in [2, 4]: {r}");
        // At 4 tokens/s a token arrives every 250 ms: a request waits, then expires after 100 µs.
        let mut s = Seda::new(&Config { initial_rps: Some(4.0), ..cfg.clone() }, vec![0.0], 7);
        assert_eq!(s.admit(0, 10, 0), Admit::Wait, "the bucket starts empty");
        let at = s.next_release(0).unwrap();
        assert_eq!(at, 100_001, "the oldest request's deadline comes before the next token");
        assert_eq!(s.next_release(0), None, "one release scheduled at a time");
        let (mut sent, mut dropped) = (vec![], vec![]);
        s.release(0, at, &mut sent, &mut dropped);
        assert_eq!((sent.len(), dropped.as_slice(), s.expired), (0, &[10][..], 1));
        // A session whose token arrives within the wait sends the waiting request then.
        let mut s = Seda::new(&Config { initial_rps: Some(100_000.0), ..cfg.clone() }, vec![0.0], 7);
        assert_eq!(s.admit(0, 11, 0), Admit::Wait);
        let at = s.next_release(0).unwrap();
        assert_eq!(at, 10_000, "a token every 10 µs at 100 k/s");
        s.release(0, at, &mut sent, &mut dropped);
        assert_eq!(sent, [11]);
        // Its latency sample starts when it was sent: 50 µs, not 60.
        s.observe(0, 11, 0, 60_000);
        assert_eq!(s.sessions[0].samples, [50_000]);
        // The queue holds 16 requests; the 17th is dropped at once.
        let mut s = Seda::new(&Config { initial_rps: Some(4.0), ..cfg }, vec![0.0], 7);
        let got: Vec<Admit> = (0..17).map(|i| s.admit(0, i, 0)).collect();
        assert_eq!(got[15], Admit::Wait);
        assert_eq!(got[16], Admit::Drop);
    }

    #[test]
    fn artifact_rate_follows_the_p99_ewma_with_a_dead_band() {
        let cfg = Config { initial_rps: Some(1000.0), target_us: 100.0, adj_i: 10.0, adj_d: 1.1, ..Config::default() };
        let mut s = Seda::new(&cfg, vec![0.0], 1);
        // 100 samples of 10 µs: EWMA 0.3 × 10 = 3 µs, err = −0.97 < −0.5: + (0.97 − 0.1) × 10.
        for i in 0..100 {
            s.observe(0, i, 0, 10_000);
        }
        assert!((s.mean_rate() - (1000.0 + 8.7)).abs() < 1e-6, "{}", s.mean_rate());
        // 100 samples of 300 µs: EWMA 0.7 × 3 + 0.3 × 300 = 92.1 µs: err = −0.079, in the band.
        for i in 0..100 {
            s.observe(0, i, 0, 300_000);
        }
        assert!((s.mean_rate() - 1008.7).abs() < 1e-6, "dead band: {}", s.mean_rate());
        // Again: EWMA 0.7 × 92.1 + 90 = 154.47 µs > 100: ÷ 1.1.
        for i in 0..100 {
            s.observe(0, i, 0, 300_000);
        }
        assert!((s.mean_rate() - 1008.7 / 1.1).abs() < 1e-6, "{}", s.mean_rate());
    }

    #[test]
    fn bad_parameters_name_their_field() {
        assert_eq!(Config { adj_d: 1.0, ..Config::default() }.validate("policy.overload").unwrap_err().field, "policy.overload.adj_d");
        assert_eq!(Config { bucket: Some(0.5), ..Config::default() }.validate("p").unwrap_err().field, "p.bucket");
        assert_eq!(Config { alpha: 1.0, ..Config::default() }.validate("p").unwrap_err().field, "p.alpha");
        assert_eq!(Config { client_wait_us: -1.0, ..Config::default() }.validate("p").unwrap_err().field, "p.client_wait_us");
        assert_eq!(Config { min_rps: Some(5.0), ..Config::default() }.validate("p").unwrap_err().field, "p.initial_max_rps");
        assert!(Config::default().validate("p").is_ok());
    }
}

impl super::OverloadConfig for Config {
    fn validate(&self, field: &str) -> Result<(), ScenarioError> {
        Config::validate(self, field)
    }
    /// SEDA limits rates at the clients (the driver's [`Seda`]): the server runs no credits.
    fn build(&self, _env: &crate::env::OverloadEnv) -> Option<Box<dyn super::CreditController>> {
        None
    }
}
