//! The state file: a Secondary whose agent died without restoring (no Drop runs on SIGKILL:
//! here `mem::forget`) is put back by the next agent from the file, before that one records
//! the current masks as originals; two live agents cannot share one file.

use std::path::{Path, PathBuf};

use microsched_harvest::actuate::Secondary;
use microsched_harvest::cpus::{get_affinity, online, Cpus};

use crate::common::{child, masks, state};
use microsched_harvest::state::StateFile;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("msh-state-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d.join("sub").join("state.json")
}

#[test]
fn a_dead_agents_masks_and_stop_are_repaired_by_the_next() {
    let all = online();
    if all.len() < 2 {
        return;
    }
    let one = Cpus::from([*all.iter().nth(1).unwrap()]);
    let path = tmp("repair");
    let mut c = child();
    let pid = c.id() as i32;
    let before = masks(pid);
    assert!(before.iter().all(|m| m != &one), "the test needs a Secondary not already on one core");

    // Agent 1 moves the Secondary onto one core, then stops it, then dies without restoring.
    let mut s = Secondary::new(Path::new("/proc"));
    assert!(s.use_state_file(&path).unwrap().is_none(), "nothing to repair at first");
    s.pids.push(pid);
    s.assign(&one, &one);
    assert!(masks(pid).iter().all(|m| m == &one));
    s.assign(&Cpus::new(), &Cpus::new());
    assert_eq!(state(pid), 'T');
    let recorded = std::fs::read_to_string(&path).unwrap();
    assert!(recorded.contains("\"stopped\":[{\"pid\""), "{recorded}");
    std::mem::forget(s); // as SIGKILL: no Drop, no restore; the lock goes with the process...
    // ...which `forget` does not release: stand in for the kernel closing its descriptor.
    release_locks_of_this_process(&path);

    // Agent 2 repairs before it records anything as an original.
    let mut s2 = Secondary::new(Path::new("/proc"));
    let r = s2.use_state_file(&path).unwrap().expect("a repair");
    assert_eq!(r.affinities, 3, "{r:?}");
    assert_eq!(r.resumed, 1, "{r:?}");
    assert!(r.errors.is_empty(), "{r:?}");
    assert_eq!(masks(pid), before);
    assert_ne!(state(pid), 'T');
    assert!(!path.exists(), "the repaired entries are cleared");
    // Its own changes are recorded against the true originals and put back at the end.
    s2.pids.push(pid);
    s2.assign(&one, &one);
    assert!(path.exists());
    drop(s2);
    assert_eq!(masks(pid), before);
    assert!(!path.exists(), "cleared once restored");
    c.kill().unwrap();
    c.wait().unwrap();
    let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
}

/// `mem::forget` keeps the leaked agent's lock descriptor open; close every descriptor of this
/// process that refers to the lock file, as the kernel does when a process dies.
fn release_locks_of_this_process(path: &Path) {
    let lock = PathBuf::from(format!("{}.lock", path.display()));
    for e in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        if std::fs::read_link(e.path()).is_ok_and(|t| t == lock) {
            let fd: i32 = e.file_name().to_str().unwrap().parse().unwrap();
            // SAFETY: the descriptor belongs to the leaked StateFile, never used again.
            unsafe { libc_close(fd) };
        }
    }
}

extern "C" {
    #[link_name = "close"]
    fn libc_close(fd: i32) -> i32;
}

#[test]
fn two_live_agents_cannot_share_a_state_file_and_a_stale_thread_is_not_touched() {
    let path = tmp("lock");
    let (a, left) = StateFile::open(&path).unwrap();
    assert!(left.is_empty());
    let e = StateFile::open(&path).unwrap_err();
    assert!(e.starts_with("--state-file:") && e.contains("in use by another running agent"), "{e}");
    drop(a);
    let (_b, _) = StateFile::open(&path).unwrap();
    // A recorded thread whose id now names another thread (another start time) is left alone.
    let me = std::process::id() as i32;
    let now = get_affinity(me).unwrap();
    let st = microsched_harvest::state::State {
        affinities: vec![microsched_harvest::state::Affinity {
            pid: me,
            tid: me,
            start: Some(u64::MAX),
            cpus: "0".into(),
        }],
        ..Default::default()
    };
    let r = microsched_harvest::state::repair(Path::new("/proc"), &st);
    assert_eq!((r.affinities, r.gone), (0, 1));
    assert_eq!(get_affinity(me).unwrap(), now);
    let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
}

#[test]
fn a_file_that_is_not_a_state_file_is_refused_by_name() {
    let path = tmp("bad");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "not json").unwrap();
    let e = StateFile::open(&path).unwrap_err();
    assert!(e.starts_with("--state-file:") && e.contains("not a state file"), "{e}");
    let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
}

#[test]
fn a_state_file_in_a_folder_the_agent_cannot_write_is_a_clear_error() {
    // /proc/version exists, but nothing can be created beside it: the error names the flag, the
    // lock file it could not create, and what the agent needs.
    let e = StateFile::open(Path::new("/proc/version")).err().expect("refused");
    assert!(e.starts_with("--state-file: /proc/version: "), "{e}");
    assert!(e.contains("/proc/version.lock") && e.contains("writable folder"), "{e}");
}
