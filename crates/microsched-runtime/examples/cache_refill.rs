//! What a Primary pays in cache when its work lands on a core the Secondary ran on: the time to
//! re-read a working set the size of the core's private L2 after a Secondary ran on the core,
//! minus the time to read it warm. Measured on this machine, pinned to one core, for the two
//! kinds of Secondary HarvestContainers evaluates: CPUBully's CPU-bound sum (a tiny working
//! set: the paper's Secondary in Fig. 5-7 and 11) and a memory-bound one that streams through
//! more than the shared L3 (as dedup of a 20 GB file can), so that the Primary's data must come
//! back from memory. The CPU-bound figure is the source of the default of
//! `policy.allocator.mechanism.refill_us` (see `alloc/harvest.rs`).
//!
//!     cargo run --release -p microsched-runtime --example cache_refill [-- --json]

use std::hint::black_box;
use std::time::Instant;

const LINE: usize = 64;
const TRIALS: usize = 41;

fn cache_bytes(index: u32, fallback: usize) -> usize {
    let path = format!("/sys/devices/system/cpu/cpu0/cache/index{index}/size");
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let t = text.trim();
    let (num, mult) = match t.strip_suffix('K') {
        Some(n) => (n, 1024),
        None => match t.strip_suffix('M') {
            Some(n) => (n, 1024 * 1024),
            None => (t, 1),
        },
    };
    num.parse::<usize>().map(|n| n * mult).ok().filter(|&n| n >= 64 * 1024).unwrap_or(fallback)
}

fn pin_to_last_cpu() -> usize {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let cpu = cpus - 1;
    // SAFETY: a zeroed cpu_set_t is valid, and CPU_SET stays within it for cpu < CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    cpu
}

/// Reads one word of every line of `buf` in a scrambled order (a full-period LCG over the lines,
/// so hardware prefetchers cannot stream it but loads may overlap, as a request's would).
fn touch(buf: &[u64]) -> u64 {
    let lines = buf.len() * 8 / LINE;
    debug_assert!(lines.is_power_of_two());
    let (mut i, mut sum) = (0usize, 0u64);
    for _ in 0..lines {
        i = (i.wrapping_mul(5).wrapping_add(1)) & (lines - 1);
        sum = sum.wrapping_add(buf[i * LINE / 8]);
    }
    sum
}

fn cpu_bully(ms: f64) -> u64 {
    let end = Instant::now() + std::time::Duration::from_secs_f64(ms / 1e3);
    let mut x = 1u64;
    while Instant::now() < end {
        for _ in 0..1000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        }
    }
    x
}

fn memory_bully(buf: &mut [u64]) -> u64 {
    let mut s = 0u64;
    for w in buf.iter_mut().step_by(LINE / 8) {
        *w = w.wrapping_add(1);
        s = s.wrapping_add(*w);
    }
    s
}

fn time_us(f: impl FnOnce() -> u64) -> f64 {
    let t = Instant::now();
    black_box(f());
    t.elapsed().as_secs_f64() * 1e6
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let json = std::env::args().any(|a| a == "--json");
    let cpu = pin_to_last_cpu();
    let l2 = cache_bytes(2, 1 << 20).next_power_of_two();
    let l3 = cache_bytes(3, 32 << 20);
    let primary = vec![1u64; l2 / 8];
    let mut bully = vec![1u64; 4 * l3 / 8];
    let (mut warm, mut after_cpu, mut after_mem) = (vec![], vec![], vec![]);
    for _ in 0..TRIALS {
        black_box(touch(&primary));
        warm.push(time_us(|| touch(&primary)));
        black_box(cpu_bully(1.0));
        after_cpu.push(time_us(|| touch(&primary)));
        black_box(touch(&primary));
        black_box(memory_bully(&mut bully));
        after_mem.push(time_us(|| touch(&primary)));
    }
    let (w, c, m) = (median(warm), median(after_cpu), median(after_mem));
    if json {
        println!(
            "{{\"cpu\": {cpu}, \"l2_bytes\": {l2}, \"l3_bytes\": {l3}, \"warm_us\": {w:.2}, \"after_cpu_bound_us\": {c:.2}, \
             \"after_memory_bound_us\": {m:.2}, \"refill_cpu_bound_us\": {:.2}, \"refill_memory_bound_us\": {:.2}}}",
            (c - w).max(0.0),
            (m - w).max(0.0)
        );
    } else {
        println!("core {cpu}, private L2 {} KiB, shared L3 {} MiB, medians of {TRIALS} trials:", l2 / 1024, l3 >> 20);
        println!("  read warm                         {w:8.2} µs");
        println!("  read after a CPU-bound Secondary  {c:8.2} µs  (refill {:.2} µs)", (c - w).max(0.0));
        println!("  read after one streaming 4 × L3   {m:8.2} µs  (refill {:.2} µs)", (m - w).max(0.0));
    }
}
