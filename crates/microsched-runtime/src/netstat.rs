//! Datagrams the kernel dropped at a UDP socket (its receive buffer was full), from
//! `/proc/net/udp` and `/proc/net/udp6`: the one loss the runtime cannot see itself, needed to
//! reconcile what a client sent with what a server received.

use std::net::SocketAddr;

/// The kernel's drop counter of the UDP socket bound to `local`, if it can be read.
pub fn udp_drops(local: SocketAddr) -> Option<u64> {
    let file = if local.is_ipv4() { "/proc/net/udp" } else { "/proc/net/udp6" };
    let text = std::fs::read_to_string(file).ok()?;
    let port = format!(":{:04X}", local.port());
    let mut total = None;
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 13 || !f[1].ends_with(&port) {
            continue;
        }
        if let Ok(d) = f[f.len() - 1].parse::<u64>() {
            *total.get_or_insert(0) += d;
        }
    }
    total
}
