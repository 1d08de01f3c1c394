//! Memory of client sessions: runs Breakwater (16 cores, exponential 10 µs at load 0.9, the
//! scale target of issue 11) with N sessions and prints the peak heap the engine asked for and
//! the process's peak resident memory (what the sessions really occupy: state never touched is
//! never backed by memory).
//!
//! `cargo run --release -p microsched-sim --example session_memory -- SESSIONS [DURATION_MS]`
//! (run each size in its own process: the peak RSS of a process only grows).

use std::sync::atomic::Ordering;

#[path = "../tests/common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{Counting, PEAK};

#[global_allocator]
static A: Counting = Counting;

fn vm_hwm_kb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sessions: u32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let duration_ms: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100.0);
    let text = format!(
        "name = \"sessions\"\nduration_ms = {duration_ms}\nwarmup_ms = 10\n[server]\nmax_cores = 16\n[network]\nrtt_us = 10\n\
         [clients]\nsessions = {sessions}\n[load]\nfraction = 0.9\n\
         [[workload.types]]\nname = \"exp10\"\nservice = {{ dist = \"exponential\", mean_us = 10 }}\n\
         [policy.allocator]\nkind = \"static\"\n[policy.overload]\nkind = \"breakwater\"\n"
    );
    let loaded = microsched_sim::Scenario::load(&text, microsched_sim::Format::Toml, std::path::Path::new("."), &[])
        .expect("valid scenario");
    let r = microsched_sim::run(&loaded, None).expect("runs");
    println!(
        "sessions={sessions} duration_ms={duration_ms} generated={} events={} peak_heap_MB={:.1} peak_rss_MB={:.1} wall_s={:.2} p99_us={}",
        r.summary.requests.generated,
        r.summary.sim.events,
        PEAK.load(Ordering::Relaxed) as f64 / 1e6,
        vm_hwm_kb() as f64 / 1e3,
        r.summary.sim.wall_s,
        r.summary.latency_us.p99,
    );
}
