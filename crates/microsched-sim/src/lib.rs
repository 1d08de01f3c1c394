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

/// Loads a scenario file (TOML) with overrides.
pub fn load_file(path: &Path, overrides: &[String]) -> Result<Loaded, ScenarioError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ScenarioError::new("scenario", format!("cannot read `{}`: {e}", path.display())))?;
    let base = path.parent().unwrap_or(Path::new("."));
    Scenario::load(&text, Format::Toml, base, overrides)
}
