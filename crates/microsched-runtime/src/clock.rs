//! Real time as the policies want it: integer nanoseconds since a start instant, and the two
//! ways a thread waits for a point in time (spinning for short waits, sleeping for long ones).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use microsched_core::Nanos;

/// Nanoseconds since `start`, monotonic, shared by every thread of a server or load generator.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
    /// Wall-clock time of `start`, to align the server's and the load generator's records.
    start_unix_ns: u64,
}

impl Clock {
    pub fn new() -> Self {
        let start_unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Self {
            start: Instant::now(),
            start_unix_ns,
        }
    }
    #[inline]
    pub fn now(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }
    pub fn start_unix_ns(&self) -> u64 {
        self.start_unix_ns
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// Busy-waits until `ns` nanoseconds have passed since `from` (the synthetic handler's "work").
#[inline]
pub fn spin_for(ns: Nanos) {
    let from = Instant::now();
    let d = Duration::from_nanos(ns);
    while from.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Asks the kernel for 1 ns timer slack on the calling thread, so that its sleeps and `ppoll`
/// timeouts end close to when asked (the default slack is 50 µs).
pub fn tight_timer_slack() {
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes an integer argument and touches no memory.
    unsafe {
        libc::prctl(
            libc::PR_SET_TIMERSLACK,
            1 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
    }
}

/// The calling thread under `SCHED_FIFO` at priority 10 (see `runtime.realtime`) until the
/// guard drops, when its previous policy comes back (threads it spawns meanwhile inherit the
/// policy, so callers spawn none). `None`: the kernel refused (it needs `CAP_SYS_NICE` or an
/// `RLIMIT_RTPRIO` ≥ 10).
pub fn realtime_priority() -> Option<RealtimeGuard> {
    // SAFETY: sched_getscheduler/sched_getparam/sched_setscheduler on the calling thread (pid 0)
    // with valid sched_param pointers.
    unsafe {
        let policy = libc::sched_getscheduler(0);
        let mut param: libc::sched_param = std::mem::zeroed();
        if policy < 0 || libc::sched_getparam(0, &mut param) != 0 {
            return None;
        }
        let fifo = libc::sched_param { sched_priority: 10 };
        (libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) == 0)
            .then_some(RealtimeGuard { policy, param })
    }
}

/// Restores the thread's scheduling policy (see [`realtime_priority`]).
pub struct RealtimeGuard {
    policy: i32,
    param: libc::sched_param,
}

impl Drop for RealtimeGuard {
    fn drop(&mut self) {
        // SAFETY: as above; lowering a thread's own policy needs no privilege.
        unsafe {
            libc::sched_setscheduler(0, self.policy, &self.param);
        }
    }
}

/// The CPUs the calling thread may run on, in order (empty if the kernel will not say).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set; sched_getaffinity writes into it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 (the calling thread), the set's true size and a pointer to it.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Vec::new();
    }
    // SAFETY: CPU_ISSET reads a live set within its CPU_SETSIZE bound.
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

/// Restricts the calling thread to `cpu`; false if the kernel refused.
pub fn pin_to_cpu(cpu: usize) -> bool {
    // SAFETY: as in `allowed_cpus`; CPU_SET writes within the set's bound (callers pass a CPU
    // that `allowed_cpus` returned, below CPU_SETSIZE).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Puts the calling thread under the default scheduler, whatever it inherited: workers must
/// never spin under a real-time policy (they would starve the threads that feed them).
pub fn default_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler on the calling thread with a valid sched_param.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_OTHER, &param);
    }
}

/// How many times the calling thread has blocked (its voluntary context switches): each is a
/// sleep it was woken from.
pub fn thread_sleeps() -> u64 {
    // SAFETY: an all-zero rusage is valid; getrusage writes into the live struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD with a pointer to a live rusage.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    ru.ru_nvcsw as u64
}

/// The calling thread's CPU time (user + system), ns: what the thread itself cost the machine,
/// without the time it slept or waited for a CPU.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a pointer to a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The CPU a thread took per wake-up: from the start of one sleep to the start of its next (the
/// switch out and in, and all it did while awake), over every wake-up of one cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WakeupCpu {
    pub n: u64,
    pub mean_us: f64,
    /// Standard deviation, µs.
    pub sd_us: f64,
}

/// Accumulates [`WakeupCpu`].
#[derive(Debug, Clone, Copy, Default)]
pub struct WakeupCpuMeter {
    n: u64,
    sum_ns: f64,
    sum_sq_ns: f64,
}

impl WakeupCpuMeter {
    pub fn add(&mut self, ns: u64) {
        let x = ns as f64;
        self.n += 1;
        self.sum_ns += x;
        self.sum_sq_ns += x * x;
    }
    pub fn get(&self) -> WakeupCpu {
        if self.n == 0 {
            return WakeupCpu::default();
        }
        let n = self.n as f64;
        let mean = self.sum_ns / n;
        let var = (self.sum_sq_ns / n - mean * mean).max(0.0);
        WakeupCpu { n: self.n, mean_us: mean / 1e3, sd_us: var.sqrt() / 1e3 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_thread_may_run_only_on_its_cpu() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty(), "the kernel reports the CPUs this process may use");
        let last = *cpus.last().unwrap();
        let seen = std::thread::spawn(move || (pin_to_cpu(last), allowed_cpus())).join().unwrap();
        assert_eq!(seen, (true, vec![last]));
        assert_eq!(allowed_cpus(), cpus, "pinning a thread leaves the others as they were");
    }

    #[test]
    fn wakeup_cpu_is_the_mean_and_spread_of_what_was_added() {
        let mut m = WakeupCpuMeter::default();
        assert_eq!(m.get(), WakeupCpu::default());
        for ns in [10_000, 20_000, 30_000, 40_000] {
            m.add(ns);
        }
        let w = m.get();
        assert_eq!((w.n, w.mean_us), (4, 25.0));
        assert!((w.sd_us - 125f64.sqrt()).abs() < 1e-9, "{w:?}");
    }
}
