//! The Secondary's cpuset, cgroup v1 and v2: the set of CPUs the kernel lets its threads run on,
//! whatever their affinity says. `sched_setaffinity` with a mask that reaches outside the cpuset
//! succeeds and the kernel keeps only the part inside (the affinity reads back already cut), so
//! an agent that only set affinities would lend a core the Secondary can never use. Before a
//! core is lent, the agent checks that every Secondary's effective cpuset holds it:
//! `/proc/PID/cgroup` names the cgroup (v1: the hierarchy whose controllers include `cpuset`;
//! v2: the `0::` line), whose `cpuset.effective_cpus` (v1) or `cpuset.cpus.effective` (v2) under
//! the cgroup mount is what the kernel enforces.
//!
//! Where it does not, the agent widens the cgroup's `cpuset.cpus` as the artifact's setup does
//! (`TestFramework/Tools/pincores.sh` writes the Secondary container's
//! `/sys/fs/cgroup/cpuset/kubepods/besteffort/<pod>/<container>/cpuset.cpus` to the Primary's
//! cores and the dedicated one, "2,4,...,16,18", once, before the run; the monitor then only
//! moves threads), or, when it may not write (`--no-cpuset`) or the write does not take (a
//! parent cpuset narrower, a read-only cgroupfs), refuses with the reason.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::cpus::{format_list, parse_list, Cpus};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    /// The file with the CPUs the kernel enforces.
    pub fn effective_file(self) -> &'static str {
        match self {
            Version::V1 => "cpuset.effective_cpus",
            Version::V2 => "cpuset.cpus.effective",
        }
    }
}

/// The cgroup hierarchy that carries the cpuset controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    pub version: Version,
    pub root: PathBuf,
}

impl std::fmt::Display for Hierarchy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cgroup {} at {}", if self.version == Version::V1 { "v1" } else { "v2" }, self.root.display())
    }
}

fn has_cpuset_controller(dir: &Path) -> bool {
    fs::read_to_string(dir.join("cgroup.controllers")).is_ok_and(|s| s.split_whitespace().any(|c| c == "cpuset"))
}

/// Finds the cpuset hierarchy: under `cgroup_root` first (v1: `cgroup_root/cpuset`; v2:
/// `cgroup_root` or `cgroup_root/unified` with `cpuset` among its controllers: the layouts of
/// `/sys/fs/cgroup`, and of the host's cgroupfs mounted into the agent's pod), then from the
/// mount table (`proc_root/mounts`). `Err` says where it looked.
pub fn find_hierarchy(proc_root: &Path, cgroup_root: &Path) -> Result<Hierarchy, String> {
    let v1 = cgroup_root.join("cpuset");
    if v1.join("cpuset.effective_cpus").is_file() || v1.join("cpuset.cpus").is_file() {
        return Ok(Hierarchy { version: Version::V1, root: v1 });
    }
    for d in [cgroup_root.to_path_buf(), cgroup_root.join("unified")] {
        if has_cpuset_controller(&d) {
            return Ok(Hierarchy { version: Version::V2, root: d });
        }
    }
    let mounts = fs::read_to_string(proc_root.join("mounts")).unwrap_or_default();
    for l in mounts.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (Some(mnt), Some(fstype), Some(mo)) = (f.get(1), f.get(2), f.get(3)) else { continue };
        // Mount points escape spaces as \040; cgroup mounts have none in practice.
        let mnt = PathBuf::from(mnt.replace("\\040", " "));
        if *fstype == "cgroup" && mo.split(',').any(|o| o == "cpuset") {
            return Ok(Hierarchy { version: Version::V1, root: mnt });
        }
        if *fstype == "cgroup2" && has_cpuset_controller(&mnt) {
            return Ok(Hierarchy { version: Version::V2, root: mnt });
        }
    }
    Err(format!(
        "no cpuset hierarchy under {} or in {} (no cpuset controller: the kernel restricts no thread)",
        cgroup_root.display(),
        proc_root.join("mounts").display()
    ))
}

/// One process's cpuset as the kernel applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcCpuset {
    /// The process's cgroup directory.
    pub dir: PathBuf,
    /// Its path as /proc/PID/cgroup gives it.
    pub rel: String,
    /// The CPUs its threads may use.
    pub effective: Cpus,
    /// Where `effective` was read (v2: the nearest ancestor with the cpuset controller enabled).
    pub effective_from: PathBuf,
    /// The `cpuset.cpus` file that widens it; `None` where there is none to write (the root
    /// cgroup, or v2 without the cpuset controller enabled for this cgroup).
    pub cpus_file: Option<PathBuf>,
}

fn read_cpus(f: &Path) -> Result<Cpus, String> {
    let s = fs::read_to_string(f).map_err(|e| format!("reading {}: {e}", f.display()))?;
    parse_list(s.trim(), &f.display().to_string())
}

/// A cgroup path from /proc/PID/cgroup resolved under the hierarchy's mount. A path that starts
/// with `/..` lies outside the reader's cgroup namespace (an agent in a container with a private
/// cgroup namespace sees other pods that way): the leading `..` are dropped and the rest is
/// looked up at the mount and up to two levels below, accepted only where `pid` is listed.
fn resolve(h: &Hierarchy, rel: &str, pid: i32) -> Result<PathBuf, String> {
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    let ups = parts.iter().take_while(|p| **p == "..").count();
    if parts[ups..].contains(&"..") {
        return Err(format!("cgroup path `{rel}` is not allowed"));
    }
    let rest: PathBuf = parts[ups..].iter().collect();
    if ups == 0 {
        let d = h.root.join(&rest);
        return if d.is_dir() { Ok(d) } else { Err(format!("{}: no such cgroup directory", d.display())) };
    }
    let lists = |d: &Path| {
        ["cgroup.procs", "tasks"].iter().any(|f| {
            fs::read_to_string(d.join(f)).is_ok_and(|s| s.lines().any(|l| l.trim().parse::<i32>().ok() == Some(pid)))
        })
    };
    let mut level = vec![h.root.clone()];
    for _ in 0..3 {
        let mut next = Vec::new();
        for base in &level {
            let d = base.join(&rest);
            if d.is_dir() && lists(&d) {
                return Ok(d);
            }
            if let Ok(rd) = fs::read_dir(base) {
                next.extend(rd.filter_map(|e| e.ok()).filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
            }
        }
        level = next;
    }
    Err(format!(
        "cgroup `{rel}` lies outside the agent's cgroup namespace and was not found under {}: run the agent in the \
         host's cgroup namespace, or give --cgroup-root the host's cgroupfs",
        h.root.display()
    ))
}

/// The cpuset of process `pid` (its main thread's cgroup), read from `proc_root/PID/cgroup`
/// and the hierarchy.
pub fn of_pid(h: &Hierarchy, proc_root: &Path, pid: i32) -> Result<ProcCpuset, String> {
    let cg = proc_root.join(pid.to_string()).join("cgroup");
    let s = fs::read_to_string(&cg).map_err(|e| format!("reading {}: {e}", cg.display()))?;
    let rel = s
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
            match h.version {
                Version::V1 => ctl.split(',').any(|c| c == "cpuset").then_some(path),
                Version::V2 => (ctl.is_empty()).then_some(path),
            }
        })
        .ok_or_else(|| {
            format!(
                "{} has no {} line",
                cg.display(),
                if h.version == Version::V1 { "cpuset (v1)" } else { "cgroup v2 (0::)" }
            )
        })?
        .trim()
        .to_string();
    let dir = resolve(h, &rel, pid)?;
    let is_root = dir == h.root;
    match h.version {
        Version::V1 => {
            let eff = dir.join("cpuset.effective_cpus");
            // Kernels before 3.16 have no effective_cpus: there cpus is what is enforced.
            let effective_from = if eff.is_file() { eff } else { dir.join("cpuset.cpus") };
            let effective = read_cpus(&effective_from)?;
            let cpus_file = (!is_root).then(|| dir.join("cpuset.cpus"));
            Ok(ProcCpuset { dir, rel, effective, effective_from, cpus_file })
        }
        Version::V2 => {
            // Without the controller enabled for it, a cgroup uses its nearest ancestor's
            // cpuset (the root's: every CPU).
            let mut d = dir.clone();
            let effective_from = loop {
                let f = d.join("cpuset.cpus.effective");
                if f.is_file() {
                    break Some(f);
                }
                if d == h.root || !d.pop() || !d.starts_with(&h.root) {
                    break None;
                }
            };
            let cpus_file = (!is_root && dir.join("cpuset.cpus").is_file()).then(|| dir.join("cpuset.cpus"));
            match effective_from {
                Some(f) => Ok(ProcCpuset { dir, rel, effective: read_cpus(&f)?, effective_from: f, cpus_file }),
                // No cpuset file anywhere up to the root: the controller restricts nothing.
                None => Ok(ProcCpuset {
                    effective: crate::cpus::online(),
                    effective_from: h.root.clone(),
                    dir,
                    rel,
                    cpus_file,
                }),
            }
        }
    }
}

/// The CPUs written to widen `cs` so that it holds `need`: what it has (its own list; v2's
/// empty list means "the parent's", hence the effective CPUs too) and `need`.
pub fn widened(cs: &ProcCpuset, need: &Cpus) -> Result<Cpus, String> {
    let own = match &cs.cpus_file {
        Some(f) => read_cpus(f)?,
        None => Cpus::new(),
    };
    Ok(own.union(&cs.effective).chain(need.iter()).copied().collect())
}

/// Writes `cpus` to `file`, returning the file's previous content.
pub fn write_cpus(file: &Path, cpus: &Cpus) -> Result<String, String> {
    let before = fs::read_to_string(file).map_err(|e| format!("reading {}: {e}", file.display()))?;
    fs::write(file, format_list(cpus)).map_err(|e: io::Error| format!("writing {} = {}: {e}", file.display(), format_list(cpus)))?;
    Ok(before)
}

/// Why `pid`'s cpuset keeps it off `missing`, with what to do.
pub fn refusal(pid: i32, cs: &ProcCpuset, missing: &Cpus, h: &Hierarchy, detail: &str) -> String {
    format!(
        "Secondary pid {pid}: its cpuset (cgroup {} in the {h}) lets it run on CPUs {} only, not on {} (read from {}): \
         the kernel would keep its threads off {} and a lend there would be in name only; {detail}",
        cs.rel,
        format_list(&cs.effective),
        format_list(missing),
        cs.effective_from.display(),
        if missing.len() == 1 { "that core" } else { "those cores" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, s: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("msh-cpuset-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn v1_layout_found_and_read() {
        let d = tmp("v1");
        let (proc_, cg) = (d.join("proc"), d.join("cg"));
        write(&cg.join("cpuset/cpuset.effective_cpus"), "0-3\n");
        write(&cg.join("cpuset/kubepods/besteffort/podu/c1/cpuset.effective_cpus"), "0\n");
        write(&cg.join("cpuset/kubepods/besteffort/podu/c1/cpuset.cpus"), "0\n");
        write(&proc_.join("42/cgroup"), "5:cpu,cpuacct:/kubepods/x\n3:cpuset:/kubepods/besteffort/podu/c1\n0::/\n");
        write(&proc_.join("43/cgroup"), "3:cpuset:/\n");
        write(&proc_.join("44/cgroup"), "4:memory:/a\n");
        let h = find_hierarchy(&proc_, &cg).unwrap();
        assert_eq!(h, Hierarchy { version: Version::V1, root: cg.join("cpuset") });
        let cs = of_pid(&h, &proc_, 42).unwrap();
        assert_eq!(cs.effective, Cpus::from([0]));
        assert_eq!(cs.cpus_file.as_deref(), Some(cg.join("cpuset/kubepods/besteffort/podu/c1/cpuset.cpus").as_path()));
        assert_eq!(widened(&cs, &Cpus::from([2, 3])).unwrap(), Cpus::from([0, 2, 3]));
        // The root cpuset: every CPU, nothing to write.
        let root = of_pid(&h, &proc_, 43).unwrap();
        assert_eq!(root.effective, Cpus::from([0, 1, 2, 3]));
        assert_eq!(root.cpus_file, None);
        assert!(of_pid(&h, &proc_, 44).unwrap_err().contains("no cpuset (v1) line"));
        assert!(of_pid(&h, &proc_, 45).unwrap_err().contains("reading"));
        let msg = refusal(42, &cs, &Cpus::from([1]), &h, "x");
        assert!(msg.contains("CPUs 0 only, not on 1") && msg.contains("cpuset.effective_cpus"), "{msg}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn v2_layout_found_from_mounts_and_inherits_from_ancestors() {
        let d = tmp("v2");
        let (proc_, cg, mnt) = (d.join("proc"), d.join("nothing-here"), d.join("mnt"));
        write(&proc_.join("mounts"), &format!("cgroup2 {} cgroup2 rw,nosuid 0 0\n", mnt.display()));
        write(&mnt.join("cgroup.controllers"), "cpuset cpu io memory pids\n");
        write(&mnt.join("cpuset.cpus.effective"), "0-3\n");
        let pod = mnt.join("kubepods.slice/kubepods-podu.slice");
        write(&pod.join("cpuset.cpus.effective"), "0-1\n");
        write(&pod.join("cpuset.cpus"), "\n");
        // The container: the controller not enabled for it (no cpuset files): the pod's applies.
        write(&pod.join("cri-containerd-a.scope/cgroup.procs"), "42\n44\n");
        write(&proc_.join("42/cgroup"), "0::/kubepods.slice/kubepods-podu.slice/cri-containerd-a.scope\n");
        write(&proc_.join("43/cgroup"), "0::/kubepods.slice/kubepods-podu.slice\n");
        // Seen from a private cgroup namespace.
        write(&proc_.join("44/cgroup"), "0::/../../kubepods.slice/kubepods-podu.slice/cri-containerd-a.scope\n");
        write(&proc_.join("45/cgroup"), "0::/../nowhere\n");
        write(&proc_.join("46/cgroup"), "0::/a/../../etc\n");
        let h = find_hierarchy(&proc_, &cg).unwrap();
        assert_eq!(h, Hierarchy { version: Version::V2, root: mnt.clone() });
        let c = of_pid(&h, &proc_, 42).unwrap();
        assert_eq!(c.effective, Cpus::from([0, 1]));
        assert_eq!(c.effective_from, pod.join("cpuset.cpus.effective"));
        assert_eq!(c.cpus_file, None);
        let p = of_pid(&h, &proc_, 43).unwrap();
        assert_eq!(p.cpus_file.as_deref(), Some(pod.join("cpuset.cpus").as_path()));
        // An empty v2 list inherits: widening keeps the inherited CPUs.
        assert_eq!(widened(&p, &Cpus::from([3])).unwrap(), Cpus::from([0, 1, 3]));
        assert_eq!(of_pid(&h, &proc_, 44).unwrap().dir, pod.join("cri-containerd-a.scope"));
        assert!(of_pid(&h, &proc_, 45).unwrap_err().contains("outside the agent's cgroup namespace"));
        assert!(of_pid(&h, &proc_, 46).unwrap_err().contains("not allowed"));
        // Under the cgroup root itself (the agent's default, /sys/fs/cgroup on a v2 host).
        assert_eq!(find_hierarchy(&d.join("none"), &mnt).unwrap().root, mnt);
        // No cpuset anywhere.
        let e = find_hierarchy(&d.join("none"), &cg).unwrap_err();
        assert!(e.starts_with("no cpuset hierarchy"), "{e}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn bad_files_are_errors_not_panics() {
        let d = tmp("bad");
        let (proc_, cg) = (d.join("proc"), d.join("cg"));
        write(&cg.join("cpuset/cpuset.cpus"), "0-1");
        write(&cg.join("cpuset/a/cpuset.effective_cpus"), "zero");
        write(&proc_.join("1/cgroup"), "3:cpuset:/a\n");
        write(&proc_.join("2/cgroup"), "garbage\n\n::\n");
        write(&proc_.join("3/cgroup"), "3:cpuset:/missing\n");
        let h = find_hierarchy(&proc_, &cg).unwrap();
        assert!(of_pid(&h, &proc_, 1).unwrap_err().contains("is not allowed"));
        assert!(of_pid(&h, &proc_, 2).is_err());
        assert!(of_pid(&h, &proc_, 3).unwrap_err().contains("no such cgroup directory"));
        assert!(write_cpus(&d.join("nope/cpuset.cpus"), &Cpus::from([1])).unwrap_err().starts_with("reading"));
        fs::remove_dir_all(&d).unwrap();
    }
}
