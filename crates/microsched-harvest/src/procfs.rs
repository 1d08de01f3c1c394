//! What the agent reads from /proc (the `root` argument lets tests point at a fake tree).

use std::fs;
use std::path::Path;

/// Thread ids of process `pid` (empty if it is gone).
pub fn tids(proc_root: &Path, pid: i32) -> Vec<i32> {
    let mut v: Vec<i32> = fs::read_dir(proc_root.join(pid.to_string()).join("task"))
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// A thread as /proc shows it at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSample {
    /// Runnable or running (`R`): it occupies, or waits for, `cpu`.
    pub running: bool,
    /// The CPU it last ran on (stat field 39).
    pub cpu: usize,
    /// Time spent on a CPU, ns (schedstat field 1: exact at each context switch, updated at the
    /// scheduler tick while the thread keeps running).
    pub run_ns: u64,
}

/// Reads one thread; `None` if it has exited.
pub fn task(proc_root: &Path, pid: i32, tid: i32) -> Option<TaskSample> {
    let dir = proc_root.join(pid.to_string()).join("task").join(tid.to_string());
    let stat = fs::read_to_string(dir.join("stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let running = f.first()? == &"R";
    let cpu = f.get(36)?.parse().ok()?;
    let run_ns = fs::read_to_string(dir.join("schedstat")).ok()?.split_whitespace().next()?.parse().ok()?;
    Some(TaskSample { running, cpu, run_ns })
}

/// Per-CPU busy time, ns, from /proc/schedstat (field 7 of each `cpuN` line: time spent running
/// tasks, exact; needs CONFIG_SCHEDSTATS) — `None` where the file is absent.
pub fn schedstat_busy(proc_root: &Path) -> Option<Vec<(usize, u64)>> {
    let s = fs::read_to_string(proc_root.join("schedstat")).ok()?;
    let v: Vec<(usize, u64)> = s
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let cpu = f.first()?.strip_prefix("cpu")?.parse().ok()?;
            Some((cpu, f.get(7)?.parse().ok()?))
        })
        .collect();
    (!v.is_empty()).then_some(v)
}

/// Per-CPU busy time, ns, from /proc/stat: every column but idle and iowait, in USER_HZ ticks.
pub fn stat_busy(proc_root: &Path) -> Option<Vec<(usize, u64)>> {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let s = fs::read_to_string(proc_root.join("stat")).ok()?;
    let v: Vec<(usize, u64)> = s
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let cpu = it.next()?.strip_prefix("cpu")?.parse().ok()?;
            let cols: Vec<u64> = it.filter_map(|x| x.parse().ok()).collect();
            // user nice system idle iowait irq softirq steal (guest time is inside user).
            let busy: u64 = cols.iter().take(8).enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, v)| v).sum();
            Some((cpu, busy * 1_000_000_000 / hz))
        })
        .collect();
    (!v.is_empty()).then_some(v)
}

/// Process ids listed in a cgroup directory and its descendants (`cgroup.procs`, v1 or v2).
pub fn cgroup_pids(dir: &Path) -> Vec<i32> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(s) = fs::read_to_string(d.join("cgroup.procs")) {
            out.extend(s.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
        if let Ok(rd) = fs::read_dir(&d) {
            stack.extend(rd.filter_map(|e| e.ok()).filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Cumulative CPU time of a whole process (utime + stime of /proc/PID/stat), ns.
pub fn process_cpu_ns(proc_root: &Path, pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    let f: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let t: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(t * 1_000_000_000 / hz)
}
