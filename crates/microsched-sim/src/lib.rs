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

/// Loads a scenario file (TOML) with overrides.
pub fn load_file(path: &Path, overrides: &[String]) -> Result<Loaded, ScenarioError> {
    let text = microsched_core::files::read_regular(path, "scenario", microsched_core::files::MAX_SCENARIO_BYTES)?;
    let base = path.parent().unwrap_or(Path::new("."));
    Scenario::load(&text, Format::Toml, base, overrides)
}
