//! What the busy-core examples share: pinning a thread, and the Secondary's CPU-bound thread
//! (CPUBully's role) on a core.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Pins the calling thread to `cpu`.
pub fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid, and CPU_SET stays within it for cpu < CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// A thread pinned to `cpu` that computes until `stop` is set.
pub fn spinner(cpu: usize, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        pin(cpu);
        let mut x = 1u64;
        while !stop.load(Ordering::Relaxed) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    })
}
