//! Moving the Secondary: two-phase affinity (the artifact's `twopa`, `Monitor/monitor.c`, done
//! from user space with `sched_setaffinity` per thread), the Secondary's cpuset widened where it
//! would keep the Secondary off a lent core (as the artifact's `pincores.sh`, see
//! [`crate::cpuset`]), IRQ steering where permitted, and the ledger that restores every
//! affinity, cpuset and IRQ mask the agent changed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cpus::{format_list, get_affinity, set_affinity, Cpus};
use crate::cpuset::{self, Hierarchy};
use crate::procfs;
use crate::state::{self, Affinity, Repair, State, StateFile, Stopped};

/// What one reassignment did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Actuation {
    /// Threads pinned to a single new core in phase 1.
    pub phase1: u32,
    /// Threads given the full mask in phase 2.
    pub phase2: u32,
    /// Threads whose affinity read back outside the mask (after retries; must stay 0).
    pub stray: u32,
    /// Cores of the mask that some thread's affinity read back without (the kernel cut them: a
    /// cpuset, or a single-core mask refused with EINVAL): the Secondary cannot run there.
    pub cut: Cpus,
    /// Threads whose affinity read back cut, and the first of them as a sentence.
    pub cut_threads: u32,
    pub cut_example: Option<String>,
    pub errors: Vec<String>,
    pub us: f64,
}

/// The Secondary processes and everything the agent changed on their behalf.
#[derive(Debug)]
pub struct Secondary {
    proc_root: PathBuf,
    pub pids: Vec<i32>,
    /// Original affinity of every thread the agent touched, keyed by (pid, tid), with the
    /// thread's start time (to tell it from a later thread given its id).
    ledger: BTreeMap<(i32, i32), (Cpus, Option<u64>)>,
    /// Stopped because no core was left to it (no dedicated Secondary core, nothing lent).
    pub stopped: bool,
    /// The processes stopped, with their start times.
    stopped_pids: Vec<Stopped>,
    /// Where every change is recorded before it is made (see [`crate::state`]); none in tests
    /// that do not ask for one.
    state: Option<StateFile>,
    /// State writes that failed (each reason once, at most 20).
    pub state_errors: Vec<String>,
    /// Cpuset files written, with their original content.
    cpusets: BTreeMap<PathBuf, String>,
    /// What was found and done about the Secondaries' cpusets (reported once each).
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
            stopped_pids: Vec::new(),
            state: None,
            state_errors: Vec::new(),
            cpusets: BTreeMap::new(),
            cpuset_notes: BTreeSet::new(),
            irqs: BTreeMap::new(),
            irq_notes: BTreeSet::new(),
            irq_writes: 0,
        }
    }

    /// Opens the state file at `path` and repairs what a dead agent left recorded there, before
    /// anything here reads a mask as an original; the file is then emptied. Returns what was
    /// repaired (`None`: nothing was recorded).
    pub fn use_state_file(&mut self, path: &Path) -> Result<Option<Repair>, String> {
        let (mut file, left) = StateFile::open(path)?;
        let repaired = (!left.is_empty()).then(|| state::repair(&self.proc_root, &left));
        file.write(&State::default()).map_err(|e| format!("--state-file: {}: cannot write: {e}", path.display()))?;
        self.state = Some(file);
        Ok(repaired)
    }

    pub fn state_path(&self) -> Option<&Path> {
        self.state.as_ref().map(|s| s.path())
    }

    /// What is changed and not yet put back, as the state file records it.
    fn snapshot(&self) -> State {
        State {
            agent_pid: std::process::id(),
            affinities: self
                .ledger
                .iter()
                .map(|(&(pid, tid), (cpus, start))| Affinity { pid, tid, start: *start, cpus: format_list(cpus) })
                .collect(),
            cpusets: self.cpusets.clone(),
            irqs: self.irqs.clone(),
            stopped: self.stopped_pids.clone(),
        }
    }

    /// Writes the state file (if any) with what is changed now: called before each change, with
    /// the change already recorded, and after a restore.
    fn persist(&mut self) {
        let snap = self.snapshot();
        let Some(f) = self.state.as_mut() else { return };
        if let Err(e) = f.write(&snap) {
            let e = format!("writing the state file {}: {e}", f.path().display());
            if !self.state_errors.contains(&e) && self.state_errors.len() < 20 {
                self.state_errors.push(e);
            }
        }
    }

    /// Records the original affinity of every thread of `threads` not recorded yet, then writes
    /// the state file once (if anything was added). Returns the errors of threads unreadable.
    fn record(&mut self, threads: &[(i32, i32)], errors: &mut Vec<String>) {
        let mut added = false;
        for &(pid, tid) in threads {
            if self.ledger.contains_key(&(pid, tid)) {
                continue;
            }
            match get_affinity(tid) {
                Ok(orig) => {
                    self.ledger.insert((pid, tid), (orig, state::start_time(&self.proc_root, pid, tid)));
                    added = true;
                }
                Err(e) => errors.extend(tid_error(e, "sched_getaffinity", tid)),
            }
        }
        if added {
            self.persist();
        }
    }

    fn threads(&self) -> Vec<(i32, i32)> {
        self.pids.iter().flat_map(|&p| procfs::tids(&self.proc_root, p).into_iter().map(move |t| (p, t))).collect()
    }

    /// Sets `mask` on one thread, recording its original affinity first. EINVAL (no CPU of
    /// the mask is in the thread's cpuset) is returned as `Err(())` rather than reported.
    fn set(&mut self, pid: i32, tid: i32, mask: &Cpus, errors: &mut Vec<String>) -> Result<bool, ()> {
        if !self.ledger.contains_key(&(pid, tid)) {
            // Recorded (and written to the state file) before it is changed.
            self.record(&[(pid, tid)], errors);
            if !self.ledger.contains_key(&(pid, tid)) {
                return Ok(false);
            }
        }
        match set_affinity(tid, mask) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Err(()),
            Err(e) => {
                errors.extend(tid_error(e, "sched_setaffinity", tid));
                Ok(false)
            }
        }
    }

    /// Reads back a thread's affinity after setting `mask`: outside it is a stray, short of it
    /// a cut (recorded in `a`). Returns whether it is outside.
    fn check(tid: i32, mask: &Cpus, a: &mut Actuation) -> bool {
        let Ok(m) = get_affinity(tid) else { return false };
        let cut: Cpus = mask.difference(&m).copied().collect();
        if !cut.is_empty() {
            a.cut_threads += 1;
            if a.cut_example.is_none() {
                a.cut_example = Some(format!(
                    "thread {tid}'s affinity reads back {} after sched_setaffinity({}): the kernel keeps it off {}",
                    format_list(&m),
                    format_list(mask),
                    format_list(&cut)
                ));
            }
            a.cut.extend(cut);
        }
        !m.is_subset(mask)
    }

    /// Gives the Secondary `mask` (its dedicated cores ∪ the lent ones). `new` are the cores lent
    /// by this change: phase 1 places one running thread on each at once (the kernel's load
    /// balancer would take milliseconds to spread them), phase 2 sets the full mask on every
    /// thread, which migrates threads off reclaimed cores before it returns. Threads created
    /// meanwhile inherit a mask from their creator: the thread list is re-read until no thread's
    /// affinity reads back outside `mask`. Every affinity is read back: a thread whose mask the
    /// kernel cut (its cpuset lacks a core) is reported in `cut`, never counted as moved. An
    /// empty mask stops the Secondary (SIGSTOP: the artifact's commented-out SleepSecondary)
    /// until cores come back.
    pub fn assign(&mut self, mask: &Cpus, new: &Cpus) -> Actuation {
        let t0 = Instant::now();
        let mut a = Actuation::default();
        if mask.is_empty() {
            self.stop(&mut a.errors);
            a.us = t0.elapsed().as_secs_f64() * 1e6;
            return a;
        }
        let threads = self.threads();
        // One state write for every thread about to be touched, before any is.
        self.record(&threads, &mut a.errors);
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
                match self.set(pid, tid, &Cpus::from([c]), &mut a.errors) {
                    Ok(true) => a.phase1 += 1,
                    Ok(false) => {}
                    Err(()) => {
                        a.cut.insert(c);
                        a.cut_threads += 1;
                        a.cut_example.get_or_insert_with(|| {
                            format!("sched_setaffinity({c}) of thread {tid}: EINVAL (core {c} is outside its cpuset)")
                        });
                    }
                }
            }
        }
        let mut done = BTreeSet::new();
        // Threads left on an old mask outside `mask` because the kernel refused this one.
        let mut stuck = BTreeSet::new();
        for round in 0..5 {
            let threads = if round == 0 { threads.clone() } else { self.threads() };
            let mut stray = 0;
            for (pid, tid) in threads {
                if stuck.contains(&(pid, tid)) {
                    continue;
                }
                if done.contains(&(pid, tid)) {
                    // Checked, not rewritten: a thread keeps its mask unless the agent changes it.
                    if get_affinity(tid).is_ok_and(|m| !m.is_subset(mask)) {
                        stray += 1;
                        done.remove(&(pid, tid));
                    }
                    continue;
                }
                match self.set(pid, tid, mask, &mut a.errors) {
                    Ok(true) => a.phase2 += 1,
                    Ok(false) => {}
                    Err(()) => {
                        // No core of the mask in its cpuset: the whole mask is cut.
                        a.cut.extend(mask.iter().copied());
                        a.cut_threads += 1;
                        a.cut_example.get_or_insert_with(|| {
                            format!("sched_setaffinity({}) of thread {tid}: EINVAL (no core of it in its cpuset)", format_list(mask))
                        });
                        // It keeps its old mask: a stray if that reaches outside this one.
                        if get_affinity(tid).is_ok_and(|m| !m.is_subset(mask)) {
                            stuck.insert((pid, tid));
                        } else {
                            done.insert((pid, tid));
                        }
                        continue;
                    }
                }
                if Self::check(tid, mask, &mut a) {
                    stray += 1;
                } else {
                    done.insert((pid, tid));
                }
            }
            a.stray = stray + stuck.len() as u32;
            if stray == 0 && round > 0 {
                break;
            }
        }
        if self.stopped {
            self.resume();
        }
        a.us = t0.elapsed().as_secs_f64() * 1e6;
        a
    }

    /// SIGCONT to the stopped processes; their entries leave the state file after.
    fn resume(&mut self) {
        for &p in &self.pids {
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(p, libc::SIGCONT) };
        }
        self.stopped = false;
        if !self.stopped_pids.is_empty() {
            self.stopped_pids.clear();
            self.persist();
        }
    }

    fn stop(&mut self, errors: &mut Vec<String>) {
        if self.stopped {
            return;
        }
        // Recorded before they are stopped: a dead agent's stopped Secondary is resumed by the next.
        self.stopped_pids = self.pids.iter().map(|&pid| Stopped { pid, start: state::start_time(&self.proc_root, pid, pid) }).collect();
        self.persist();
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

    /// Makes the cpusets of `pids` hold `need` before any of it is lent: checks each process's
    /// effective cpuset ([`cpuset::of_pid`]) and, where it lacks a core, widens its
    /// `cpuset.cpus` when `write` (recording the original for `restore`) and reads it back.
    /// Returns the files written; `Err` names the cores the Secondary cannot be given and why.
    pub fn ensure_cpuset(&mut self, h: &Hierarchy, pids: &[i32], need: &Cpus, write: bool) -> Result<Vec<PathBuf>, Refusal> {
        let mut written = Vec::new();
        for &pid in pids {
            let cs = match cpuset::of_pid(h, &self.proc_root, pid) {
                Ok(c) => c,
                // It exited meanwhile: nothing to check (reaped at the next pass).
                Err(_) if !self.proc_root.join(pid.to_string()).exists() => continue,
                Err(e) => {
                    return Err(Refusal {
                        missing: need.clone(),
                        reason: format!("Secondary pid {pid}: its cpuset cannot be read ({e}), so a lend could not be checked"),
                    })
                }
            };
            let missing: Cpus = need.difference(&cs.effective).copied().collect();
            if missing.is_empty() {
                continue;
            }
            let refuse = |detail: String| Refusal { missing: missing.clone(), reason: cpuset::refusal(pid, &cs, &missing, h, &detail) };
            if !write {
                let how = cs.cpus_file.as_ref().map_or_else(
                    || "widen its cpuset".to_string(),
                    |f| format!("echo {} > {}", format_list(&cpuset::widened(&cs, need).unwrap_or_else(|_| need.clone())), f.display()),
                );
                return Err(refuse(format!("the agent does not write cpusets (--no-cpuset): {how}, or drop --no-cpuset")));
            }
            let Some(f) = cs.cpus_file.clone() else {
                return Err(refuse(format!(
                    "there is no cpuset.cpus to widen in {} ({}): widen its cpuset, or move it to a cgroup whose cpuset holds those cores",
                    cs.dir.display(),
                    if cs.dir == h.root { "the root cgroup" } else { "the cpuset controller is not enabled for it" }
                )));
            };
            let target = cpuset::widened(&cs, need).map_err(&refuse)?;
            // The original is recorded (and written to the state file) before the file is written.
            let recorded = !self.cpusets.contains_key(&f);
            if recorded {
                match fs::read_to_string(&f) {
                    Ok(orig) => {
                        self.cpusets.insert(f.clone(), orig);
                        self.persist();
                    }
                    Err(e) => return Err(refuse(format!("reading {}: {e}", f.display()))),
                }
            }
            let forget = |s: &mut Self| {
                if recorded {
                    s.cpusets.remove(&f);
                    s.persist();
                }
            };
            let before = match cpuset::write_cpus(&f, &target) {
                Ok(before) => before,
                Err(e) => {
                    forget(self);
                    let parent = cs.dir.parent().map(|p| p.join(h.version.effective_file()));
                    let pe = parent.as_deref().and_then(|p| fs::read_to_string(p).ok()).map(|s| s.trim().to_string());
                    return Err(refuse(format!(
                        "{e}{}",
                        pe.map_or(String::new(), |p| format!(" (its parent's cpuset allows {p})"))
                    )));
                }
            };
            // Read back what the kernel now enforces (a v2 parent can still narrow it).
            let after = cpuset::of_pid(h, &self.proc_root, pid);
            if !after.as_ref().is_ok_and(|a| need.is_subset(&a.effective)) {
                // It did not take: put the file back as it was.
                let _ = fs::write(&f, before.trim());
                forget(self);
            }
            match after {
                Ok(after) if need.is_subset(&after.effective) => {
                    written.push(f.clone());
                    self.cpuset_notes.insert(format!(
                        "Secondary pid {pid}: cpuset widened to {} ({}), as the artifact's pincores.sh: {} now",
                        format_list(&target),
                        f.display(),
                        format_list(&after.effective)
                    ));
                }
                Ok(after) => {
                    return Err(refuse(format!(
                        "{} was written {} but {} still reads {} (a parent cpuset narrower)",
                        f.display(),
                        format_list(&target),
                        after.effective_from.display(),
                        format_list(&after.effective)
                    )))
                }
                Err(e) => return Err(refuse(e)),
            }
        }
        Ok(written)
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
                        // Recorded before the IRQ is steered.
                        self.persist();
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
        for ((_, tid), (orig, _)) in std::mem::take(&mut self.ledger) {
            match set_affinity(tid, &orig) {
                Ok(()) => n += 1,
                Err(e) => errors.extend(tid_error(e, "restoring the affinity", tid)),
            }
        }
        if self.stopped {
            self.resume();
        }
        for (irq, orig) in std::mem::take(&mut self.irqs) {
            let f = self.proc_root.join("irq").join(irq.to_string()).join("smp_affinity_list");
            if let Err(e) = fs::write(&f, &orig) {
                errors.push(format!("IRQ {irq}: restoring {orig}: {e}"));
            }
        }
        // Put back (or gone for good): the state file holds nothing any more.
        self.stopped_pids.clear();
        self.persist();
        (n, errors)
    }
}

/// Cores the Secondary cannot be given, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub missing: Cpus,
    pub reason: String,
}

impl Drop for Secondary {
    fn drop(&mut self) {
        // Also on a panic unwinding through the agent: never leave a mask or a stopped process.
        let _ = self.restore();
    }
}
