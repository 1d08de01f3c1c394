//! Moving the Secondary: two-phase affinity (the artifact's `twopa`, `Monitor/monitor.c`, done
//! from user space with `sched_setaffinity` per thread), the Secondary's cgroup v2 cpuset where
//! one is writable, IRQ steering where permitted, and the ledger that restores every affinity,
//! cpuset and IRQ mask the agent changed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cpus::{format_list, get_affinity, set_affinity, Cpus};
use crate::procfs;

/// What one reassignment did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Actuation {
    /// Threads pinned to a single new core in phase 1.
    pub phase1: u32,
    /// Threads given the full mask in phase 2.
    pub phase2: u32,
    /// Threads whose affinity read back outside the mask (after retries; must stay 0).
    pub stray: u32,
    pub errors: Vec<String>,
    pub us: f64,
}

/// The Secondary processes and everything the agent changed on their behalf.
#[derive(Debug)]
pub struct Secondary {
    proc_root: PathBuf,
    pub pids: Vec<i32>,
    /// Original affinity of every thread the agent touched, keyed by (pid, tid).
    ledger: BTreeMap<(i32, i32), Cpus>,
    /// Stopped because no core was left to it (no dedicated Secondary core, nothing lent).
    pub stopped: bool,
    /// Cgroup v2 cpuset files written, with their original content.
    cpusets: BTreeMap<PathBuf, String>,
    /// Why a Secondary's cpuset was not written (reported once).
    pub cpuset_notes: BTreeSet<String>,
    /// Steered IRQs with their original `smp_affinity_list`.
    irqs: BTreeMap<u32, String>,
    pub irq_notes: BTreeSet<String>,
    pub irq_writes: u64,
}

fn tid_error(e: io::Error, what: &str, tid: i32) -> Option<String> {
    // A thread that exited between listing and the call is not an error.
    (e.raw_os_error() != Some(libc::ESRCH)).then(|| format!("{what} of thread {tid}: {e}"))
}

impl Secondary {
    pub fn new(proc_root: &Path) -> Self {
        Self {
            proc_root: proc_root.to_path_buf(),
            pids: Vec::new(),
            ledger: BTreeMap::new(),
            stopped: false,
            cpusets: BTreeMap::new(),
            cpuset_notes: BTreeSet::new(),
            irqs: BTreeMap::new(),
            irq_notes: BTreeSet::new(),
            irq_writes: 0,
        }
    }

    fn threads(&self) -> Vec<(i32, i32)> {
        self.pids.iter().flat_map(|&p| procfs::tids(&self.proc_root, p).into_iter().map(move |t| (p, t))).collect()
    }

    /// Sets `mask` on one thread, recording its original affinity first.
    fn set(&mut self, pid: i32, tid: i32, mask: &Cpus, errors: &mut Vec<String>) -> bool {
        if let std::collections::btree_map::Entry::Vacant(v) = self.ledger.entry((pid, tid)) {
            match get_affinity(tid) {
                Ok(orig) => {
                    v.insert(orig);
                }
                Err(e) => {
                    errors.extend(tid_error(e, "sched_getaffinity", tid));
                    return false;
                }
            }
        }
        match set_affinity(tid, mask) {
            Ok(()) => true,
            Err(e) => {
                errors.extend(tid_error(e, "sched_setaffinity", tid));
                false
            }
        }
    }

    /// Gives the Secondary `mask` (its dedicated cores ∪ the lent ones). `new` are the cores lent
    /// by this change: phase 1 places one running thread on each at once (the kernel's load
    /// balancer would take milliseconds to spread them), phase 2 sets the full mask on every
    /// thread, which migrates threads off reclaimed cores before it returns. Threads created
    /// meanwhile inherit a mask from their creator: the thread list is re-read until no thread's
    /// affinity reads back outside `mask`. An empty mask stops the Secondary (SIGSTOP: the
    /// artifact's commented-out SleepSecondary) until cores come back.
    pub fn assign(&mut self, mask: &Cpus, new: &Cpus, cgroup_v2: Option<&Path>) -> Actuation {
        let t0 = Instant::now();
        let mut a = Actuation::default();
        if mask.is_empty() {
            self.stop(&mut a.errors);
            a.us = t0.elapsed().as_secs_f64() * 1e6;
            return a;
        }
        // Widen the cpuset before the affinities (the kernel intersects the two).
        if let Some(root) = cgroup_v2 {
            self.write_cpusets(root, mask, true);
        }
        let threads = self.threads();
        if !new.is_empty() {
            let mut marked = Cpus::new();
            let mut free: Vec<usize> = new.iter().copied().collect();
            for &(pid, tid) in &threads {
                if free.is_empty() {
                    break;
                }
                let Some(s) = procfs::task(&self.proc_root, pid, tid) else { continue };
                if !s.running && !self.stopped {
                    continue;
                }
                if mask.contains(&s.cpu) && marked.insert(s.cpu) {
                    free.retain(|&c| c != s.cpu);
                    continue;
                }
                let c = free.remove(0);
                marked.insert(c);
                if self.set(pid, tid, &Cpus::from([c]), &mut a.errors) {
                    a.phase1 += 1;
                }
            }
        }
        let mut done = BTreeSet::new();
        for round in 0..5 {
            let threads = if round == 0 { threads.clone() } else { self.threads() };
            let mut stray = 0;
            for (pid, tid) in threads {
                if done.contains(&(pid, tid)) {
                    // Checked, not rewritten: a thread keeps its mask unless the agent changes it.
                    if get_affinity(tid).is_ok_and(|m| !m.is_subset(mask)) {
                        stray += 1;
                        done.remove(&(pid, tid));
                    }
                    continue;
                }
                if self.set(pid, tid, mask, &mut a.errors) {
                    a.phase2 += 1;
                }
                if get_affinity(tid).is_ok_and(|m| !m.is_subset(mask)) {
                    stray += 1;
                } else {
                    done.insert((pid, tid));
                }
            }
            a.stray = stray;
            if stray == 0 && round > 0 {
                break;
            }
        }
        if let Some(root) = cgroup_v2 {
            self.write_cpusets(root, mask, false);
        }
        if self.stopped {
            for &p in &self.pids {
                // SAFETY: kill has no memory preconditions.
                unsafe { libc::kill(p, libc::SIGCONT) };
            }
            self.stopped = false;
        }
        a.us = t0.elapsed().as_secs_f64() * 1e6;
        a
    }

    fn stop(&mut self, errors: &mut Vec<String>) {
        if self.stopped {
            return;
        }
        for &p in &self.pids {
            // SAFETY: kill has no memory preconditions.
            if unsafe { libc::kill(p, libc::SIGSTOP) } != 0 {
                errors.push(format!("SIGSTOP {p}: {}", io::Error::last_os_error()));
            }
        }
        self.stopped = true;
        // Wait (bounded) until every thread is stopped: until then one may still run on the
        // core just reclaimed.
        let deadline = Instant::now() + Duration::from_millis(50);
        while Instant::now() < deadline {
            let running = self.threads().iter().any(|&(p, t)| procfs::task(&self.proc_root, p, t).is_some_and(|s| s.running));
            if !running {
                return;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        errors.push("Secondary threads still running 50 ms after SIGSTOP".into());
    }

    /// The cgroup v2 directory of `pid` under `root`, if it has a cpuset.cpus file.
    fn cgroup_dir(&self, root: &Path, pid: i32) -> Result<PathBuf, String> {
        let s = fs::read_to_string(self.proc_root.join(pid.to_string()).join("cgroup")).map_err(|e| e.to_string())?;
        let rel = s.lines().find_map(|l| l.strip_prefix("0::")).ok_or("no cgroup v2 membership")?;
        if rel == "/" {
            return Err("in the root cgroup, whose cpuset cannot be written".into());
        }
        let dir = root.join(rel.trim_start_matches('/'));
        if !dir.join("cpuset.cpus").exists() {
            return Err(format!("{}: no cpuset.cpus (the cpuset controller is not enabled for it)", dir.display()));
        }
        Ok(dir)
    }

    fn write_cpusets(&mut self, root: &Path, mask: &Cpus, widen: bool) {
        let list = format_list(mask);
        for pid in self.pids.clone() {
            let dir = match self.cgroup_dir(root, pid) {
                Ok(d) => d,
                Err(e) => {
                    self.cpuset_notes.insert(format!("pid {pid}: cpuset not written: {e}"));
                    continue;
                }
            };
            let f = dir.join("cpuset.cpus");
            let cur = fs::read_to_string(&f).unwrap_or_default();
            let cur_set = crate::cpus::parse_list(cur.trim(), "cpuset.cpus").unwrap_or_default();
            // Widening writes supersets only; narrowing writes the final mask.
            if widen && mask.is_subset(&cur_set) {
                continue;
            }
            let target = if widen { format_list(&cur_set.union(mask).copied().collect()) } else { list.clone() };
            self.cpusets.entry(f.clone()).or_insert(cur);
            if let Err(e) = fs::write(&f, &target) {
                self.cpuset_notes.insert(format!("{}: {e}", f.display()));
            }
        }
    }

    /// Steers `irqs` onto `mask` (the Secondary's cores: Fig. 8's IRQ affinitization).
    pub fn steer_irqs(&mut self, proc_root: &Path, irqs: &[u32], mask: &Cpus) {
        if mask.is_empty() {
            return;
        }
        let list = format_list(mask);
        for &irq in irqs {
            let f = proc_root.join("irq").join(irq.to_string()).join("smp_affinity_list");
            if let std::collections::btree_map::Entry::Vacant(v) = self.irqs.entry(irq) {
                match fs::read_to_string(&f) {
                    Ok(s) => {
                        v.insert(s.trim().to_string());
                    }
                    Err(e) => {
                        self.irq_notes.insert(format!("IRQ {irq}: not steered: {e}"));
                        continue;
                    }
                }
            }
            match fs::write(&f, &list) {
                Ok(()) => self.irq_writes += 1,
                Err(e) => {
                    self.irq_notes.insert(format!("IRQ {irq}: not steered: writing {}: {e}", f.display()));
                }
            }
        }
    }

    /// Puts back everything changed: affinities (threads still alive), cpusets, IRQ masks, and
    /// resumes a stopped Secondary. Returns (affinities restored, errors).
    pub fn restore(&mut self) -> (u32, Vec<String>) {
        let mut errors = Vec::new();
        // Cpusets first: an original affinity may need the original cpuset.
        for (f, orig) in std::mem::take(&mut self.cpusets) {
            if let Err(e) = fs::write(&f, orig.trim()) {
                errors.push(format!("{}: {e}", f.display()));
            }
        }
        let mut n = 0;
        for ((_, tid), orig) in std::mem::take(&mut self.ledger) {
            match set_affinity(tid, &orig) {
                Ok(()) => n += 1,
                Err(e) => errors.extend(tid_error(e, "restoring the affinity", tid)),
            }
        }
        if self.stopped {
            for &p in &self.pids {
                // SAFETY: kill has no memory preconditions.
                unsafe { libc::kill(p, libc::SIGCONT) };
            }
            self.stopped = false;
        }
        for (irq, orig) in std::mem::take(&mut self.irqs) {
            let f = self.proc_root.join("irq").join(irq.to_string()).join("smp_affinity_list");
            if let Err(e) = fs::write(&f, &orig) {
                errors.push(format!("IRQ {irq}: restoring {orig}: {e}"));
            }
        }
        (n, errors)
    }
}

impl Drop for Secondary {
    fn drop(&mut self) {
        // Also on a panic unwinding through the agent: never leave a mask or a stopped process.
        let _ = self.restore();
    }
}
