#![allow(dead_code)]
use std::path::Path;

use microsched_sim::{Format, Loaded, Scenario, SimResult};

pub fn load(toml: &str, overrides: &[&str]) -> Loaded {
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    Scenario::load(toml, Format::Toml, Path::new("."), &o).expect("valid scenario")
}

pub fn run(toml: &str, overrides: &[&str], seed: u64) -> SimResult {
    microsched_sim::run(&load(toml, overrides), Some(seed)).expect("runs")
}

/// The Breakwater tests' scenario: 16 static cores, exponential 10 µs service (capacity 1.6 M
/// requests/s), RTT 10 µs, 100 sessions with Breakwater's client defaults (queue 16, timeout
/// 10 µs), offered 1.5× capacity, Breakwater target 80 µs and AQM threshold 160 µs (its
/// recommended pair for 10 µs requests). A file that needs a variant states it as overrides
/// (`run_with`), so that the scenario is written once.
pub const BREAKWATER_16: &str = r#"
    duration_ms = 20
    warmup_ms = 5
    [server]
    max_cores = 16
    [network]
    rtt_us = 10
    [clients]
    sessions = 100
    [load]
    fraction = 1.5
    [[workload.types]]
    name = "exp10"
    service = { dist = "exponential", mean_us = 10 }
    [policy.overload]
    kind = "breakwater"
    target_us = 80
    drop_us = 160
"#;

/// `run` with a file's own variant of a scenario (`variant`, overrides) and then the test's
/// `overrides`, which win where both set a key.
pub fn run_with(toml: &str, variant: &[&str], overrides: &[&str], seed: u64) -> SimResult {
    let all: Vec<&str> = variant.iter().chain(overrides).copied().collect();
    run(toml, &all, seed)
}

/// The Memcached-like Primary of experiments/harvest/base.toml, scaled down for tests: 8 cores
/// behind a central queue, 0.5 s, lognormal 15 µs service, RTT 40 µs, 1 ms ON/OFF bursts of
/// `duty` with `off_ratio` of the mean rate between them. `server` adds keys to `[server]`.
pub fn harvest_primary(rps: f64, duty: f64, off_ratio: f64, server: &str, allocator: &str) -> String {
    format!(
        r#"
        duration_ms = 500
        warmup_ms = 50
        [server]
        max_cores = 8
        queue = "central"
        {server}
        [network]
        rtt_us = 40
        [load]
        rps = {rps}
        on_off = {{ period_ms = 1, duty = {duty}, off_ratio = {off_ratio} }}
        [[workload.types]]
        name = "memcached"
        service = {{ dist = "lognormal", mean_us = 15, sigma = 0.5 }}
        [policy.allocator]
        {allocator}
    "#
    )
}

/// Batch means: splits `xs` (in time order) into `k` consecutive batches and returns the grand
/// mean and the standard error of the mean estimated from the spread of the batch means. Batches
/// long compared with the queue's correlation time make the batch means nearly independent, so
/// the standard error accounts for autocorrelation that a naive one would ignore.
pub fn batch_means(xs: &[f64], k: usize) -> (f64, f64) {
    let n = xs.len() / k;
    let means: Vec<f64> = (0..k).map(|b| xs[b * n..(b + 1) * n].iter().sum::<f64>() / n as f64).collect();
    let m = means.iter().sum::<f64>() / k as f64;
    let var = means.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (k - 1) as f64;
    (m, (var / k as f64).sqrt())
}

/// Queueing delays (ns) of requests created in the measured window, in creation order.
pub fn window_qdelays(r: &SimResult, warmup_ns: u64) -> Vec<f64> {
    let log = r.requests.as_ref().expect("record_requests = true");
    let mut rows: Vec<(u64, f64)> = (0..log.id.len())
        .filter(|&i| log.created_ns[i] >= warmup_ns && log.dropped[i] == 0)
        .map(|i| (log.id[i], (log.start_ns[i] - log.server_arrival_ns[i]) as f64))
        .collect();
    rows.sort_by_key(|r| r.0);
    rows.into_iter().map(|r| r.1).collect()
}

/// Server sojourn times (server arrival to done, ns) of completed requests created in the
/// measured window, in creation order, with their service times.
pub fn window_sojourns(r: &SimResult, warmup_ns: u64) -> Vec<(f64, f64)> {
    let log = r.requests.as_ref().expect("record_requests = true");
    let mut rows: Vec<(u64, f64, f64)> = (0..log.id.len())
        .filter(|&i| log.created_ns[i] >= warmup_ns && log.dropped[i] == 0)
        .map(|i| (log.id[i], (log.done_ns[i] - log.server_arrival_ns[i]) as f64, log.service_ns[i] as f64))
        .collect();
    rows.sort_by_key(|r| r.0);
    rows.into_iter().map(|r| (r.1, r.2)).collect()
}
