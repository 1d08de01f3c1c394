//! The agent's state file: what it is about to change (a thread's affinity, a cpuset, an IRQ
//! mask, a stopped process), written durably *before* the change, so that an agent killed
//! without a chance to restore (SIGKILL, an OOM kill, a power cut of the node's agent pod) is
//! repaired by the next one at start-up, before that one takes the current masks as originals.
//!
//! Each write replaces the file atomically (a temporary file in the same directory, fsync,
//! rename, fsync of the directory): a reader sees the old state or the new one, never half of
//! one. An entry is removed once what it records has been put back. A lock file beside it
//! (`flock`, released by the kernel when the agent dies, however it dies) keeps two live agents
//! from sharing one state file, where each would undo the other's changes.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cpus::{format_list, parse_list, set_affinity};

/// One thread's original affinity. `start` (its start time, /proc stat field 22, clock ticks
/// since boot) tells the thread from a later one that was given its id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Affinity {
    pub pid: i32,
    pub tid: i32,
    pub start: Option<u64>,
    pub cpus: String,
}

/// A process the agent stopped (SIGSTOP), with its start time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stopped {
    pub pid: i32,
    pub start: Option<u64>,
}

/// Everything changed and not yet put back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The agent that wrote it (for the reader's information).
    #[serde(default)]
    pub agent_pid: u32,
    #[serde(default)]
    pub affinities: Vec<Affinity>,
    /// Cpuset files written, with their original content.
    #[serde(default)]
    pub cpusets: BTreeMap<PathBuf, String>,
    /// IRQs steered, with their original `smp_affinity_list`.
    #[serde(default)]
    pub irqs: BTreeMap<u32, String>,
    #[serde(default)]
    pub stopped: Vec<Stopped>,
}

impl State {
    pub fn is_empty(&self) -> bool {
        self.affinities.is_empty() && self.cpusets.is_empty() && self.irqs.is_empty() && self.stopped.is_empty()
    }
}

/// What a start-up repair put back.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Repair {
    pub affinities: u32,
    pub cpusets: u32,
    pub irqs: u32,
    pub resumed: u32,
    /// Entries not put back because the thread or process is gone (or its id now names another).
    pub gone: u32,
    pub errors: Vec<String>,
}

/// Environment variable that makes the agent kill itself (SIGKILL) right after its Nth state
/// write, between the write and the change it announces: how the tests reach that instant.
pub const CRASH_ENV: &str = "MICROSCHED_HARVEST_CRASH_AFTER_WRITES";

/// The state file, held (locked) for the agent's life.
#[derive(Debug)]
pub struct StateFile {
    path: PathBuf,
    /// Keeps the lock: closing it (also by the kernel at the agent's death) releases it.
    _lock: File,
    writes: u64,
    crash_after: Option<u64>,
}

/// The start time of thread `tid` of `pid` (stat field 22), if it exists.
pub fn start_time(proc_root: &Path, pid: i32, tid: i32) -> Option<u64> {
    let stat = fs::read_to_string(proc_root.join(pid.to_string()).join("task").join(tid.to_string()).join("stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

impl StateFile {
    /// Opens (and locks) the state file at `path`, creating its directory; returns it with what
    /// a previous agent left there (empty if nothing). Errors name `--state-file`.
    pub fn open(path: &Path) -> Result<(Self, State), String> {
        let err = |what: &str, e: &dyn std::fmt::Display| format!("--state-file: {}: {what}: {e}", path.display());
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|e| err("cannot create its directory", &e))?;
        }
        let lock_path = lock_path(path);
        let lock = OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).map_err(|e| {
            err(&format!("cannot create its lock file {} (the agent needs a writable folder for the file and its lock)", lock_path.display()), &e)
        })?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = io::Error::last_os_error();
            return Err(if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                format!(
                    "--state-file: {} is in use by another running agent (it holds {}): two agents on one state file \
                     would undo each other's changes; give each agent its own --state-file",
                    path.display(),
                    lock_path.display()
                )
            } else {
                err("cannot lock", &e)
            });
        }
        let state = match fs::read(path) {
            Ok(b) => serde_json::from_slice::<State>(&b)
                .map_err(|e| err("not a state file the agent wrote (remove it if nothing needs repair)", &e))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => State::default(),
            Err(e) => return Err(err("cannot read", &e)),
        };
        let crash_after = std::env::var(CRASH_ENV).ok().and_then(|v| v.trim().parse().ok());
        Ok((Self { path: path.to_path_buf(), _lock: lock, writes: 0, crash_after }, state))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the file with `state`, durably (temporary file, fsync, rename, fsync of the
    /// directory). An empty state removes the file.
    pub fn write(&mut self, state: &State) -> io::Result<()> {
        let dir = self.path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if state.is_empty() {
            match fs::remove_file(&self.path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        } else {
            let tmp = dir.join(format!(
                ".{}.tmp{}",
                self.path.file_name().and_then(|n| n.to_str()).unwrap_or("state"),
                std::process::id()
            ));
            let mut f = File::create(&tmp)?;
            f.write_all(&serde_json::to_vec(state).map_err(io::Error::other)?)?;
            f.sync_all()?;
            drop(f);
            fs::rename(&tmp, &self.path)?;
        }
        File::open(dir)?.sync_all()?;
        self.writes += 1;
        if self.crash_after == Some(self.writes) {
            // The test hook: die as an OOM kill would, after the write, before the change.
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
        Ok(())
    }
}

fn lock_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(".lock");
    PathBuf::from(s)
}

/// Puts back what `state` records (a dead agent's changes): cpusets first (an original affinity
/// may need the original cpuset), then affinities of threads still alive and still the same
/// thread, then IRQ masks, then resumes stopped processes.
pub fn repair(proc_root: &Path, state: &State) -> Repair {
    let mut r = Repair::default();
    for (f, orig) in &state.cpusets {
        match fs::write(f, orig.trim()) {
            Ok(()) => r.cpusets += 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => r.gone += 1,
            Err(e) => r.errors.push(format!("{}: restoring {}: {e}", f.display(), orig.trim())),
        }
    }
    for a in &state.affinities {
        let now = start_time(proc_root, a.pid, a.tid);
        if now.is_none() || (a.start.is_some() && now != a.start) {
            r.gone += 1;
            continue;
        }
        let cpus = match parse_list(&a.cpus, "state file") {
            Ok(c) => c,
            Err(e) => {
                r.errors.push(format!("thread {}: {e}", a.tid));
                continue;
            }
        };
        match set_affinity(a.tid, &cpus) {
            Ok(()) => r.affinities += 1,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => r.gone += 1,
            Err(e) => r.errors.push(format!("restoring the affinity {} of thread {}: {e}", format_list(&cpus), a.tid)),
        }
    }
    for (irq, orig) in &state.irqs {
        let f = proc_root.join("irq").join(irq.to_string()).join("smp_affinity_list");
        match fs::write(&f, orig) {
            Ok(()) => r.irqs += 1,
            Err(e) => r.errors.push(format!("IRQ {irq}: restoring {orig}: {e}")),
        }
    }
    for s in &state.stopped {
        let now = start_time(proc_root, s.pid, s.pid);
        if now.is_none() || (s.start.is_some() && now != s.start) {
            r.gone += 1;
            continue;
        }
        // SAFETY: kill has no memory preconditions.
        if unsafe { libc::kill(s.pid, libc::SIGCONT) } == 0 {
            r.resumed += 1;
        } else {
            r.gone += 1;
        }
    }
    r
}
