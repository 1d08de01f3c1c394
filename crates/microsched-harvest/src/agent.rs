//! The agent's loop: monitor the Primaries' cores, tick each Primary's buffer controller (the
//! simulator's objects, `microsched_core::alloc::build`), carry out its lend / evict through
//! [`crate::actuate`], log every decision as a JSON line.
//!
//! The controllers see a Primary's cores through the same [`AllocView`] as in the simulator:
//! a held core is `Active` (idle or not, as monitored), a lent one `Parked`; a `Grant` evicts a
//! lent core, a `Yield(c)` lends core `c` (the controllers lend the highest-numbered idle core:
//! the artifact allocates from the end of the Primary's CPU list). `queued` is the number of
//! lent cores on which a Primary thread ran or waited since the last tick (only the `tasks`
//! monitor can tell): the real counterpart of the simulator's Primary thread woken on a lent
//! core, which makes the controllers evict at once.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use microsched_core::alloc::{self, AllocAction, AllocView, CoreAllocator, CoreId, CoreObs, CoreState};
use microsched_core::scenario::AllocatorCfg;
use microsched_core::Nanos;
use serde_json::{json, Value};

use crate::actuate::{Actuation, Refusal, Secondary};
use crate::cpus::{format_list, Cpus};
use crate::cpuset::{self, Hierarchy};
use crate::listener::{Listener, Registration};
use crate::{pods, procfs};

/// Where per-core activity comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// The Primary's own threads: /proc/PID/task/TID/schedstat (run time, ns, exact at each
    /// context switch, advanced at the scheduler tick while a thread runs on) and stat (state
    /// and CPU at the instant of the read). Blind to other tenants: a core busy with someone
    /// else's work reads idle.
    Tasks,
    /// Whole CPUs: /proc/schedstat (ns) where the kernel has it, else /proc/stat (USER_HZ ticks,
    /// 10 ms). What HarvestContainers' monitor sees (idle_cpu: any task makes a core busy).
    Cpu,
}

#[derive(Debug, Clone)]
pub struct PrimaryOpt {
    pub pids: Vec<i32>,
    pub cpus: Cpus,
    pub name: String,
}

#[derive(Debug, Clone)]
pub struct Opts {
    pub primaries: Vec<PrimaryOpt>,
    pub secondaries: Vec<i32>,
    /// Cores that are always the Secondary's (the artifact's dedicated core 18).
    pub secondary_cores: Cpus,
    pub controller: AllocatorCfg,
    pub poll: Duration,
    pub activity: Activity,
    /// A held core counts as busy for a tick if a Primary thread is running on it at the read,
    /// or it was busy at least this fraction of the tick.
    pub busy_fraction: f64,
    pub listen: Option<SocketAddr>,
    pub cgroup_root: PathBuf,
    pub proc_root: PathBuf,
    /// Widen a Secondary's cpuset (cgroup v1 or v2) that lacks a core to lend, as the artifact's
    /// setup does; when false such a lend (and the registration that would need it) is refused.
    /// The cpuset is checked either way.
    pub cpuset: bool,
    pub irqs: Vec<u32>,
    pub duration: Option<Duration>,
    pub status_every: Duration,
    /// Where every change is recorded before it is made, so that the next agent repairs what a
    /// killed one left (see [`crate::state`]); none: changes live in memory only.
    pub state_file: Option<PathBuf>,
}

impl Default for Opts {
    fn default() -> Self {
        Self {
            primaries: Vec::new(),
            secondaries: Vec::new(),
            secondary_cores: Cpus::new(),
            controller: serde_json::from_value(json!({"kind": "harvest_acbf"})).expect("default controller"),
            poll: Duration::from_millis(5),
            activity: Activity::Tasks,
            busy_fraction: 0.5,
            listen: None,
            cgroup_root: PathBuf::from("/sys/fs/cgroup"),
            proc_root: PathBuf::from("/proc"),
            cpuset: true,
            irqs: Vec::new(),
            duration: None,
            status_every: Duration::from_secs(1),
            state_file: None,
        }
    }
}

/// The controller configuration with the agent's poll period (the controllers tick at their
/// `poll_us`) and a Primary's registered parameters; harvest controllers only.
pub fn controller_for(
    cfg: &AllocatorCfg,
    poll: Duration,
    reg: Option<&Registration>,
) -> Result<AllocatorCfg, String> {
    let mut cfg = cfg.clone();
    let poll_us = poll.as_secs_f64() * 1e6;
    let (threshold, low_tic, target, stat) = match reg {
        Some(Registration::Primary { threshold, low_tic, target_idle, static_target_idle, .. }) => {
            (*threshold, *low_tic, *target_idle, *static_target_idle)
        }
        _ => (None, None, None, None),
    };
    match &mut cfg {
        AllocatorCfg::HarvestAcbf(c) => {
            c.poll_us = poll_us;
            if let Some(t) = threshold {
                c.threshold = t;
            }
            if let Some(l) = low_tic {
                c.min_buffer = l;
            }
            if let Some(s) = stat {
                c.max_buffer = s;
            }
        }
        AllocatorCfg::HarvestStatic(c) => {
            c.poll_us = poll_us;
            if let Some(t) = target {
                c.buffer = t;
            }
        }
        AllocatorCfg::HarvestSmart(c) => c.poll_us = poll_us,
        AllocatorCfg::HarvestCfs(_) => {
            return Err("--controller.kind: `harvest_cfs` is not allowed in the agent (cgroups shares and quota are the \
                        kernel's own mechanism: set cpu.max / cpu.weight): use harvest_acbf, harvest_static or harvest_smart"
                .into())
        }
        _ => {
            return Err("--controller.kind: not a harvesting controller: use harvest_acbf, harvest_static or harvest_smart".into())
        }
    }
    alloc::validate(&cfg, "--controller").map_err(|e| e.to_string())?;
    Ok(cfg)
}

/// The view a controller gets of one Primary at a tick.
struct View {
    now: Nanos,
    /// Per core (in the Primary's CPU-list order): lent, idle.
    cores: Vec<(bool, bool)>,
    queued: u32,
}

impl AllocView for View {
    fn now(&self) -> Nanos {
        self.now
    }
    fn active(&self) -> usize {
        self.cores.iter().filter(|c| !c.0).count()
    }
    fn waking(&self) -> usize {
        // Evictions complete inside the tick that decides them.
        0
    }
    fn parked(&self) -> usize {
        self.cores.iter().filter(|c| c.0).count()
    }
    fn busy_search_totals(&self) -> (Nanos, Nanos) {
        (0, 0)
    }
    fn for_each_queued(&self, f: &mut dyn FnMut(CoreId, &CoreObs)) {
        if self.queued > 0 {
            let mut o = CoreObs::new(CoreState::Parked);
            o.queued = self.queued;
            f(0, &o);
        }
    }
    fn for_each_active(&self, f: &mut dyn FnMut(CoreId, &CoreObs)) {
        for (i, c) in self.cores.iter().enumerate().filter(|(_, c)| !c.0) {
            let _ = c;
            f(i as CoreId, &CoreObs::new(CoreState::Active));
        }
    }
    fn prev(&self, _core: CoreId) -> CoreObs {
        CoreObs::new(CoreState::Active)
    }
    fn for_each_idle(&self, f: &mut dyn FnMut(CoreId)) {
        for (i, c) in self.cores.iter().enumerate() {
            if !c.0 && c.1 {
                f(i as CoreId);
            }
        }
    }
}

struct Primary {
    name: String,
    /// The pod UID it was registered by, if any (a re-sent registration is recognised by it).
    pod: Option<String>,
    pids: Vec<i32>,
    cpus: Vec<usize>,
    ctl: Box<dyn CoreAllocator>,
    lent: Vec<bool>,
    /// Cumulative time lent, per core, ns.
    lent_ns: Vec<u64>,
    /// Cumulative time the Primary kept the core busy (as monitored), per core, ns.
    busy_ns: Vec<u64>,
    /// Busy ns per core as of the previous status line, and lent ns.
    status_busy: Vec<u64>,
    status_lent: Vec<u64>,
    lends: u64,
    evictions: u64,
    demand_evictions: u64,
    /// Lends the controller decided that the Secondary could not take (its cpuset), undone.
    refused_lends: u64,
}

/// What the monitor read of the cores over one tick.
#[derive(Default)]
struct Sample {
    /// Per CPU: busy ns over the tick, a Primary thread running or runnable there at the read.
    delta: HashMap<usize, u64>,
    running: HashMap<usize, bool>,
}

struct Monitor {
    activity: Activity,
    proc_root: PathBuf,
    /// tasks: run ns per (pid, tid) at the last read; cpu: busy ns per CPU.
    last_task: HashMap<(i32, i32), u64>,
    last_cpu: HashMap<usize, u64>,
    pub source: &'static str,
    /// Smallest non-zero increase of a counter seen, ns (the source's effective resolution).
    pub min_step_ns: u64,
}

impl Monitor {
    fn new(activity: Activity, proc_root: &Path) -> Self {
        let source = match activity {
            Activity::Tasks => "/proc/PID/task/TID/schedstat + stat (the Primary's threads)",
            Activity::Cpu if procfs::schedstat_busy(proc_root).is_some() => "/proc/schedstat (per CPU, ns)",
            Activity::Cpu => "/proc/stat (per CPU, USER_HZ ticks; /proc/schedstat absent)",
        };
        Self { activity, proc_root: proc_root.to_path_buf(), last_task: HashMap::new(), last_cpu: HashMap::new(), source, min_step_ns: u64::MAX }
    }

    fn step(&mut self, d: u64) {
        if d > 0 {
            self.min_step_ns = self.min_step_ns.min(d);
        }
    }

    fn read(&mut self, primaries: &[Primary]) -> Sample {
        let mut s = Sample::default();
        match self.activity {
            Activity::Tasks => {
                let mut seen = HashMap::new();
                for p in primaries {
                    for &pid in &p.pids {
                        for tid in procfs::tids(&self.proc_root, pid) {
                            let Some(t) = procfs::task(&self.proc_root, pid, tid) else { continue };
                            // A thread seen for the first time contributes from now on.
                            let prev = self.last_task.get(&(pid, tid)).copied().unwrap_or(t.run_ns);
                            let d = t.run_ns.saturating_sub(prev);
                            self.step(d);
                            *s.delta.entry(t.cpu).or_default() += d;
                            if t.running {
                                s.running.insert(t.cpu, true);
                            }
                            seen.insert((pid, tid), t.run_ns);
                        }
                    }
                }
                self.last_task = seen;
            }
            Activity::Cpu => {
                let v = procfs::schedstat_busy(&self.proc_root).or_else(|| procfs::stat_busy(&self.proc_root)).unwrap_or_default();
                for (cpu, busy) in v {
                    let d = busy.saturating_sub(self.last_cpu.get(&cpu).copied().unwrap_or(busy));
                    self.step(d);
                    s.delta.insert(cpu, d);
                    self.last_cpu.insert(cpu, busy);
                }
            }
        }
        s
    }
}

/// The agent's result (also the last line of the log).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub duration_s: f64,
    pub stopped_by: String,
    pub monitor: Value,
    pub ticks: u64,
    /// CPU time of the agent's own thread (monitor, controllers, actuation), s.
    pub cpu_s: f64,
    /// Wall-clock time per tick (descheduling included), µs.
    pub tick_cost_us_mean: f64,
    pub primaries: Vec<Value>,
    pub secondary: Value,
    pub actuation: Value,
    pub restore: Value,
    pub cpuset: Vec<String>,
    /// Why lends were refused (each reason once): the Secondary could not run on the core.
    pub lend_refusals: Vec<String>,
    pub irq: Value,
    pub refused: Vec<String>,
    /// The state file, what was repaired from it at start-up (a killed agent's changes), and
    /// state writes that failed.
    pub state: Value,
}

/// How long a core the Secondary could not take is not lent again (the controller asks at every
/// tick; its cpuset is checked again after this, or when the Secondaries change).
const BLOCK: Duration = Duration::from_secs(5);

pub struct Agent {
    opts: Opts,
    start: Instant,
    primaries: Vec<Primary>,
    sec: Secondary,
    monitor: Monitor,
    listener: Option<Listener>,
    /// The cpuset hierarchy the Secondaries' cpusets are read from (none: no cpuset controller
    /// found; then only the affinities' read-back checks a lend).
    hier: Option<Hierarchy>,
    /// Cores not to lend until the instant, and why (the Secondary could not take them).
    blocked: HashMap<usize, (Instant, String)>,
    lend_refusals: Vec<String>,
    cut_threads: u64,
    /// Secondary pods registered by UID, with their processes.
    sec_pods: BTreeMap<String, Vec<i32>>,
    log: Box<dyn Write + Send>,
    ticks: u64,
    tick_cost: Duration,
    act_n: u64,
    act_us: f64,
    act_max_us: f64,
    stray: u64,
    act_errors: Vec<String>,
    refused: Vec<String>,
    sec_cpu0: HashMap<i32, u64>,
    repaired: Option<crate::state::Repair>,
}

fn thread_cpu_s() -> f64 {
    // SAFETY: an all-zero timespec is valid, and clock_gettime writes into it.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer is to a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

impl Agent {
    pub fn new(opts: Opts, log: Box<dyn Write + Send>) -> Result<Self, String> {
        controller_for(&opts.controller, opts.poll, None)?;
        if !(0.0..=1.0).contains(&opts.busy_fraction) || opts.busy_fraction == 0.0 {
            return Err(format!("--busy-fraction: {} is not allowed: use a fraction in (0, 1]", opts.busy_fraction));
        }
        let listener = opts.listen.map(Listener::start).transpose()?;
        let mut sec = Secondary::new(&opts.proc_root);
        // Before any mask is read as an original: put back what a killed agent left changed.
        let repaired = match &opts.state_file {
            Some(p) => sec.use_state_file(p)?,
            None => None,
        };
        let hier = match cpuset::find_hierarchy(&opts.proc_root, &opts.cgroup_root) {
            Ok(h) => {
                sec.cpuset_notes.insert(format!(
                    "Secondaries' cpusets checked before each lend in the {h}{}",
                    if opts.cpuset { "; widened where they lack a lent core" } else { "; never written (--no-cpuset): such lends are refused" }
                ));
                Some(h)
            }
            Err(e) => {
                sec.cpuset_notes.insert(format!("{e}; each lend is checked by reading the affinities back"));
                None
            }
        };
        let monitor = Monitor::new(opts.activity, &opts.proc_root);
        let mut a = Self {
            start: Instant::now(),
            primaries: Vec::new(),
            sec,
            monitor,
            listener,
            hier,
            blocked: HashMap::new(),
            lend_refusals: Vec::new(),
            cut_threads: 0,
            sec_pods: BTreeMap::new(),
            log,
            ticks: 0,
            tick_cost: Duration::ZERO,
            act_n: 0,
            act_us: 0.0,
            act_max_us: 0.0,
            stray: 0,
            act_errors: Vec::new(),
            refused: Vec::new(),
            sec_cpu0: HashMap::new(),
            repaired,
            opts,
        };
        a.emit(json!({
            "event": "start",
            // The agent's clock (t_s) in wall-clock time, to line the log up with other records.
            "unix_s": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()) - a.now_s(),
            "monitor": a.monitor.source,
            "poll_ms": a.opts.poll.as_secs_f64() * 1e3,
            "controller": serde_json::to_value(&a.opts.controller).unwrap_or(Value::Null),
            "listen": a.listener.as_ref().map(|l| l.addr.to_string()),
            "secondary_cores": format_list(&a.opts.secondary_cores),
            "cpuset": a.hier.as_ref().map(|h| h.to_string()),
            "cpuset_write": a.opts.cpuset,
            "state_file": a.sec.state_path().map(|p| p.display().to_string()),
        }));
        if let Some(r) = a.repaired.clone() {
            let mut v = serde_json::to_value(&r).unwrap_or(Value::Null);
            v["event"] = json!("repair");
            a.emit(v);
        }
        for p in a.opts.primaries.clone() {
            a.add_primary(p, None)?;
        }
        for pid in a.opts.secondaries.clone() {
            a.add_secondary(vec![pid])?;
        }
        Ok(a)
    }

    pub fn listen_addr(&self) -> Option<SocketAddr> {
        self.listener.as_ref().map(|l| l.addr)
    }

    fn now_s(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn emit(&mut self, mut v: Value) {
        v["t_s"] = json!((self.now_s() * 1e6).round() / 1e6);
        // One write per line: the log is a file that others read while it grows, and `{v}`
        // formats in many small writes, so a reader could see half a line.
        let line = format!("{v}\n");
        let _ = self.log.write_all(line.as_bytes());
        let _ = self.log.flush();
    }

    fn add_primary(&mut self, p: PrimaryOpt, reg: Option<&Registration>) -> Result<(), String> {
        if p.cpus.is_empty() {
            return Err(format!("Primary {}: empty CPU list", p.name));
        }
        let online = crate::cpus::online();
        if !p.cpus.is_subset(&online) {
            return Err(format!("Primary {}: CPUs {} are not all online ({})", p.name, format_list(&p.cpus), format_list(&online)));
        }
        if let Some(q) = self.primaries.iter().find(|q| q.cpus.iter().any(|c| p.cpus.contains(c))) {
            return Err(format!("Primary {}: CPUs {} overlap Primary {}'s", p.name, format_list(&p.cpus), q.name));
        }
        if p.cpus.iter().any(|c| self.opts.secondary_cores.contains(c)) {
            return Err(format!("Primary {}: CPUs {} overlap --secondary-cores", p.name, format_list(&p.cpus)));
        }
        if self.opts.activity == Activity::Tasks && p.pids.is_empty() {
            return Err(format!("Primary {}: the tasks monitor needs its processes (pid or pod_id)", p.name));
        }
        let cfg = controller_for(&self.opts.controller, self.opts.poll, reg)?;
        // The Secondaries must be able to run on every core this Primary may lend.
        let pids = self.sec.pids.clone();
        let wrote = self.ensure_cpusets(&pids, &p.cpus).map_err(|r| format!("Primary {}: refused: {}", p.name, r.reason))?;
        let n = p.cpus.len();
        let ctl = alloc::build(&cfg, &microsched_core::env::AllocEnv::unseeded(n as u32)).map_err(|e| format!("Primary {}: {e}", p.name))?;
        self.emit(json!({"event": "primary", "name": p.name, "cpus": format_list(&p.cpus), "pids": p.pids, "controller": cfg}));
        let pod = reg.and_then(|r| match r {
            Registration::Primary { pod_id: Some(pod), .. } => Some(pods::pod_uid(pod)),
            _ => None,
        });
        self.primaries.push(Primary {
            name: p.name,
            pod,
            pids: p.pids,
            cpus: p.cpus.into_iter().collect(),
            ctl,
            lent: vec![false; n],
            lent_ns: vec![0; n],
            busy_ns: vec![0; n],
            status_busy: vec![0; n],
            status_lent: vec![0; n],
            lends: 0,
            evictions: 0,
            demand_evictions: 0,
            refused_lends: 0,
        });
        if wrote {
            // A v1 cpuset write resets its tasks' affinities: give the Secondary its mask again.
            self.actuate(&Cpus::new(), "cpuset");
        }
        Ok(())
    }

    /// Every core the Secondary may be given: the Primaries' and its dedicated ones.
    fn harvestable(&self) -> Cpus {
        let mut c = self.opts.secondary_cores.clone();
        for p in &self.primaries {
            c.extend(p.cpus.iter().copied());
        }
        c
    }

    fn lent_cores(&self) -> Cpus {
        self.primaries.iter().flat_map(|p| p.cpus.iter().zip(&p.lent).filter(|(_, l)| **l).map(|(c, _)| *c)).collect()
    }

    /// Makes the cpusets of `pids` hold `need` (widening them unless --no-cpuset); true if a
    /// cpuset was written. Without a cpuset hierarchy there is nothing to check.
    fn ensure_cpusets(&mut self, pids: &[i32], need: &Cpus) -> Result<bool, Refusal> {
        let Some(h) = self.hier.clone() else { return Ok(false) };
        if pids.is_empty() || need.is_empty() {
            return Ok(false);
        }
        let written = self.sec.ensure_cpuset(&h, pids, need, self.opts.cpuset)?;
        if written.is_empty() {
            return Ok(false);
        }
        let files: Vec<String> = written.iter().map(|f| f.display().to_string()).collect();
        self.emit(json!({"event": "cpuset", "files": files, "holds": format_list(need)}));
        Ok(true)
    }

    /// Adds Secondary processes (those not there yet). Their cpusets must hold every core they
    /// may be lent (widened unless --no-cpuset), else the registration is refused: a lend to
    /// them would be in name only.
    fn add_secondary(&mut self, pids: Vec<i32>) -> Result<(), String> {
        let mut new: Vec<i32> = pids.into_iter().filter(|p| !self.sec.pids.contains(p)).collect();
        new.sort_unstable();
        new.dedup();
        if new.is_empty() {
            return Ok(());
        }
        let need = self.harvestable();
        self.ensure_cpusets(&new, &need).map_err(|r| r.reason)?;
        for pid in new {
            self.sec.pids.push(pid);
            self.sec_cpu0.insert(pid, procfs::process_cpu_ns(&self.opts.proc_root, pid).unwrap_or(0));
            self.emit(json!({"event": "secondary", "pid": pid}));
        }
        // Other processes, other cpusets: blocked cores may be lendable now.
        self.blocked.clear();
        // It gets the current mask at once (nothing lent and no dedicated core: stopped).
        self.actuate(&Cpus::new(), "register");
        Ok(())
    }

    fn mask(&self) -> Cpus {
        let mut m = self.opts.secondary_cores.clone();
        for p in &self.primaries {
            m.extend(p.cpus.iter().zip(&p.lent).filter(|(_, l)| **l).map(|(c, _)| *c));
        }
        m
    }

    /// Takes back lent `cores` the Secondary cannot run on, so that no lend is counted that it
    /// cannot use; they are not lent again for [`BLOCK`]. Returns the cores taken back.
    fn refuse_lends(&mut self, cores: &Cpus, reason: &str, new: &Cpus) -> Cpus {
        let mut undone = Cpus::new();
        let mut events = Vec::new();
        for p in &mut self.primaries {
            for (i, &cpu) in p.cpus.iter().enumerate() {
                if p.lent[i] && cores.contains(&cpu) {
                    p.lent[i] = false;
                    p.refused_lends += 1;
                    undone.insert(cpu);
                    events.push(json!({"event": "lend_refused", "primary": p.name, "cpu": cpu,
                                       "lent_before": !new.contains(&cpu), "reason": reason}));
                }
            }
        }
        for c in &undone {
            self.blocked.insert(*c, (Instant::now() + BLOCK, reason.to_string()));
        }
        if !undone.is_empty() && !self.lend_refusals.iter().any(|r| r == reason) && self.lend_refusals.len() < 20 {
            self.lend_refusals.push(reason.to_string());
        }
        for e in events {
            self.emit(e);
        }
        undone
    }

    /// Gives the Secondary the current mask (`new`: the cores just lent, for phase 1). Every lent
    /// core is checked to be one the Secondary can run on, before (its cpuset: on a lend and on
    /// `check`) and after (each thread's affinity read back: the kernel cuts a mask to the
    /// cpuset without an error); a core that fails either is taken back at once and reported
    /// (`lend_refused`). Returns the actuation and the cores taken back.
    fn actuate(&mut self, new: &Cpus, why: &str) -> (Actuation, Cpus) {
        let mut undone = Cpus::new();
        if (!new.is_empty() || why == "check") && !self.sec.pids.is_empty() {
            let pids = self.sec.pids.clone();
            let lent = self.lent_cores();
            match self.ensure_cpusets(&pids, &lent) {
                Ok(_) => {}
                Err(r) => undone.extend(self.refuse_lends(&r.missing, &r.reason, new)),
            }
        }
        let mask = self.mask();
        let first: Cpus = new.intersection(&mask).copied().collect();
        let mut a = self.sec.assign(&mask, &first);
        self.cut_threads += a.cut_threads as u64;
        if !a.cut.is_empty() {
            let reason = format!(
                "the Secondary cannot run on CPUs {}: {}",
                format_list(&a.cut),
                a.cut_example.clone().unwrap_or_default()
            );
            let lent_cut: Cpus = a.cut.intersection(&self.lent_cores()).copied().collect();
            let dedicated: Cpus = a.cut.intersection(&self.opts.secondary_cores).copied().collect();
            if !dedicated.is_empty() {
                self.sec.cpuset_notes.insert(format!("--secondary-cores {}: {reason}", format_list(&dedicated)));
            }
            if !lent_cut.is_empty() {
                undone.extend(self.refuse_lends(&lent_cut, &reason, new));
                let b = self.sec.assign(&self.mask(), &Cpus::new());
                a.us += b.us;
                a.stray = b.stray;
                a.phase2 += b.phase2;
                a.errors.extend(b.errors);
            }
        }
        if !self.opts.irqs.is_empty() && (why != "check" || !undone.is_empty()) {
            let irqs = self.opts.irqs.clone();
            let proc_root = self.opts.proc_root.clone();
            let mask = self.mask();
            self.sec.steer_irqs(&proc_root, &irqs, &mask);
        }
        self.stray += a.stray as u64;
        if why != "check" {
            self.act_n += 1;
            self.act_us += a.us;
            self.act_max_us = self.act_max_us.max(a.us);
        }
        for e in &a.errors {
            if self.act_errors.len() < 20 {
                self.act_errors.push(format!("{why}: {e}"));
            }
        }
        (a, undone)
    }

    fn registrations(&mut self) {
        let Some(l) = &self.listener else { return };
        let msgs: Vec<_> = l.rx.try_iter().collect();
        for (m, verdict) in msgs {
            let r = m.and_then(|reg| self.register(reg));
            if let Some(v) = verdict {
                let _ = v.send(r.clone());
            }
            if let Err(e) = r {
                self.emit(json!({"event": "refused", "reason": e}));
                self.refused.push(e);
            }
        }
    }

    /// Carries out one registration. Idempotent: a re-sent registration of a Primary (same pod,
    /// or same pid, with the same cores) or of a Secondary already registered changes nothing
    /// and is acknowledged (the sidecar re-sends its pods every pass, so that an agent that
    /// restarted gets them back); it costs no cgroup walk.
    pub(crate) fn register(&mut self, reg: Registration) -> Result<(), String> {
        match reg {
            reg @ Registration::Primary { .. } => self.register_primary(&reg),
            Registration::Secondary { pid, pod_id } => {
                let uid = pod_id.as_deref().map(pods::pod_uid);
                let known = match (pid, &uid) {
                    (Some(p), _) => self.sec.pids.contains(&p),
                    (None, Some(u)) => self.sec_pods.get(u).is_some_and(|v| v.iter().any(|p| self.sec.pids.contains(p))),
                    _ => false,
                };
                if known {
                    return Ok(());
                }
                let pids = match (pid, &pod_id) {
                    (Some(p), _) => vec![p],
                    (None, Some(pod)) => pods::pod_pids(&self.opts.cgroup_root, pod),
                    _ => vec![],
                };
                let alive = |p: &i32| self.opts.proc_root.join(p.to_string()).exists();
                if pids.is_empty() || !pids.iter().all(alive) {
                    return Err(match (pid, &pod_id) {
                        (Some(p), _) => format!("Secondary pid {p}: no such process"),
                        _ => format!(
                            "Secondary {}: no processes found under {}",
                            pod_id.as_deref().unwrap_or(""),
                            self.opts.cgroup_root.display()
                        ),
                    });
                }
                self.add_secondary(pids.clone())?;
                if let (None, Some(u)) = (pid, uid) {
                    self.sec_pods.insert(u, pids);
                }
                Ok(())
            }
        }
    }

    fn register_primary(&mut self, reg: &Registration) -> Result<(), String> {
        let Registration::Primary { cpus, pid, pod_id, .. } = reg else { unreachable!() };
        let cpus = crate::cpus::parse_list(cpus, "cpuList")?;
        let uid = pod_id.as_deref().map(pods::pod_uid);
        let same = |q: &Primary| match (&uid, pid) {
            (Some(u), _) => q.pod.as_ref() == Some(u),
            (None, Some(p)) => q.pids.contains(p),
            _ => false,
        };
        if let Some(q) = self.primaries.iter().find(|q| same(q)) {
            let have: Cpus = q.cpus.iter().copied().collect();
            return if have == cpus {
                Ok(())
            } else {
                Err(format!(
                    "Primary {}: already registered with CPUs {}; a registration with CPUs {} is refused (it may \
                     register other cores once it has exited)",
                    q.name,
                    format_list(&have),
                    format_list(&cpus)
                ))
            };
        }
        let pids = match (pid, pod_id) {
            (Some(p), _) => vec![*p],
            (None, Some(pod)) => pods::pod_pids(&self.opts.cgroup_root, pod),
            _ => vec![],
        };
        let name = pod_id.clone().unwrap_or_else(|| format!("primary{}", self.primaries.len()));
        self.add_primary(PrimaryOpt { pids, cpus, name }, Some(reg))
    }

    /// One monitor read, controller tick per Primary and the resulting actuation, at `now` (ns
    /// since the agent started), `dt` after the previous tick.
    fn tick(&mut self, now: Nanos, dt: Nanos) {
        let s = self.monitor.read(&self.primaries);
        let bf = self.opts.busy_fraction;
        let tasks = self.opts.activity == Activity::Tasks;
        let mut decisions = Vec::new();
        let t = Instant::now();
        self.blocked.retain(|_, (until, _)| *until > t);
        for (pi, p) in self.primaries.iter_mut().enumerate() {
            let mut view = View { now, cores: Vec::with_capacity(p.cpus.len()), queued: 0 };
            for (i, &cpu) in p.cpus.iter().enumerate() {
                let d = s.delta.get(&cpu).copied().unwrap_or(0);
                let running = s.running.get(&cpu).copied().unwrap_or(false);
                let busy = running || d as f64 >= bf * dt as f64;
                if p.lent[i] {
                    p.lent_ns[i] += dt;
                    if tasks && busy {
                        view.queued += 1;
                    }
                } else if busy {
                    p.busy_ns[i] += dt;
                }
                view.cores.push((p.lent[i], !busy));
            }
            if view.queued > 0 {
                // The kernel put a Primary thread on a lent core: no held core was free for it
                // (another tenant's work, which the tasks monitor does not see, or the Primary's
                // own). It is the simulator's thread woken on a lent core: the held cores count
                // as busy, so the controller evicts at once.
                for c in view.cores.iter_mut().filter(|c| !c.0) {
                    c.1 = false;
                }
            }
            let idle = view.cores.iter().filter(|c| !c.0 && c.1).count();
            let demand = view.queued;
            match p.ctl.tick(&view) {
                AllocAction::Nothing => {}
                AllocAction::Yield(c) => {
                    let c = c as usize;
                    // A core the Secondary could not take stays with the Primary for a while.
                    if c < p.lent.len() && !p.lent[c] && !self.blocked.contains_key(&p.cpus[c]) {
                        p.lent[c] = true;
                        p.lends += 1;
                        decisions.push((pi, "lend", p.cpus[c], idle, demand));
                    }
                }
                AllocAction::Grant => {
                    // Evict where the Primary showed up, else the lowest lent core (the
                    // artifact keeps lending from the end of the list).
                    let pick = (0..p.lent.len()).filter(|&i| p.lent[i]).min_by_key(|&i| {
                        let cpu = p.cpus[i];
                        !(s.running.get(&cpu).copied().unwrap_or(false) || s.delta.get(&cpu).copied().unwrap_or(0) > 0)
                    });
                    if let Some(i) = pick {
                        p.lent[i] = false;
                        p.evictions += 1;
                        p.demand_evictions += (demand > 0 && idle == 0) as u64;
                        decisions.push((pi, "evict", p.cpus[i], idle, demand));
                    }
                }
            }
        }
        for (pi, what, cpu, idle, demand) in decisions {
            let new = if what == "lend" { Cpus::from([cpu]) } else { Cpus::new() };
            let (a, undone) = self.actuate(&new, what);
            if what == "lend" && undone.contains(&cpu) {
                // Refused (logged as lend_refused): not a lend.
                self.primaries[pi].lends -= 1;
                continue;
            }
            let p = &self.primaries[pi];
            let lent: Cpus = p.cpus.iter().zip(&p.lent).filter(|(_, l)| **l).map(|(c, _)| *c).collect();
            let v = json!({
                "event": what, "primary": p.name, "cpu": cpu, "lent": format_list(&lent),
                "held_idle": idle, "primary_on_lent": demand, "signal": p.ctl.signal(),
                "secondary_mask": format_list(&self.mask()), "stopped": self.sec.stopped,
                "actuation_us": (a.us * 10.0).round() / 10.0, "phase1": a.phase1, "phase2": a.phase2, "stray": a.stray,
            });
            self.emit(v);
        }
    }

    /// Forgets exited processes: a Primary whose processes are all gone stops lending (its
    /// cores leave the Secondary's mask), an exited Secondary stops being moved.
    fn reap(&mut self) {
        let alive = |root: &Path, p: i32| root.join(p.to_string()).exists();
        let root = self.opts.proc_root.clone();
        let gone: Vec<usize> = (0..self.primaries.len()).filter(|&i| !self.primaries[i].pids.iter().any(|&p| alive(&root, p))).collect();
        for &i in gone.iter().rev() {
            let p = self.primaries.remove(i);
            self.emit(json!({"event": "primary_exited", "primary": p.name, "cpus": p.cpus}));
        }
        let before = self.sec.pids.len();
        self.sec.pids.retain(|&p| alive(&root, p));
        if self.sec.pids.len() != before {
            let live = self.sec.pids.clone();
            self.sec_pods.retain(|_, v| v.iter().any(|p| live.contains(p)));
            self.blocked.clear();
        }
        if !gone.is_empty() || self.sec.pids.len() != before {
            self.actuate(&Cpus::new(), "exit");
        }
    }

    fn status(&mut self, interval: Duration) {
        let ns = interval.as_nanos().max(1) as f64;
        let sec_cpu: u64 = self.sec.pids.iter().map(|&p| procfs::process_cpu_ns(&self.opts.proc_root, p).unwrap_or(0).saturating_sub(self.sec_cpu0[&p])).sum();
        let mut lines = Vec::new();
        for p in &mut self.primaries {
            let busy: Vec<f64> = p.busy_ns.iter().zip(&p.status_busy).map(|(a, b)| ((a - b) as f64 / ns * 1e3).round() / 1e3).collect();
            let lent: f64 = p.lent_ns.iter().zip(&p.status_lent).map(|(a, b)| (a - b) as f64 / ns).sum();
            p.status_busy = p.busy_ns.clone();
            p.status_lent = p.lent_ns.clone();
            lines.push(json!({"event": "status", "primary": p.name, "lent_cores": (lent * 1e3).round() / 1e3, "busy": busy, "signal": p.ctl.signal()}));
        }
        for mut l in lines {
            l["secondary_cpu_s"] = json!((sec_cpu as f64 / 1e9 * 1e3).round() / 1e3);
            self.emit(l);
        }
    }

    /// Runs until `stop()` says so or the duration ends; restores everything before returning.
    pub fn run(mut self, stop: &dyn Fn() -> Option<String>) -> Report {
        let poll = self.opts.poll;
        let mut next = Instant::now() + poll;
        let mut last = Instant::now();
        let mut last_status = Instant::now();
        let stopped_by = loop {
            if let Some(why) = stop() {
                break why;
            }
            if self.opts.duration.is_some_and(|d| self.start.elapsed() >= d) {
                break "duration".to_string();
            }
            let t0 = Instant::now();
            self.registrations();
            let dt = t0.duration_since(last).as_nanos() as Nanos;
            last = t0;
            self.tick(t0.duration_since(self.start).as_nanos() as Nanos, dt);
            if self.ticks % 20 == 19 {
                self.reap();
            }
            // Threads the Secondary created since inherit a mask, and a cpuset can change under
            // the agent (the kubelet's CPU manager rewrites containers' cpusets when its shared
            // pool changes): re-check both now and then.
            if self.ticks % 20 == 19 && !self.sec.pids.is_empty() {
                self.actuate(&Cpus::new(), "check");
            }
            if last_status.elapsed() >= self.opts.status_every {
                let iv = last_status.elapsed();
                last_status = Instant::now();
                self.status(iv);
            }
            self.ticks += 1;
            self.tick_cost += t0.elapsed();
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            }
            next = next.max(now) + poll;
            // Skip ticks missed while descheduled rather than catching up in a burst.
            if next < Instant::now() {
                next = Instant::now() + poll;
            }
        };
        self.finish(stopped_by)
    }

    fn finish(mut self, stopped_by: String) -> Report {
        // Messages that arrived meanwhile: refused ones are logged, registrations turned down.
        let pending: Vec<_> = self.listener.take().map(|l| l.rx.try_iter().collect()).unwrap_or_default();
        for (m, verdict) in pending {
            if let Some(v) = verdict {
                let _ = v.send(Err("the agent is stopping".into()));
            }
            let e = m.err().unwrap_or_else(|| "the agent is stopping".into());
            self.emit(json!({"event": "refused", "reason": e}));
            self.refused.push(e);
        }
        let dur = self.start.elapsed().as_secs_f64();
        let sec_cpu: u64 = self.sec.pids.iter().map(|&p| procfs::process_cpu_ns(&self.opts.proc_root, p).unwrap_or(0).saturating_sub(self.sec_cpu0[&p])).sum();
        let (restored, restore_errors) = self.sec.restore();
        let primaries = self
            .primaries
            .iter()
            .map(|p| {
                let h = p.ctl.harvest_report().unwrap_or_default();
                json!({
                    "name": p.name, "cpus": p.cpus, "pids": p.pids, "controller": p.ctl.name(),
                    "lent_core_s": p.lent_ns.iter().sum::<u64>() as f64 / 1e9,
                    "lent_fraction": p.lent_ns.iter().map(|&x| x as f64 / 1e9 / dur).collect::<Vec<_>>(),
                    "busy_fraction": p.busy_ns.iter().map(|&x| x as f64 / 1e9 / dur).collect::<Vec<_>>(),
                    "lends": p.lends, "evictions": p.evictions, "demand_evictions": p.demand_evictions,
                    "refused_lends": p.refused_lends,
                    "buffer_mean": h.buffer_mean, "all_busy_fraction": h.all_busy_fraction, "signal": p.ctl.signal(),
                })
            })
            .collect();
        let rep = Report {
            duration_s: dur,
            stopped_by,
            monitor: json!({
                "source": self.monitor.source,
                "poll_ms": self.opts.poll.as_secs_f64() * 1e3,
                "min_counter_step_ns": (self.monitor.min_step_ns != u64::MAX).then_some(self.monitor.min_step_ns),
                "busy_fraction": self.opts.busy_fraction,
            }),
            ticks: self.ticks,
            cpu_s: thread_cpu_s(),
            tick_cost_us_mean: if self.ticks > 0 { self.tick_cost.as_secs_f64() * 1e6 / self.ticks as f64 } else { 0.0 },
            primaries,
            secondary: json!({"pids": self.sec.pids, "cpu_s": sec_cpu as f64 / 1e9}),
            actuation: json!({
                "count": self.act_n, "mean_us": if self.act_n > 0 { self.act_us / self.act_n as f64 } else { 0.0 },
                "max_us": self.act_max_us, "stray_threads": self.stray, "errors": self.act_errors,
                "cut_threads": self.cut_threads,
            }),
            restore: json!({"affinities": restored, "errors": restore_errors}),
            cpuset: self.sec.cpuset_notes.iter().cloned().collect(),
            lend_refusals: self.lend_refusals.clone(),
            irq: json!({"irqs": self.opts.irqs, "writes": self.sec.irq_writes, "notes": self.sec.irq_notes.iter().cloned().collect::<Vec<_>>()}),
            refused: self.refused.clone(),
            state: json!({
                "file": self.sec.state_path().map(|p| p.display().to_string()),
                "repaired": self.repaired,
                "errors": self.sec.state_errors,
            }),
        };
        let mut v = serde_json::to_value(&rep).unwrap_or(Value::Null);
        v["event"] = json!("end");
        self.emit(v);
        rep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake /proc with one Primary process whose threads are (state, cpu, run ns).
    fn write_tasks(root: &Path, pid: i32, tasks: &[(i32, char, usize, u64)]) {
        let _ = std::fs::remove_dir_all(root.join(pid.to_string()));
        for &(tid, st, cpu, run) in tasks {
            let d = root.join(pid.to_string()).join("task").join(tid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            // Fields 3..: state, then 35 fields, then the processor (field 39).
            let mut f = vec![st.to_string()];
            f.extend((0..35).map(|_| "0".to_string()));
            f.push(cpu.to_string());
            std::fs::write(d.join("stat"), format!("{tid} (wor ker) {}", f.join(" "))).unwrap();
            std::fs::write(d.join("schedstat"), format!("{run} 0 0\n")).unwrap();
        }
    }

    #[test]
    fn lends_an_idle_core_and_evicts_when_a_primary_thread_lands_on_it() {
        let root = std::env::temp_dir().join(format!("msh-proc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let online = crate::cpus::online();
        if online.len() < 2 {
            return;
        }
        let cpus: Cpus = online.iter().take(2).copied().collect();
        let (c0, c1) = (*cpus.iter().next().unwrap(), *cpus.iter().nth(1).unwrap());
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("mounts"), "").unwrap();
        write_tasks(&root, 7, &[(7, 'S', c0, 1000), (8, 'S', c1, 1000)]);
        let opts = Opts {
            primaries: vec![PrimaryOpt { pids: vec![7], cpus: cpus.clone(), name: "p".into() }],
            controller: serde_json::from_value(json!({"kind": "harvest_static", "buffer": 1})).unwrap(),
            proc_root: root.clone(),
            ..Opts::default()
        };
        let mut a = Agent::new(opts, Box::new(std::io::sink())).unwrap();
        let ms = 5_000_000;
        let mut now = 0;
        // Both held cores idle: a surplus of one over the buffer, lent at the next tick (the
        // lend latency, 30 µs, has passed), the highest core first.
        now += ms;
        a.tick(now, ms);
        now += ms;
        a.tick(now, ms);
        assert_eq!(a.primaries[0].lent, [false, true]);
        // The Primary busy on its held core only: the buffer is gone (0 idle < 1) -> evict.
        write_tasks(&root, 7, &[(7, 'R', c0, 5_000_000), (8, 'S', c0, 1000)]);
        now += ms;
        a.tick(now, ms);
        assert_eq!(a.primaries[0].lent, [false, false]);
        assert_eq!(a.primaries[0].demand_evictions, 0);
        // Idle again -> lent again; then a Primary thread shows up on the lent core while the
        // held one reads idle (someone else's work there): a demand eviction.
        write_tasks(&root, 7, &[(7, 'S', c0, 5_000_000), (8, 'S', c0, 1000)]);
        now += ms;
        a.tick(now, ms);
        now += ms;
        a.tick(now, ms);
        assert_eq!(a.primaries[0].lent, [false, true]);
        write_tasks(&root, 7, &[(7, 'S', c0, 5_000_000), (8, 'R', c1, 1000)]);
        now += ms;
        a.tick(now, ms);
        assert_eq!(a.primaries[0].lent, [false, false]);
        assert_eq!(a.primaries[0].demand_evictions, 1);
        // Busy time counts from the run-time counters too: 60 % of a tick on core 0.
        write_tasks(&root, 7, &[(7, 'S', c0, 8_000_000), (8, 'S', c0, 1000)]);
        now += ms;
        a.tick(now, ms);
        assert_eq!(a.primaries[0].lent, [false, false]);
        std::fs::remove_dir_all(&root).unwrap();
    }
}

#[cfg(test)]
#[path = "agent_safety_tests.rs"]
mod safety_tests;
