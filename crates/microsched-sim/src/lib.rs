//! microsched-sim: a deterministic discrete-event simulator of a microsecond-scale server.
//!
//! `run(&loaded, seed)` simulates one scenario; the same scenario and seed give bit-identical
//! results (apart from the wall-clock fields of `summary.sim`).

mod app;
mod dispatcher;
mod events;
mod node;
mod requests;
mod result;
mod server;
mod sim;
mod trace;

use std::path::Path;

pub use microsched_core::scenario::{Format, Loaded, Scenario};
pub use microsched_core::ScenarioError;
pub use result::{RequestLog, SimResult, TimeSeries};

/// Simulates `loaded` with `seed` (the scenario's own seed if `None`).
pub fn run(loaded: &Loaded, seed: Option<u64>) -> Result<SimResult, ScenarioError> {
    let seed = seed.unwrap_or(loaded.scenario.seed);
    let mut result = sim::Sim::new(loaded, seed)?.run();
    result.summary.seed = seed;
    Ok(result)
}

/// How a run is carried out: `force` runs a scenario whose cost estimate is over the limits
/// ([`microsched_core::scenario::Estimate::check`]); `check(now, end)` is called every few
/// milliseconds of wall-clock time (every [`CHECK_EVERY`] events) and stops the run, keeping
/// what was simulated so far, when it returns false.
pub fn run_with(
    loaded: &Loaded,
    seed: Option<u64>,
    force: bool,
    check: &mut dyn FnMut(microsched_core::Nanos, microsched_core::Nanos) -> bool,
) -> Result<SimResult, ScenarioError> {
    loaded.check_resources(force)?;
    let seed = seed.unwrap_or(loaded.scenario.seed);
    let mut result = sim::Sim::new(loaded, seed)?.run_checked(check);
    result.summary.seed = seed;
    Ok(result)
}

pub use sim::CHECK_EVERY;

/// What to record of a run's timeline (`--trace`): the window in simulated ms from the run's
/// start (None: the first [`DEFAULT_WINDOW_MS`] of the measured window) and the size cap.
#[derive(Debug, Clone, Copy)]
pub struct TraceRequest {
    pub window_ms: Option<(f64, f64)>,
    pub max_events: usize,
}

pub use microsched_core::trace::{Trace, DEFAULT_MAX_EVENTS, DEFAULT_WINDOW_MS};

/// The window of a traced run, in ns: the requested one (which must start before the run ends)
/// or the default.
pub fn trace_window(loaded: &Loaded, req: &TraceRequest) -> Result<(microsched_core::Nanos, microsched_core::Nanos), ScenarioError> {
    let sc = &loaded.scenario;
    let run_ms = sc.warmup_ms + sc.duration_ms;
    let (a, b) = req.window_ms.unwrap_or((sc.warmup_ms, sc.warmup_ms + DEFAULT_WINDOW_MS));
    if a >= run_ms {
        return Err(ScenarioError::new(
            "--trace-window",
            format!("starts at {a} ms, at or after the run's end at {run_ms} ms (warmup_ms + duration_ms); use START_MS below {run_ms}"),
        ));
    }
    if req.max_events == 0 {
        return Err(ScenarioError::new("--trace-max-events", "0 is not allowed: use 1 or more"));
    }
    let ns = |ms: f64| (ms * 1e6).round() as microsched_core::Nanos;
    Ok((ns(a), ns(b.min(run_ms))))
}

/// As [`run_with`], also recording the run's timeline when `trace` is given (results are the
/// same as untraced).
pub fn run_traced(
    loaded: &Loaded,
    seed: Option<u64>,
    force: bool,
    check: &mut dyn FnMut(microsched_core::Nanos, microsched_core::Nanos) -> bool,
    trace: Option<&TraceRequest>,
) -> Result<(SimResult, Option<Trace>), ScenarioError> {
    loaded.check_resources(force)?;
    let window = trace.map(|t| trace_window(loaded, t)).transpose()?;
    let seed = seed.unwrap_or(loaded.scenario.seed);
    let (mut result, trace) = match (trace, window) {
        (Some(t), Some((a, b))) => sim::Sim::traced(loaded, seed, Trace::new(a, b, t.max_events))?.run_recorded(check),
        _ => sim::Sim::new(loaded, seed)?.run_recorded(check),
    };
    result.summary.seed = seed;
    Ok((result, trace))
}

/// Loads a scenario file (TOML) with overrides.
pub fn load_file(path: &Path, overrides: &[String]) -> Result<Loaded, ScenarioError> {
    let text = microsched_core::files::read_regular(path, "scenario", microsched_core::files::MAX_SCENARIO_BYTES)?;
    let base = path.parent().unwrap_or(Path::new("."));
    Scenario::load(&text, Format::Toml, base, overrides)
}
