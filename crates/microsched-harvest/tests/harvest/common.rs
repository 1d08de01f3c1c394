//! What the agent's tests on real processes share: a Secondary to act on, its threads' masks and
//! its run state as /proc shows them.

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use microsched_harvest::cpus::{get_affinity, Cpus};
use microsched_harvest::procfs;

/// A Secondary with 3 threads that mostly sleep (no spinning on a shared 2-CPU machine).
pub fn child() -> Child {
    let c = Command::new("python3")
        .args(["-c", "import threading,time\nfor _ in range(2): threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\ntime.sleep(30)"])
        .spawn()
        .expect("python3");
    for _ in 0..100 {
        if procfs::tids(Path::new("/proc"), c.id() as i32).len() >= 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    c
}

pub fn masks(pid: i32) -> Vec<Cpus> {
    procfs::tids(Path::new("/proc"), pid).iter().map(|&t| get_affinity(t).unwrap()).collect()
}

pub fn state(pid: i32) -> char {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    s[s.rfind(')').unwrap() + 2..].chars().next().unwrap()
}
