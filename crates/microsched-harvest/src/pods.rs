//! Kubernetes pods on this node, found from their cgroup (no API call): the kubelet names a
//! pod's cgroup after its UID, `pod<uid>` under the cgroupfs driver
//! (`kubepods/besteffort/pod<uid>/<container>`) and `kubepods-<qos>-pod<uid with _ for ->.slice`
//! under the systemd driver, on cgroup v1 and v2 alike. The artifact's Listener does the same
//! walk (cgroup v1 cgroupfs only) to find a Secondary pod's tasks.

use std::fs;
use std::path::{Path, PathBuf};

/// Normalises `pod<uid>`, `<uid>` or a systemd-escaped UID to the bare UID with dashes.
pub fn pod_uid(pod_id: &str) -> String {
    pod_id.trim().trim_start_matches("pod").replace('_', "-")
}

fn matches(name: &str, uid: &str) -> bool {
    let name = name.trim_end_matches(".slice");
    // cgroupfs: "pod<uid>"; systemd: "...-pod<uid_escaped>"
    name == format!("pod{uid}") || name.ends_with(&format!("-pod{}", uid.replace('-', "_")))
}

/// Directories of pod `pod_id` under `root` (one per mounted hierarchy walked; v1 mounts several).
pub fn find_pod_dirs(root: &Path, pod_id: &str) -> Vec<PathBuf> {
    let uid = pod_uid(pod_id);
    let mut out = Vec::new();
    // Breadth-first, bounded: pods sit at most a few levels below kubepods.
    let mut level = vec![root.to_path_buf()];
    for _ in 0..7 {
        let mut next = Vec::new();
        for d in level {
            let Ok(rd) = fs::read_dir(&d) else { continue };
            for e in rd.filter_map(|e| e.ok()).filter(|e| e.file_type().is_ok_and(|t| t.is_dir())) {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if matches(&name, &uid) {
                    out.push(e.path());
                } else {
                    next.push(e.path());
                }
            }
        }
        level = next;
    }
    out.sort();
    out
}

/// The processes of pod `pod_id`: every `cgroup.procs` under its directories (containers and
/// the pause container alike; a Secondary's pause process is harmless to move, a Primary's
/// idles).
pub fn pod_pids(root: &Path, pod_id: &str) -> Vec<i32> {
    let mut v: Vec<i32> = find_pod_dirs(root, pod_id).iter().flat_map(|d| crate::procfs::cgroup_pids(d)).collect();
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, s: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    }

    #[test]
    fn finds_pods_under_cgroupfs_and_systemd_layouts() {
        let root = std::env::temp_dir().join(format!("msh-pods-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let uid = "0b2c5e1a-1111-2222-3333-444455556666";
        // cgroup v1, cgroupfs driver (the artifact's layout), in the cpuset hierarchy.
        write(&root.join(format!("cpuset/kubepods/besteffort/pod{uid}/c0ffee/cgroup.procs")), "101\n102\n");
        write(&root.join(format!("cpuset/kubepods/besteffort/pod{uid}/pause/cgroup.procs")), "100\n");
        // The same pod in the cpu hierarchy: counted once.
        write(&root.join(format!("cpu/kubepods/besteffort/pod{uid}/c0ffee/cgroup.procs")), "101\n102\n");
        // cgroup v2, systemd driver.
        let esc = uid.replace('-', "_");
        write(
            &root.join(format!(
                "unified/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{esc}.slice/cri-containerd-abc.scope/cgroup.procs"
            )),
            "103\n",
        );
        // Another pod, and a decoy whose name only contains the UID.
        write(&root.join("cpuset/kubepods/besteffort/pod99999999-0000-0000-0000-000000000000/x/cgroup.procs"), "200\n");
        write(&root.join(format!("cpuset/notapod{uid}x/cgroup.procs")), "300\n");
        assert_eq!(find_pod_dirs(&root, &format!("pod{uid}")).len(), 3);
        assert_eq!(pod_pids(&root, &format!("pod{uid}")), [100, 101, 102, 103]);
        assert_eq!(pod_pids(&root, uid), [100, 101, 102, 103]);
        assert_eq!(pod_pids(&root, &esc), [100, 101, 102, 103]);
        assert!(pod_pids(&root, "pod12345678-0000-0000-0000-000000000000").is_empty());
        fs::remove_dir_all(&root).unwrap();
    }
}
