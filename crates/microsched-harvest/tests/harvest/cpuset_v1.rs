//! The false lend on a real kernel: a Secondary in a cgroup v1 cpuset that excludes the
//! core to lend (the artifact's setup; Kubernetes' static CPU manager). `sched_setaffinity`
//! succeeds there and the affinity reads back already cut to the cpuset, so an agent that only
//! checks "no thread outside the mask" logs a lend the Secondary can never use.
//!
//! Needs root and a cgroup v1 cpuset hierarchy at /sys/fs/cgroup/cpuset (this machine's
//! layout) and 2 CPUs; elsewhere it says why and passes (the fake-tree tests in
//! src/agent_safety_tests.rs run everywhere). It creates one cpuset cgroup,
//! /sys/fs/cgroup/cpuset/msh-test-<pid>-<case>, and removes it.

use std::fs;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use microsched_harvest::cpus::{format_list, get_affinity, online, Cpus};
use microsched_harvest::{Agent, Opts, PrimaryOpt};

const V1: &str = "/sys/fs/cgroup/cpuset";

/// A cpuset cgroup holding one `sleep` (the Secondary), removed on drop.
struct Cg {
    dir: PathBuf,
    child: Child,
}

impl Drop for Cg {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for _ in 0..50 {
            if fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `None` (and why, on stderr) where the machine cannot host the test.
fn cpuset_with_secondary(case: &str, cpus: &Cpus) -> Option<Cg> {
    let skip = |why: &str| {
        eprintln!("skipped: {why}");
        None
    };
    if online().len() < 2 {
        return skip("fewer than 2 CPUs");
    }
    if !Path::new(V1).join("cpuset.cpus").is_file() {
        return skip("no cgroup v1 cpuset hierarchy at /sys/fs/cgroup/cpuset");
    }
    let dir = Path::new(V1).join(format!("msh-test-{}-{case}", std::process::id()));
    if let Err(e) = fs::create_dir(&dir) {
        return skip(&format!("cannot create {}: {e} (needs root)", dir.display()));
    }
    let mems = fs::read_to_string(Path::new(V1).join("cpuset.mems")).unwrap_or_else(|_| "0".into());
    let child = Command::new("sleep").arg("60").spawn().expect("sleep");
    let cg = Cg { dir, child };
    fs::write(cg.dir.join("cpuset.mems"), mems.trim()).unwrap();
    fs::write(cg.dir.join("cpuset.cpus"), format_list(cpus)).unwrap();
    fs::write(cg.dir.join("cgroup.procs"), cg.child.id().to_string()).unwrap();
    assert_eq!(&get_affinity(cg.child.id() as i32).unwrap(), cpus);
    Some(cg)
}

fn two() -> (usize, usize) {
    let mut it = online().into_iter();
    (it.next().unwrap(), it.next().unwrap())
}

#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl Write for Log {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Log {
    fn count(&self, kind: &str) -> usize {
        let pat = format!("\"event\":\"{kind}\"");
        String::from_utf8_lossy(&self.0.lock().unwrap()).lines().filter(|l| l.contains(&pat)).count()
    }
}

/// Primary: cores {c1} (buffer 0: lent as soon as idle); the Secondary has c0 of its own.
fn opts(primary: i32, secondary: i32, c0: usize, c1: usize) -> Opts {
    Opts {
        primaries: vec![PrimaryOpt { pids: vec![primary], cpus: Cpus::from([c1]), name: "p".into() }],
        secondaries: vec![secondary],
        secondary_cores: Cpus::from([c0]),
        controller: serde_json::from_value(serde_json::json!({"kind": "harvest_static", "buffer": 0})).unwrap(),
        poll: Duration::from_millis(5),
        ..Opts::default()
    }
}

/// An agent that cannot see the cpuset (a fake /proc without the cgroup file, no cgroup mount):
/// the read-back of the affinity is what catches the cut mask, for real.
#[test]
fn kernel_cut_mask_is_caught_by_the_read_back() {
    let (c0, c1) = two();
    let Some(cg) = cpuset_with_secondary("readback", &Cpus::from([c0])) else { return };
    let pid = cg.child.id() as i32;
    let tmp = std::env::temp_dir().join(format!("msh-v1-readback-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    let (proc_, cgroot) = (tmp.join("proc"), tmp.join("cg"));
    fs::create_dir_all(proc_.join(pid.to_string())).unwrap();
    fs::create_dir_all(&cgroot).unwrap();
    fs::write(proc_.join("mounts"), "").unwrap();
    symlink(format!("/proc/{pid}/task"), proc_.join(pid.to_string()).join("task")).unwrap();
    symlink(format!("/proc/{pid}/stat"), proc_.join(pid.to_string()).join("stat")).unwrap();
    // An idle Primary thread (files only: never moved).
    let fake = 2_000_000_003;
    let t = proc_.join(format!("{fake}/task/{fake}"));
    fs::create_dir_all(&t).unwrap();
    let mut f = vec!["S".to_string()];
    f.extend((0..35).map(|_| "0".to_string()));
    f.push(c1.to_string());
    fs::write(t.join("stat"), format!("{fake} (p) {}", f.join(" "))).unwrap();
    fs::write(t.join("schedstat"), "1000 0 0\n").unwrap();
    let mut o = opts(fake, pid, c0, c1);
    o.proc_root = proc_.clone();
    o.cgroup_root = cgroot;
    o.duration = Some(Duration::from_millis(300));
    let log = Log::default();
    let rep = Agent::new(o, Box::new(log.clone())).unwrap().run(&|| None);
    // The controller lent core 1; sched_setaffinity({c0,c1}) succeeded and read back {c0}: the
    // lend was refused and taken back, not counted.
    assert!(log.count("lend_refused") >= 1, "{}", String::from_utf8_lossy(&log.0.lock().unwrap()));
    assert_eq!(log.count("lend"), 0);
    assert_eq!(rep.primaries[0]["lends"], 0);
    assert_eq!(rep.primaries[0]["lent_core_s"], 0.0);
    assert!(rep.lend_refusals[0].contains("reads back"), "{:?}", rep.lend_refusals);
    assert_eq!(rep.actuation["stray_threads"], 0);
    assert_eq!(get_affinity(pid).unwrap(), Cpus::from([c0]));
    fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn no_cpuset_refuses_and_cpuset_writes_make_the_lend_real() {
    let (c0, c1) = two();
    let Some(cg) = cpuset_with_secondary("write", &Cpus::from([c0])) else { return };
    let pid = cg.child.id() as i32;
    let mut primary = Command::new("sleep").arg("60").spawn().unwrap();
    let ppid = primary.id() as i32;
    // --no-cpuset: refused at start, naming the cgroup and the core.
    let mut o = opts(ppid, pid, c0, c1);
    o.cpuset = false;
    let e = Agent::new(o, Box::new(std::io::sink())).err().expect("refused");
    assert!(e.contains(&format!("not on {c1}")) && e.contains(&cg.dir.file_name().unwrap().to_string_lossy().to_string()), "{e}");
    // Cpuset writes on (the default): widened as the artifact's pincores.sh does, the lend is
    // real (the Secondary's affinity holds core 1), and the cpuset is restored at exit.
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let log = Log::default();
    let l2 = log.clone();
    let agent = std::thread::spawn(move || {
        let a = Agent::new(opts(ppid, pid, c0, c1), Box::new(l2)).unwrap();
        a.run(&|| flag.load(Ordering::Relaxed).then(|| "test".to_string()))
    });
    let end = Instant::now() + Duration::from_secs(10);
    let mut seen = Cpus::new();
    while Instant::now() < end && !seen.contains(&c1) {
        seen = get_affinity(pid).unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    let widened = fs::read_to_string(cg.dir.join("cpuset.effective_cpus")).unwrap();
    stop.store(true, Ordering::Relaxed);
    let rep = agent.join().unwrap();
    assert_eq!(seen, Cpus::from([c0, c1]), "{}", String::from_utf8_lossy(&log.0.lock().unwrap()));
    assert_eq!(widened.trim(), format_list(&Cpus::from([c0, c1])));
    assert!(log.count("lend") >= 1 && log.count("lend_refused") == 0);
    assert_eq!(rep.restore["errors"], serde_json::json!([]));
    assert_eq!(fs::read_to_string(cg.dir.join("cpuset.cpus")).unwrap().trim(), c0.to_string());
    assert_eq!(get_affinity(pid).unwrap(), Cpus::from([c0]));
    primary.kill().unwrap();
    primary.wait().unwrap();
}
