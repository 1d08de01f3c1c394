//! Configuration checks shared by the server and the load generator: where they may bind or
//! send (loopback unless told otherwise), and what the runtime can run.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use microsched_core::scenario::Scenario;
use microsched_core::ScenarioError;

/// Most worker threads the runtime starts (one thread per "core").
pub const MAX_WORKERS: u32 = 64;
/// Largest service time a request may ask for; above it the server refuses the request
/// (`bad_request`) and the load generator refuses the scenario.
pub const MAX_SERVICE_NS: u64 = 100_000_000;
/// Highest offered load the load generator accepts.
pub const MAX_RPS: f64 = 5e6;

/// A bad configuration; the message names what is wrong and what is allowed.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl From<ScenarioError> for ConfigError {
    fn from(e: ScenarioError) -> Self {
        ConfigError(e.to_string())
    }
}

/// Parses `HOST:PORT` (a name resolves to its first address).
pub fn parse_addr(text: &str, what: &str) -> Result<SocketAddr, ConfigError> {
    if let Ok(a) = text.parse::<SocketAddr>() {
        return Ok(a);
    }
    text.to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .ok_or_else(|| ConfigError(format!("{what}: `{text}` is not an address: use HOST:PORT, e.g. 127.0.0.1:7878")))
}

/// Refuses a non-loopback address unless `allow_remote`.
pub fn check_loopback(addr: SocketAddr, allow_remote: bool, what: &str) -> Result<(), ConfigError> {
    let lo = match addr.ip() {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback(),
    };
    if lo || allow_remote {
        Ok(())
    } else {
        Err(ConfigError(format!(
            "{what}: {addr} is not a loopback address: the runtime uses 127.0.0.0/8 or ::1 unless --allow-remote is given"
        )))
    }
}

/// What the real runtime additionally refuses in a (valid) scenario.
pub fn check_scenario(sc: &Scenario) -> Result<(), ConfigError> {
    if sc.server.max_cores > MAX_WORKERS {
        return Err(ConfigError(format!(
            "server.max_cores: {} is not allowed for the real runtime: use 1..={MAX_WORKERS} (one worker thread per core)",
            sc.server.max_cores
        )));
    }
    if sc.clients.sessions > 65_536 {
        return Err(ConfigError(format!(
            "clients.sessions: {} is not allowed for the real runtime: use 1..=65536",
            sc.clients.sessions
        )));
    }
    Ok(())
}
