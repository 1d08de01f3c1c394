//! How the Linux scheduler shares a core between a Primary thread running a long request and the
//! Secondary's CPU-bound thread (CPUBully's role) that the core was lent to: both pinned to the
//! last CPU at the same weight (the artifact's pods set no CPU requests, so both are Kubernetes
//! BestEffort pods with equal cpu.shares). The Primary sleeps 2 to 5 ms, then computes for W µs of
//! its own CPU time; a pause of more than 150 µs between two of its clock reads is a turn of the
//! other thread. Reported: per W, the wall time over W (the stretch); the Primary's first turn
//! after a wake-up (from computes of 16 ms, longer than any first turn), its later turns, and the
//! other thread's turns (min, p10, median, p90, max). The same on an idle core is the control
//! (other processes' turns only). HarvestContainers' `mechanism.timeshare` defaults come from
//! this. Run it where nothing else competes for the last CPU, or in an autogroup of its own at a
//! high priority: `setsid bash -c 'echo -20 > /proc/$$/autogroup; exec nice -n -20 CMD'` (root).
//!
//!     cargo run --release -p microsched-runtime --example timeshare_on_busy_core [-- --json]

#[path = "common/busy_core.rs"]
mod busy_core;

use busy_core::{pin, spinner};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WORKS_US: [u64; 7] = [100, 300, 500, 1000, 2000, 4000, 8000];
const REPS: usize = 15;
/// Longer than any first turn, so that every first turn is seen whole (a shorter request that
/// ends inside its first turn would hide how long that turn would have been).
const WHOLE_TURNS_US: u64 = 16_000;
const WHOLE_TURN_REPS: usize = 60;
/// A pause between two clock reads longer than this is time the thread did not run.
const GAP_NS: u64 = 20_000;
/// A gap this long is a slice of the other thread, not an interrupt or a hypervisor exit.
const SLICE_GAP_NS: u64 = 150_000;

/// (n, min, p10, median, p90, max) of a sample, µs.
fn spread(mut v: Vec<f64>) -> (usize, [f64; 5]) {
    if v.is_empty() {
        return (0, [f64::NAN; 5]);
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let q = |f: f64| v[((v.len() - 1) as f64 * f).round() as usize];
    (v.len(), [q(0.0), q(0.1), q(0.5), q(0.9), q(1.0)])
}

#[derive(Default)]
struct Trace {
    /// Wall time / W, per W (mean over the reps).
    stretch: Vec<(u64, f64)>,
    /// The Primary's first run after its wake-up, µs (from the `WHOLE_TURNS_US` computes only).
    first_runs: Vec<f64>,
    whole: bool,
    /// Its later runs that a gap ended, µs.
    runs: Vec<f64>,
    /// The gaps, µs.
    gaps: Vec<f64>,
}

/// Runs `work` µs of the calling thread's CPU, counting as CPU the wall time outside gaps.
fn compute(work_ns: u64, t: &mut Trace) -> u64 {
    let start = Instant::now();
    let (mut last, mut run_start, mut gaps) = (0u64, 0u64, 0u64);
    let mut x = 1u64;
    loop {
        for _ in 0..64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let now = start.elapsed().as_nanos() as u64;
        if now - last > GAP_NS {
            if now - last > SLICE_GAP_NS {
                let run = (last - run_start) as f64 / 1e3;
                if run_start == 0 {
                    if t.whole {
                        t.first_runs.push(run)
                    }
                } else {
                    t.runs.push(run)
                }
                t.gaps.push((now - last) as f64 / 1e3);
                run_start = now;
            }
            gaps += now - last;
        }
        last = now;
        if now - gaps >= work_ns {
            return now;
        }
    }
}

fn measure(cpu: usize, busy: bool) -> Trace {
    let stop = Arc::new(AtomicBool::new(false));
    let spinner = busy.then(|| spinner(cpu, stop.clone()));
    let primary = std::thread::spawn(move || {
        pin(cpu);
        let mut t = Trace::default();
        let mut seed = 0x9e3779b97f4a7c15u64;
        std::thread::sleep(Duration::from_millis(20));
        for &w in &WORKS_US {
            let mut sum = 0.0;
            for _ in 0..REPS {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                std::thread::sleep(Duration::from_micros(2000 + seed % 3000));
                sum += compute(w * 1000, &mut t) as f64 / (w * 1000) as f64;
            }
            t.stretch.push((w, sum / REPS as f64));
        }
        t.whole = true;
        for _ in 0..WHOLE_TURN_REPS {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            std::thread::sleep(Duration::from_micros(2000 + seed % 3000));
            compute(WHOLE_TURNS_US * 1000, &mut t);
        }
        t
    });
    let t = primary.join().expect("the Primary thread does not panic");
    stop.store(true, Ordering::Relaxed);
    if let Some(s) = spinner {
        s.join().ok();
    }
    t
}

fn main() {
    let json = std::env::args().any(|a| a == "--json");
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let cpu = cpus - 1;
    let mut out = vec![];
    for busy in [false, true] {
        let t = measure(cpu, busy);
        let what = if busy { "running_cpu_bound" } else { "idle" };
        let parts = [("first_run", spread(t.first_runs)), ("later_run", spread(t.runs)), ("other_turn", spread(t.gaps))];
        if json {
            let s: Vec<String> = t.stretch.iter().map(|(w, s)| format!("\"{w}\": {s:.3}")).collect();
            let p: Vec<String> = parts
                .iter()
                .map(|(k, (n, [lo, p10, mid, p90, hi]))| {
                    format!("\"{k}_us\": {{\"n\": {n}, \"min\": {lo:.0}, \"p10\": {p10:.0}, \"median\": {mid:.0}, \"p90\": {p90:.0}, \"max\": {hi:.0}}}")
                })
                .collect();
            out.push(format!("{{\"core\": \"{what}\", \"stretch_by_work_us\": {{{}}}, {}}}", s.join(", "), p.join(", ")));
        } else {
            let s: Vec<String> = t.stretch.iter().map(|(w, s)| format!("{w}:{s:.2}")).collect();
            println!("core {what}: wall / W by W µs  {}", s.join("  "));
            for (k, (n, [lo, p10, mid, p90, hi])) in parts {
                println!("  {k:10} n {n:3}  min {lo:6.0}  p10 {p10:6.0}  median {mid:6.0}  p90 {p90:6.0}  max {hi:6.0} µs");
            }
        }
    }
    if json {
        println!("[{}]", out.join(", "));
    }
}
