//! The best-effort co-tenant: threads at the lowest priority (`SCHED_IDLE`, else nice 19) that
//! count square roots. They get a CPU only when nothing else wants it, so their rate shows the
//! CPU time that parked workers give back.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Square roots per counter update.
const BATCH: u64 = 4096;

pub struct BeCoTenant {
    ops: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// Whether the threads got `SCHED_IDLE` (else they run at nice 19).
    pub sched_idle: Arc<AtomicBool>,
}

/// Lowers the calling thread to `SCHED_IDLE`; falls back to nice 19. Returns whether
/// `SCHED_IDLE` was set.
pub fn lowest_priority() -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` outlives the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } == 0 {
        return true;
    }
    // SAFETY: plain syscalls on the calling thread's id.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
    }
    false
}

impl BeCoTenant {
    pub fn start(threads: u32) -> Self {
        let ops = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let sched_idle = Arc::new(AtomicBool::new(true));
        let threads = (0..threads)
            .map(|i| {
                let (ops, stop, idle) = (ops.clone(), stop.clone(), sched_idle.clone());
                std::thread::Builder::new()
                    .name(format!("be-{i}"))
                    .spawn(move || {
                        if !lowest_priority() {
                            idle.store(false, Ordering::Relaxed);
                        }
                        let mut x = 2.0f64;
                        while !stop.load(Ordering::Relaxed) {
                            for _ in 0..BATCH {
                                x = std::hint::black_box(x.sqrt() + 2.0);
                            }
                            ops.fetch_add(BATCH, Ordering::Relaxed);
                        }
                        std::hint::black_box(x);
                    })
                    .expect("spawn a best-effort thread")
            })
            .collect();
        Self { ops, stop, threads, sched_idle }
    }

    /// Square roots computed so far.
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::Relaxed)
    }

    pub fn counter(&self) -> Arc<AtomicU64> {
        self.ops.clone()
    }

    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    pub fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        self.ops.load(Ordering::Relaxed)
    }
}
