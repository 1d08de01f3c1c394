//! What the machine can do: every time value must fit the simulator's integer nanoseconds with
//! room to add two of them (no silent saturation), the time series has a bounded number of rows
//! (the sampling interval is coarsened past [`MAX_SAMPLES`]), and a run's cost is estimated
//! before it starts (requests, events, sessions, memory) so that an impossible run is a clear
//! error naming the field at fault, not an out-of-memory abort or a run that never ends. The
//! estimate can be overridden (`--force`, `force=True`); the time limits cannot.

use serde_json::Value;

use super::{Loaded, OverloadCfg, Scenario};
use crate::error::ScenarioError;
use crate::time::{ms, us, Nanos};

/// The longest time any value may stand for (2^60 ns ≈ 36.5 years): the sum of any two times
/// (an event time plus a delay) still fits a u64.
pub const MAX_NS: Nanos = 1 << 60;

/// Most rows of a run's time series (2^18 = 262 144, ≈ 36 MB of columns): a longer run is
/// sampled at the coarser interval ⌈run length / MAX_SAMPLES⌉ instead, so that memory does not
/// grow with run length.
pub const MAX_SAMPLES: u64 = 1 << 18;

/// Estimated events above which a run is refused without `force` (≈ half an hour of
/// simulation at the engine's typical ~5 M events/s).
pub const MAX_EVENTS: f64 = 1e10;

/// A mean service time below this (µs) is named as the cause of a run too large when the load
/// is a fraction of the capacity it sets (no microsecond-scale workload is that short).
const TINY_SERVICE_US: f64 = 0.05;

/// Estimated memory above which a run is refused without `force`.
pub const MAX_MEMORY_BYTES: f64 = 8.0 * (1u64 << 30) as f64;

/// Typical engine speed, only to turn an event count into a wall-clock estimate.
const EVENTS_PER_S: f64 = 5e6;
/// Events per request (arrival, network, core slices, response): an estimate.
const EVENTS_PER_REQUEST: f64 = 6.0;
/// Bytes per client session per replica (client state and the node's per-session state).
const SESSION_BYTES: f64 = 96.0;
/// Bytes per live request (its slot in the request table and queue entries).
const REQUEST_BYTES: f64 = 128.0;
/// Bytes per kept per-request record (`metrics.record_requests`).
const RECORD_BYTES: f64 = 64.0;
/// Columns of the time series, 8 bytes each.
const SERIES_COLUMNS: f64 = 17.0;

/// Refuses any number under a key with a time unit (`_ns`, `_us`, `_ms`) that stands for more
/// than [`MAX_NS`], and a run (warm-up + duration) longer than that.
pub(super) fn check_times(v: &Value, path: &str) -> Result<(), ScenarioError> {
    let at = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let unit = [("_ns", 1.0), ("_us", 1e3), ("_ms", 1e6)].into_iter().find(|(s, _)| k.ends_with(s));
                if let (Some((_, scale)), Some(x)) = (unit, v.as_f64()) {
                    if x.abs() * scale > MAX_NS as f64 {
                        return Err(ScenarioError::new(
                            at(k),
                            format!(
                                "{v} is not allowed: at most {} ({} ns, ≈ 36 years of simulated time)",
                                MAX_NS as f64 / scale,
                                MAX_NS
                            ),
                        ));
                    }
                }
                check_times(v, &at(k))?;
            }
            if path.is_empty() {
                let total = m.get("warmup_ms").and_then(Value::as_f64).unwrap_or(0.0)
                    + m.get("duration_ms").and_then(Value::as_f64).unwrap_or(0.0);
                if total * 1e6 > MAX_NS as f64 {
                    return Err(ScenarioError::new(
                        "duration_ms",
                        format!("warmup_ms + duration_ms = {total} ms is more than the {} ms a run may last", MAX_NS / 1_000_000),
                    ));
                }
            }
            Ok(())
        }
        Value::Array(a) => a.iter().enumerate().try_for_each(|(i, v)| check_times(v, &format!("{path}[{i}]"))),
        _ => Ok(()),
    }
}

/// The time-series interval a run uses: the scenario's, or coarser if the run would otherwise
/// record more than [`MAX_SAMPLES`] rows.
pub fn sample_interval_ns(sc: &Scenario) -> Nanos {
    let end = ms(sc.warmup_ms) + ms(sc.duration_ms);
    us(sc.metrics.sample_interval_us).max(1).max(end.div_ceil(MAX_SAMPLES))
}

/// What a run will cost, estimated before it starts.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Estimate {
    /// Client sessions over every application.
    pub sessions: u64,
    /// Requests generated over the whole run (warm-up included).
    pub requests: f64,
    /// Requests generated in the measured window.
    pub measured_requests: f64,
    /// Engine events.
    pub events: f64,
    /// Rows of the time series, and the interval that gives them.
    pub samples: u64,
    pub sample_interval_ns: Nanos,
    /// Peak memory, bytes.
    pub memory_bytes: f64,
    /// Wall-clock seconds at a typical engine speed.
    pub wall_s: f64,
    /// Runs that will produce nothing useful, said before they start.
    pub warnings: Vec<String>,
    /// The field most responsible for the cost (what an error names).
    #[serde(skip)]
    culprit: String,
}

impl Estimate {
    /// An error if the estimate exceeds [`MAX_EVENTS`] or [`MAX_MEMORY_BYTES`].
    pub fn check(&self) -> Result<(), ScenarioError> {
        if self.events <= MAX_EVENTS && self.memory_bytes <= MAX_MEMORY_BYTES {
            return Ok(());
        }
        Err(ScenarioError::new(
            &self.culprit,
            format!(
                "this run is too large: ~{:.3e} requests, ~{:.3e} events (~{}) and ~{} of memory (limits: {:.0e} events, {}); \
                 shorten duration_ms/warmup_ms, lower the load or the sessions, or pass --force (force=True) to run it anyway",
                self.requests,
                self.events,
                human_time(self.wall_s),
                human_bytes(self.memory_bytes),
                MAX_EVENTS,
                human_bytes(MAX_MEMORY_BYTES),
            ),
        ))
    }
}

pub fn human_time(s: f64) -> String {
    match s {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s if s < 172_800.0 => format!("{:.0} h", s / 3600.0),
        s => format!("{:.3e} days", s / 86400.0),
    }
}

pub fn human_bytes(b: f64) -> String {
    let gib = (1u64 << 30) as f64;
    if b < gib {
        format!("{:.0} MB", b / 1e6)
    } else {
        format!("{:.3} GiB", b / gib)
    }
}

impl Loaded {
    /// Estimates what running this scenario costs (see [`Estimate`]).
    pub fn estimate(&self) -> Result<Estimate, ScenarioError> {
        let sc = &self.scenario;
        let (warmup, end) = (ms(sc.warmup_ms) as f64, (ms(sc.warmup_ms) + ms(sc.duration_ms)) as f64);
        let replicas = sc.node_count().max(1) as f64;
        let credit = !matches!(sc.policy.overload, OverloadCfg::None);
        let mut warnings = Vec::new();
        let (mut sessions, mut requests, mut measured, mut backlog) = (0u64, 0.0, 0.0, 0.0f64);
        // (requests, field) of the application that generates the most.
        let mut busiest = (0.0, String::from("load"));
        for app in sc.apps() {
            let capacity = sc.app_capacity_rps(&app, &self.base_dir)?;
            let steps = crate::workload::load_steps_for(app.load, capacity);
            // ∫ rate dt over [a, b) for piecewise-constant steps (start ns, requests/s).
            let integral = |a: f64, b: f64| -> f64 {
                steps
                    .iter()
                    .enumerate()
                    .map(|(i, &(t, r))| {
                        let next = steps.get(i + 1).map_or(f64::INFINITY, |s| s.0);
                        let (lo, hi) = (t.max(a), next.min(b));
                        if hi > lo { r * (hi - lo) / 1e9 } else { 0.0 }
                    })
                    .sum()
            };
            let n = integral(0.0, end);
            requests += n;
            measured += integral(warmup, end);
            sessions += app.clients.sessions as u64;
            let peak = steps.iter().map(|s| s.1).fold(0.0, f64::max);
            backlog += if credit {
                (app.clients.sessions as f64 * app.clients.queue_capacity as f64 * replicas).min(n)
            } else {
                // Without admission control, what the cores cannot serve waits in the server.
                ((peak - capacity).max(0.0) * end / 1e9).min(n)
            };
            let mean_us = sc.app_mean_service_us(&app, &self.base_dir)?;
            if n > busiest.0 {
                let which = if !app.load.schedule.is_empty() && app.load.fraction.unwrap_or(0.0) == 0.0 && app.load.rps.unwrap_or(0.0) == 0.0 {
                    "load.schedule"
                } else if app.load.rps.is_some() {
                    "load.rps"
                } else {
                    "load.fraction"
                };
                // A load given as a fraction of the capacity is only as large as the capacity: a
                // service time of a few ns is what makes it huge, not the fraction.
                let field = if which == "load.fraction" && mean_us < TINY_SERVICE_US {
                    format!("{}workload.types", app.field)
                } else {
                    format!("{}{which}", app.field)
                };
                busiest = (n, field);
            }
            if mean_us * 1e3 >= end {
                warnings.push(format!(
                    "{}workload: a mean request ({mean_us} µs of work) takes longer than the whole run ({} ms): few or no requests will complete",
                    app.field,
                    end / 1e6
                ));
            }
        }
        if let Some(w) = crate::overload::breakwater::absolute_alpha_warning(&sc.policy.overload, sessions, sc.server.max_cores) {
            warnings.push(w);
        }
        warnings.extend(crate::sched::warnings(sc));
        let interval = sample_interval_ns(sc);
        let samples = (end as u64).div_ceil(interval);
        if interval > us(sc.metrics.sample_interval_us).max(1) {
            warnings.push(format!(
                "metrics.sample_interval_us: {} µs would give more than {MAX_SAMPLES} time-series rows; sampling every {} µs instead",
                sc.metrics.sample_interval_us,
                interval as f64 / 1e3
            ));
        }
        // Periodic policy events: at most one per microsecond per node, a generous bound.
        let timers = end / 1e3 * replicas;
        let events = requests * EVENTS_PER_REQUEST + timers + samples as f64;
        let record = if sc.metrics.record_requests { measured * RECORD_BYTES } else { 0.0 };
        let session_mem = sessions as f64 * replicas * SESSION_BYTES;
        let memory = session_mem + backlog * REQUEST_BYTES + record + samples as f64 * SERIES_COLUMNS * 8.0;
        // The field behind the limit that is exceeded the most: memory (sessions, backlog) or
        // events (requests, periodic timers over a long run).
        let memory_over = memory / MAX_MEMORY_BYTES >= events / MAX_EVENTS;
        let culprit = if memory_over && session_mem > memory / 2.0 {
            if sc.clients.sessions as u64 * 2 >= sessions { "clients.sessions".into() } else { "applications".into() }
        } else if timers > events / 2.0 || end > 1e12 {
            if warmup > end - warmup { "warmup_ms".into() } else { "duration_ms".into() }
        } else {
            busiest.1
        };
        let rtt = us(sc.network.rtt_us) as f64;
        if rtt >= end {
            warnings.push(format!(
                "network.rtt_us: a round trip ({} ms) is longer than the whole run ({} ms): no request can complete",
                rtt / 1e6,
                end / 1e6
            ));
        } else if rtt + sc.network.jitter_us * 1e3 >= end {
            // Each one-way trip adds a uniform [0, jitter] delay: a mean round trip of rtt + jitter.
            warnings.push(format!(
                "network.jitter_us: a mean round trip with the jitter ({} ms) is longer than the whole run ({} ms): few or no requests can complete",
                (rtt + sc.network.jitter_us * 1e3) / 1e6,
                end / 1e6
            ));
        } else if requests == 0.0 {
            warnings.push("load: the offered load is 0 for the whole run: no request is generated".into());
        } else if measured < 1.0 {
            warnings.push(format!(
                "duration_ms: the measured window expects {measured:.2} requests: its statistics will be empty or meaningless"
            ));
        }
        Ok(Estimate {
            sessions,
            requests,
            measured_requests: measured,
            events,
            samples,
            sample_interval_ns: interval,
            memory_bytes: memory,
            wall_s: events / EVENTS_PER_S,
            warnings,
            culprit,
        })
    }

    /// The estimate, an error if it is too large for this machine unless `force`.
    pub fn check_resources(&self, force: bool) -> Result<Estimate, ScenarioError> {
        let e = self.estimate()?;
        if !force {
            e.check()?;
        }
        Ok(e)
    }
}
