//! Two-phase affinity on a real process: masks applied to every thread, a stopped Secondary when
//! it has no core, and everything restored (also when the ledger is dropped, as on a panic).

use std::path::Path;

use microsched_harvest::actuate::Secondary;
use microsched_harvest::cpus::{online, Cpus};

use crate::common::{child, masks, state};

#[test]
fn assign_stop_and_restore() {
    let all = online();
    let first = *all.iter().next().unwrap();
    let mut c = child();
    let pid = c.id() as i32;
    let before = masks(pid);
    assert_eq!(before.len(), 3);
    let mut s = Secondary::new(Path::new("/proc"));
    s.pids.push(pid);
    let one = Cpus::from([first]);
    let a = s.assign(&one, &one);
    assert!(a.errors.is_empty(), "{:?}", a.errors);
    assert_eq!(a.stray, 0);
    assert!(masks(pid).iter().all(|m| m == &one));
    // No core left: stopped (every thread), affinity untouched.
    let a = s.assign(&Cpus::new(), &Cpus::new());
    assert!(a.errors.is_empty(), "{:?}", a.errors);
    assert!(s.stopped);
    assert_eq!(state(pid), 'T');
    // A core again: masks first, then resumed.
    let a = s.assign(&all, &all);
    assert!(a.errors.is_empty(), "{:?}", a.errors);
    assert!(!s.stopped);
    assert_ne!(state(pid), 'T');
    s.assign(&one, &Cpus::new());
    s.assign(&Cpus::new(), &Cpus::new());
    assert_eq!(state(pid), 'T');
    // Dropping the ledger restores the original masks and resumes the process.
    drop(s);
    assert_eq!(masks(pid), before);
    assert_ne!(state(pid), 'T');
    c.kill().unwrap();
    c.wait().unwrap();
}

#[test]
fn restore_tolerates_threads_that_exited() {
    let mut c = child();
    let pid = c.id() as i32;
    let mut s = Secondary::new(Path::new("/proc"));
    s.pids.push(pid);
    let one = Cpus::from([*online().iter().next().unwrap()]);
    s.assign(&one, &Cpus::new());
    c.kill().unwrap();
    c.wait().unwrap();
    let (_, errors) = s.restore();
    assert!(errors.is_empty(), "{errors:?}");
}
