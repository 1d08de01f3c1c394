//! The agent never lends a core the Secondary cannot run on, and re-sent registrations add
//! nothing. A fake /proc (the Primary's threads as files; the Secondary a real `sleep` whose
//! task directory is linked in, with a `cgroup` file of the test's choosing) and a fake cgroup
//! tree (v1 and v2 layouts) stand in for the machine, so these run anywhere, without root.

use super::*;
use std::fs;
use std::os::unix::fs::symlink;
use std::process::{Child, Command};

use crate::cpus::get_affinity;

const PRIMARY: i32 = 2_000_000_001;
const MS: u64 = 5_000_000;

struct Fixture {
    dir: PathBuf,
    proc_: PathBuf,
    cg: PathBuf,
    child: Child,
    c0: usize,
    c1: usize,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn write(p: &Path, s: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, s).unwrap();
}

/// The Primary's threads, idle (sleeping, no run time): both its cores idle, so a buffer-1
/// controller lends one at the second tick.
fn idle_primary(proc_: &Path, c0: usize, c1: usize) {
    for (tid, cpu) in [(PRIMARY, c0), (PRIMARY + 1, c1)] {
        let d = proc_.join(PRIMARY.to_string()).join("task").join(tid.to_string());
        let mut f = vec!["S".to_string()];
        f.extend((0..35).map(|_| "0".to_string()));
        f.push(cpu.to_string());
        write(&d.join("stat"), &format!("{tid} (p) {}", f.join(" ")));
        write(&d.join("schedstat"), "1000 0 0\n");
    }
}

/// `None` on a machine with fewer than 2 online CPUs.
fn fixture(name: &str, cgroup_line: &str) -> Option<Fixture> {
    let online = crate::cpus::online();
    if online.len() < 2 {
        return None;
    }
    let mut it = online.iter().copied();
    let (c0, c1) = (it.next().unwrap(), it.next().unwrap());
    let dir = std::env::temp_dir().join(format!("msh-safety-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let (proc_, cg) = (dir.join("proc"), dir.join("cg"));
    let child = Command::new("sleep").arg("60").spawn().expect("sleep");
    let pid = child.id();
    let pd = proc_.join(pid.to_string());
    fs::create_dir_all(&pd).unwrap();
    symlink(format!("/proc/{pid}/task"), pd.join("task")).unwrap();
    symlink(format!("/proc/{pid}/stat"), pd.join("stat")).unwrap();
    write(&pd.join("cgroup"), &cgroup_line.replace("PID", &pid.to_string()));
    write(&proc_.join("mounts"), "");
    idle_primary(&proc_, c0, c1);
    fs::create_dir_all(&cg).unwrap();
    Some(Fixture { dir, proc_, cg, child, c0, c1 })
}

impl Fixture {
    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn opts(&self, write_cpuset: bool, secondary: bool) -> Opts {
        Opts {
            primaries: vec![PrimaryOpt { pids: vec![PRIMARY], cpus: Cpus::from([self.c0, self.c1]), name: "p".into() }],
            secondaries: if secondary { vec![self.pid()] } else { vec![] },
            controller: serde_json::from_value(json!({"kind": "harvest_static", "buffer": 1})).unwrap(),
            proc_root: self.proc_.clone(),
            cgroup_root: self.cg.clone(),
            cpuset: write_cpuset,
            ..Opts::default()
        }
    }

    /// The Secondary's (one thread's) affinity.
    fn affinity(&self) -> Cpus {
        get_affinity(self.pid()).unwrap()
    }

    fn list(&self, c: &[usize]) -> String {
        format_list(&c.iter().copied().collect())
    }
}

/// A log the test can read.
#[derive(Clone, Default)]
struct Log(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

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
    fn events(&self, kind: &str) -> Vec<Value> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["event"] == kind)
            .collect()
    }
}

fn ticks(a: &mut Agent, now: &mut u64, n: usize) {
    for _ in 0..n {
        *now += MS;
        a.tick(*now, MS);
    }
}

/// The case: the Secondary in a cgroup v1 cpuset that excludes the core to lend (the
/// artifact's layout, kubepods/besteffort/pod<uid>/<container>). sched_setaffinity would succeed
/// and read back already cut; the agent must not call that a lend.
fn v1_tree(f: &Fixture, effective: &str) -> PathBuf {
    let c = f.cg.join("cpuset/kubepods/besteffort/podS/c1");
    write(&f.cg.join("cpuset/cpuset.cpus"), &f.list(&[f.c0, f.c1]));
    write(&f.cg.join("cpuset/cpuset.effective_cpus"), &f.list(&[f.c0, f.c1]));
    write(&c.join("cpuset.cpus"), effective);
    // A kernel of files: what is written to cpuset.cpus is what is enforced.
    let _ = fs::remove_file(c.join("cpuset.effective_cpus"));
    symlink(c.join("cpuset.cpus"), c.join("cpuset.effective_cpus")).unwrap();
    c
}

const V1_LINE: &str = "11:cpu,cpuacct:/kubepods/besteffort/podS/c1\n3:cpuset:/kubepods/besteffort/podS/c1\n0::/\n";

#[test]
fn v1_cpuset_without_the_lent_core_is_refused_at_registration() {
    let Some(f) = fixture("v1-reg", V1_LINE) else { return };
    v1_tree(&f, &f.c0.to_string());
    // --no-cpuset: the agent may not widen it, so the Secondary is refused, with the cpuset,
    // the missing core and the way out in the message.
    let e = Agent::new(f.opts(false, true), Box::new(std::io::sink())).err().expect("refused");
    assert!(e.contains(&format!("Secondary pid {}", f.pid())), "{e}");
    assert!(e.contains(&format!("CPUs {} only, not on {}", f.c0, f.c1)), "{e}");
    assert!(e.contains("cpuset.effective_cpus") && e.contains("--no-cpuset"), "{e}");
    assert!(e.contains(&format!("echo {} > ", f.list(&[f.c0, f.c1]))), "{e}");
    // Registered over the listener instead: refused (NAK), and nothing is ever lent to it.
    let log = Log::default();
    let mut a = Agent::new(f.opts(false, false), Box::new(log.clone())).unwrap();
    let e = a.register(Registration::Secondary { pid: Some(f.pid()), pod_id: None }).unwrap_err();
    assert!(e.contains("not on"), "{e}");
    assert!(a.sec.pids.is_empty());
}

#[test]
fn v1_cpuset_is_widened_as_the_artifact_does_and_restored() {
    let Some(f) = fixture("v1-write", V1_LINE) else { return };
    let c = v1_tree(&f, &f.c0.to_string());
    let log = Log::default();
    let mut a = Agent::new(f.opts(true, true), Box::new(log.clone())).unwrap();
    // Widened at registration to every core it may be lent (pincores.sh: the Primary's cores).
    assert_eq!(fs::read_to_string(c.join("cpuset.cpus")).unwrap(), f.list(&[f.c0, f.c1]));
    assert_eq!(log.events("cpuset").len(), 1);
    let mut now = 0;
    ticks(&mut a, &mut now, 2);
    assert_eq!(a.primaries[0].lent, [false, true]);
    assert_eq!(a.primaries[0].refused_lends, 0);
    assert_eq!(f.affinity(), Cpus::from([f.c1]));
    assert_eq!(log.events("lend").len(), 1);
    let rep = a.finish("test".into());
    assert!(rep.cpuset.iter().any(|n| n.contains("widened")), "{:?}", rep.cpuset);
    // Restored at exit, with the affinity.
    assert_eq!(fs::read_to_string(c.join("cpuset.cpus")).unwrap(), f.c0.to_string());
    assert_eq!(rep.restore["errors"], json!([]));
}

#[test]
fn v1_cpuset_narrowed_under_the_agent_takes_the_lend_back() {
    let Some(f) = fixture("v1-narrow", V1_LINE) else { return };
    let c = v1_tree(&f, &f.list(&[f.c0, f.c1]));
    let log = Log::default();
    let mut a = Agent::new(f.opts(false, true), Box::new(log.clone())).unwrap();
    let mut now = 0;
    ticks(&mut a, &mut now, 2);
    assert_eq!(a.primaries[0].lent, [false, true]);
    // The kubelet rewrites the container's cpuset (its shared pool changed): core 1 is gone.
    fs::write(c.join("cpuset.cpus"), f.c0.to_string()).unwrap();
    a.actuate(&Cpus::new(), "check");
    assert_eq!(a.primaries[0].lent, [false, false]);
    let r = log.events("lend_refused");
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0]["cpu"], json!(f.c1));
    assert_eq!(r[0]["lent_before"], json!(true));
    // The controller asks again at every tick: no lend, no log line per tick.
    ticks(&mut a, &mut now, 20);
    assert_eq!(a.primaries[0].lent, [false, false]);
    assert_eq!(log.events("lend_refused").len(), 1);
    assert_eq!(log.events("lend").len(), 1);
    // Back after the block, when the cpuset holds the core again.
    fs::write(c.join("cpuset.cpus"), f.list(&[f.c0, f.c1])).unwrap();
    a.blocked.clear();
    ticks(&mut a, &mut now, 2);
    assert_eq!(a.primaries[0].lent, [false, true]);
    let rep = a.finish("test".into());
    assert_eq!(rep.primaries[0]["refused_lends"], json!(1));
    assert_eq!(rep.primaries[0]["lends"], json!(2));
    assert_eq!(rep.lend_refusals.len(), 1);
    assert!(rep.lend_refusals[0].contains("--no-cpuset"), "{:?}", rep.lend_refusals);
}

#[test]
fn a_lend_into_a_cpuset_that_lacks_the_core_is_refused_not_counted() {
    let Some(f) = fixture("v1-lend", V1_LINE) else { return };
    let c = v1_tree(&f, &f.list(&[f.c0, f.c1]));
    let log = Log::default();
    let before = f.affinity();
    let mut a = Agent::new(f.opts(false, true), Box::new(log.clone())).unwrap();
    fs::write(c.join("cpuset.cpus"), f.c0.to_string()).unwrap();
    let mut now = 0;
    ticks(&mut a, &mut now, 4);
    assert_eq!(a.primaries[0].lent, [false, false]);
    assert_eq!(a.primaries[0].lends, 0);
    assert!(log.events("lend").is_empty());
    assert_eq!(log.events("lend_refused").len(), 1);
    assert_eq!(log.events("lend_refused")[0]["lent_before"], json!(false));
    // The Secondary had nothing: stopped, its affinity never set.
    assert!(a.sec.stopped);
    assert_eq!(f.affinity(), before);
    let rep = a.finish("test".into());
    assert_eq!(rep.primaries[0]["lent_core_s"], json!(0.0));
}

/// cgroup v2 (systemd driver): the container's scope has no cpuset files of its own (the
/// controller is enabled down to the pod), so the pod slice's cpuset.cpus.effective applies.
#[test]
fn v2_cpuset_checked_through_the_nearest_ancestor() {
    let line = "0::/kubepods.slice/kubepods-podS.slice/cri-containerd-a.scope\n";
    let Some(f) = fixture("v2", line) else { return };
    let pod = f.cg.join("kubepods.slice/kubepods-podS.slice");
    write(&f.cg.join("cgroup.controllers"), "cpuset cpu io memory pids\n");
    write(&f.cg.join("cpuset.cpus.effective"), &f.list(&[f.c0, f.c1]));
    write(&pod.join("cpuset.cpus.effective"), &f.c0.to_string());
    write(&pod.join("cpuset.cpus"), &f.c0.to_string());
    fs::create_dir_all(pod.join("cri-containerd-a.scope")).unwrap();
    for w in [false, true] {
        let e = Agent::new(f.opts(w, true), Box::new(std::io::sink())).err().expect("refused");
        assert!(e.contains("cpuset.cpus.effective") && e.contains(&format!("not on {}", f.c1)), "{e}");
        assert!(e.contains(if w { "no cpuset.cpus to widen" } else { "--no-cpuset" }), "{e}");
    }
    // Where the scope has its own cpuset.cpus, it is written; a parent that still narrows it
    // (here the file does not change what is enforced) is refused, and the write undone.
    let scope = pod.join("cri-containerd-a.scope");
    write(&scope.join("cpuset.cpus"), "");
    write(&scope.join("cpuset.cpus.effective"), &f.c0.to_string());
    let e = Agent::new(f.opts(true, true), Box::new(std::io::sink())).err().expect("refused");
    assert!(e.contains("still reads"), "{e}");
    assert_eq!(fs::read_to_string(scope.join("cpuset.cpus")).unwrap(), "");
    // A cpuset that holds both cores: registered, nothing written, and the lend goes through.
    write(&pod.join("cpuset.cpus.effective"), &f.list(&[f.c0, f.c1]));
    fs::remove_file(scope.join("cpuset.cpus.effective")).unwrap();
    fs::remove_file(scope.join("cpuset.cpus")).unwrap();
    let log = Log::default();
    let mut a = Agent::new(f.opts(false, true), Box::new(log.clone())).unwrap();
    let mut now = 0;
    ticks(&mut a, &mut now, 2);
    assert_eq!(a.primaries[0].lent, [false, true]);
    assert_eq!(f.affinity(), Cpus::from([f.c1]));
    assert!(log.events("cpuset").is_empty());
}

#[test]
fn re_sent_registrations_add_nothing() {
    let Some(f) = fixture("idem", "3:cpuset:/\n") else { return };
    write(&f.cg.join("cpuset/cpuset.effective_cpus"), &f.list(&[f.c0, f.c1]));
    // A Secondary pod in the kubelet's layout.
    write(&f.cg.join("cpuset/kubepods/besteffort/podu-1/c/cgroup.procs"), &format!("{}\n", f.pid()));
    let log = Log::default();
    let mut opts = f.opts(true, false);
    opts.primaries.clear();
    let mut a = Agent::new(opts, Box::new(log.clone())).unwrap();
    let prim = |pid: Option<i32>, pod: Option<&str>, cpus: &str| Registration::Primary {
        cpus: cpus.into(),
        pid,
        pod_id: pod.map(String::from),
        threshold: None,
        low_tic: None,
        target_idle: None,
        static_target_idle: None,
    };
    let both = f.list(&[f.c0, f.c1]);
    for _ in 0..3 {
        a.register(prim(Some(PRIMARY), None, &both)).unwrap();
        a.register(Registration::Secondary { pid: None, pod_id: Some("podu-1".into()) }).unwrap();
        a.register(Registration::Secondary { pid: None, pod_id: Some("u-1".into()) }).unwrap();
        a.register(Registration::Secondary { pid: Some(f.pid()), pod_id: None }).unwrap();
    }
    assert_eq!(a.primaries.len(), 1);
    assert_eq!(a.sec.pids, [f.pid()]);
    assert_eq!(log.events("primary").len(), 1);
    assert_eq!(log.events("secondary").len(), 1);
    // The same Primary with other cores is refused, saying why; so is another on its cores.
    let e = a.register(prim(Some(PRIMARY), None, &f.c0.to_string())).unwrap_err();
    assert!(e.contains("already registered with CPUs"), "{e}");
    let e = a.register(prim(Some(PRIMARY + 7), None, &f.c1.to_string())).unwrap_err();
    assert!(e.contains("overlap"), "{e}");
    // By pod: the same pod again is the same Primary.
    write(&f.cg.join("cpuset/kubepods/besteffort/podp-2/c/cgroup.procs"), &format!("{PRIMARY}\n"));
    let mut opts = f.opts(true, false);
    opts.primaries.clear();
    let mut b = Agent::new(opts, Box::new(std::io::sink())).unwrap();
    for _ in 0..3 {
        b.register(prim(None, Some("podp-2"), &both)).unwrap();
    }
    assert_eq!(b.primaries.len(), 1);
    assert_eq!(b.primaries[0].pids, [PRIMARY]);
    // Bad registrations are errors, never panics.
    assert!(b.register(prim(None, None, "x")).unwrap_err().starts_with("cpuList"));
    assert!(b.register(Registration::Secondary { pid: Some(-5), pod_id: None }).is_err());
    assert!(b.register(Registration::Secondary { pid: None, pod_id: Some("../../etc".into()) }).is_err());
}
