//! Runs a scenario on the real runtime in one process (server and load generator as threads)
//! and prints the merged summary as JSON:
//! `cargo run --release -p microsched-runtime --example real -- SCENARIO.toml [--set KEY=VALUE]...`

use std::path::Path;
use std::time::Duration;

use microsched_core::scenario::{Format, Scenario};
use microsched_runtime::{loadgen, merge, LoadgenOpts, ServeOpts, Server};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args.first().expect("usage: real SCENARIO.toml [--set K=V]...");
    let overrides: Vec<String> = args.windows(2).filter(|w| w[0] == "--set").map(|w| w[1].clone()).collect();
    let text = std::fs::read_to_string(path).expect("read scenario");
    let base = Path::new(path).parent().unwrap_or(Path::new("."));
    let loaded = Scenario::load(&text, Format::Toml, base, &overrides).unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(
        &loaded,
        ServeOpts { addr: "127.0.0.1:0".parse().unwrap(), allow_remote: false, duration: Some(Duration::from_secs(600)), once: true, ..Default::default() },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let opts = LoadgenOpts { addr: server.addr(), more_addrs: Vec::new(), allow_remote: false, seed: None };
    let lg = loadgen::run(&loaded, &opts, &|| false).unwrap_or_else(|e| panic!("{e}"));
    let rep = server.wait(|| false);
    println!("{}", serde_json::to_string_pretty(&merge::merge(&lg, &rep)).unwrap());
}
