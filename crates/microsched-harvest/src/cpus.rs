//! CPU lists ("0-1,4") and affinity masks (`cpu_set_t`), with the syscalls on thread ids.

use std::collections::BTreeSet;
use std::io;

pub type Cpus = BTreeSet<usize>;

/// Parses a Linux CPU list ("0-2,5"); `field` names the option in the error.
pub fn parse_list(s: &str, field: &str) -> Result<Cpus, String> {
    let mut out = Cpus::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("{field}: `{s}` is not allowed: use a CPU list such as 0-1,3");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => {
                out.insert(part.parse().map_err(|_| bad())?);
            }
        }
    }
    Ok(out)
}

/// Formats a set as a compact CPU list.
pub fn format_list(c: &Cpus) -> String {
    let v: Vec<usize> = c.iter().copied().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}-{}", v[i], v[j]) } else { v[i].to_string() });
        i = j + 1;
    }
    out.join(",")
}

fn to_set(c: &Cpus) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
    let mut s: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &i in c {
        // SAFETY: CPU_SET bounds-checks against the set's size.
        unsafe { libc::CPU_SET(i, &mut s) };
    }
    s
}

/// The affinity of thread `tid`.
pub fn get_affinity(tid: i32) -> io::Result<Cpus> {
    // SAFETY: as in to_set.
    let mut s: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer and size describe `s`.
    if unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut s) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize).filter(|&i| unsafe { libc::CPU_ISSET(i, &s) }).collect())
}

/// Sets the affinity of thread `tid` (the kernel migrates it at once if it runs elsewhere).
pub fn set_affinity(tid: i32, c: &Cpus) -> io::Result<()> {
    let s = to_set(c);
    // SAFETY: the pointer and size describe `s`.
    if unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &s) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// CPUs online on this machine.
pub fn online() -> Cpus {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_list(s.trim(), "online").ok())
        .unwrap_or_else(|| (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_round_trip() {
        let c = parse_list("0-2,5,7-8", "x").unwrap();
        assert_eq!(c.iter().copied().collect::<Vec<_>>(), [0, 1, 2, 5, 7, 8]);
        assert_eq!(format_list(&c), "0-2,5,7-8");
        assert!(parse_list("3-1", "--primary-cores").unwrap_err().starts_with("--primary-cores:"));
        assert!(parse_list("a", "x").is_err());
    }
}
