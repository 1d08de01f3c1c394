//! How long a Primary thread woken on a core the Secondary is running on waits before it runs:
//! a CPU-bound thread (CPUBully's role) spins on the last CPU; a second thread pinned there
//! sleeps and is woken from another CPU at random gaps of 1 to 5 ms; the wait is from the wake
//! call to the woken thread's first instruction (CFS wake-up preemption, an IPI and a context
//! switch). For comparison, the same wake-up on an idle core. HarvestContainers' model charges a
//! Primary the Secondary's eviction (`mechanism.evict_us`, 30 µs, the paper's two-phase
//! affinity); this measures whether CFS would hand the core over sooner on its own.
//!
//!     cargo run --release -p microsched-runtime --example wake_on_busy_core [-- --json]

#[path = "common/busy_core.rs"]
mod busy_core;

use busy_core::{pin, spinner};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAKES: usize = 300;

fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Wake-up waits, µs, of a thread on `cpu` woken from `from`, with or without a spinner there.
fn measure(cpu: usize, from: usize, busy: bool) -> Vec<f64> {
    let stop = Arc::new(AtomicBool::new(false));
    let spinner = busy.then(|| spinner(cpu, stop.clone()));
    let base = Instant::now();
    let woken_at = Arc::new(AtomicU64::new(0));
    let sleeper = {
        let (stop, woken_at) = (stop.clone(), woken_at.clone());
        std::thread::spawn(move || {
            pin(cpu);
            while !stop.load(Ordering::Relaxed) {
                std::thread::park();
                woken_at.store(base.elapsed().as_nanos() as u64, Ordering::Release);
            }
        })
    };
    pin(from);
    let mut waits = Vec::with_capacity(WAKES);
    let mut seed = 0x9e3779b97f4a7c15u64;
    std::thread::sleep(Duration::from_millis(20));
    for _ in 0..WAKES {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_micros(1000 + seed % 4000));
        woken_at.store(0, Ordering::Release);
        let t0 = base.elapsed().as_nanos() as u64;
        sleeper.thread().unpark();
        let deadline = Instant::now() + Duration::from_millis(200);
        let t1 = loop {
            let t = woken_at.load(Ordering::Acquire);
            if t != 0 || Instant::now() > deadline {
                break t;
            }
            std::hint::spin_loop();
        };
        if t1 != 0 {
            waits.push(t1.saturating_sub(t0) as f64 / 1e3);
        }
    }
    stop.store(true, Ordering::Relaxed);
    sleeper.thread().unpark();
    sleeper.join().ok();
    if let Some(s) = spinner {
        s.join().ok();
    }
    waits
}

fn main() {
    let json = std::env::args().any(|a| a == "--json");
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    if cpus < 2 {
        eprintln!("wake_on_busy_core: needs 2 CPUs (one to wake from), this machine has {cpus}");
        std::process::exit(2);
    }
    let (cpu, from) = (cpus - 1, 0);
    let mut rows = vec![];
    for busy in [false, true] {
        let mut w = measure(cpu, from, busy);
        let n = w.len();
        rows.push((busy, n, percentile(&mut w, 0.5), percentile(&mut w, 0.9), percentile(&mut w, 0.99)));
    }
    if json {
        let cells: Vec<String> = rows
            .iter()
            .map(|(busy, n, p50, p90, p99)| {
                format!("{{\"core\": \"{}\", \"wakes\": {n}, \"p50_us\": {p50:.2}, \"p90_us\": {p90:.2}, \"p99_us\": {p99:.2}}}",
                    if *busy { "running_cpu_bound" } else { "idle" })
            })
            .collect();
        println!("[{}]", cells.join(", "));
    } else {
        println!("wake-up wait on CPU {cpu}, woken from CPU {from} ({WAKES} wakes each):");
        for (busy, n, p50, p90, p99) in rows {
            let what = if busy { "running a CPU-bound thread" } else { "idle" };
            println!("  core {what:28} p50 {p50:7.2} µs  p90 {p90:7.2} µs  p99 {p99:7.2} µs  ({n} wakes)");
        }
    }
}
