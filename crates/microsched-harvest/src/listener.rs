//! The registration listener: the artifact's protocol (`Listener/listener.cpp`) on a loopback
//! TCP port (10101 there). One connection carries one JSON object; the agent answers the 4
//! bytes `ACK\0` once the agent has registered it (`NAK\0` if the message or the registration
//! is refused — no such process, no cgroup for the pod: the reason goes to the decision log) and
//! closes. The artifact acknowledges what it parsed and reads until its 1 s receive timeout;
//! here the object is parsed as soon as it is complete, so a registration costs a round trip
//! and one agent tick, not a second.
//!
//! Messages (values are strings in the artifact's clients; numbers are accepted too):
//! * `{"ctr_type":"Primary","cpuList":"2,4","LOWIDLEFREQ_THRESHOLD":"0.001","LOW_TIC":"2",
//!   "targetIdleCores":"7","static_targetIdleCores":"7","minSecondaryCores":"0"}` — plus, as
//!   extensions, `"pid"` or `"pod_id"` (whose threads the `tasks` monitor watches).
//! * `{"ctr_type":"Secondary","pod_id":"pod<uid>"}` — or, as an extension, `"pid"`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A registration as received.
#[derive(Debug, Clone, PartialEq)]
pub enum Registration {
    Primary {
        cpus: String,
        pid: Option<i32>,
        pod_id: Option<String>,
        threshold: Option<f64>,
        low_tic: Option<u32>,
        target_idle: Option<u32>,
        static_target_idle: Option<u32>,
    },
    Secondary { pid: Option<i32>, pod_id: Option<String> },
}

fn field<T: std::str::FromStr>(v: &Value, key: &str) -> Result<Option<T>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => s.trim().parse().map(Some).map_err(|_| format!("{key}: `{s}` is not a valid value")),
        Some(Value::Number(n)) => n.to_string().parse().map(Some).map_err(|_| format!("{key}: {n} is not a valid value")),
        Some(other) => Err(format!("{key}: {other} is not allowed: use a string or a number")),
    }
}

/// Parses one message.
pub fn parse(v: &Value) -> Result<Registration, String> {
    let kind = v.get("ctr_type").and_then(Value::as_str).ok_or("ctr_type: missing: use \"Primary\" or \"Secondary\"")?;
    let pod_id = field::<String>(v, "pod_id")?;
    let pid = field::<i32>(v, "pid")?;
    match kind {
        "Primary" => Ok(Registration::Primary {
            cpus: field::<String>(v, "cpuList")?.ok_or("cpuList: missing: the Primary's CPU list, e.g. \"0-1\"")?,
            pid,
            pod_id,
            threshold: field(v, "LOWIDLEFREQ_THRESHOLD")?,
            low_tic: field(v, "LOW_TIC")?,
            target_idle: field(v, "targetIdleCores")?,
            static_target_idle: field(v, "static_targetIdleCores")?,
        }),
        "Secondary" => {
            if pid.is_none() && pod_id.is_none() {
                return Err("Secondary: give pod_id (\"pod<uid>\") or pid".into());
            }
            Ok(Registration::Secondary { pid, pod_id })
        }
        other => Err(format!("ctr_type: `{other}` is not allowed: use \"Primary\" or \"Secondary\"")),
    }
}

/// What the listener hands the agent: a registration with where to send the verdict (the
/// connection waits for it: ACK means registered), or a refused message and why.
pub type Received = (Result<Registration, String>, Option<mpsc::Sender<Result<(), String>>>);

fn handle(mut s: TcpStream, tx: &mpsc::Sender<Received>) {
    let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let msg: Result<Registration, String> = loop {
        if let Ok(v) = serde_json::from_slice::<Value>(&buf) {
            break parse(&v);
        }
        if Instant::now() >= deadline || buf.len() > 65536 {
            break Err(format!("not one JSON object: {:?}", String::from_utf8_lossy(&buf[..buf.len().min(200)])));
        }
        match s.read(&mut chunk) {
            Ok(0) => {
                break serde_json::from_slice::<Value>(&buf).map_err(|e| format!("not JSON: {e}")).and_then(|v| parse(&v));
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => break Err(format!("read: {e}")),
        }
    };
    let ok = match msg {
        Ok(reg) => {
            let (vtx, vrx) = mpsc::channel();
            let _ = tx.send((Ok(reg), Some(vtx)));
            matches!(vrx.recv_timeout(Duration::from_secs(5)), Ok(Ok(())))
        }
        Err(e) => {
            let _ = tx.send((Err(e), None));
            false
        }
    };
    let _ = s.write_all(if ok { b"ACK\0" } else { b"NAK\0" });
}

/// A listener thread; dropped, it stops.
pub struct Listener {
    pub addr: SocketAddr,
    pub rx: mpsc::Receiver<Received>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Listener {
    /// Binds `addr`, which must be a loopback address (the registration is unauthenticated).
    pub fn start(addr: SocketAddr) -> Result<Self, String> {
        if !addr.ip().is_loopback() {
            return Err(format!("--listen: {addr} is not allowed: registration is unauthenticated, use a loopback address"));
        }
        let l = TcpListener::bind(addr).map_err(|e| format!("--listen: cannot bind {addr}: {e}"))?;
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
        let addr = l.local_addr().map_err(|e| e.to_string())?;
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("harvest-listen".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    match l.accept() {
                        Ok((s, _)) => {
                            let _ = s.set_nonblocking(false);
                            handle(s, &tx);
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(Self { addr, rx, stop, thread: Some(thread) })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_messages_parse() {
        let p: Value = serde_json::from_str(
            r#"{"ctr_type":"Primary","cpuList":"2,4","LOWIDLEFREQ_THRESHOLD":"0.001","LOW_TIC":"2","targetIdleCores":"7","static_targetIdleCores":"7","minSecondaryCores":"0"}"#,
        )
        .unwrap();
        assert_eq!(
            parse(&p).unwrap(),
            Registration::Primary {
                cpus: "2,4".into(),
                pid: None,
                pod_id: None,
                threshold: Some(0.001),
                low_tic: Some(2),
                target_idle: Some(7),
                static_target_idle: Some(7)
            }
        );
        let s: Value = serde_json::from_str(r#"{"ctr_type":"Secondary","pod_id":"podabc"}"#).unwrap();
        assert_eq!(parse(&s).unwrap(), Registration::Secondary { pid: None, pod_id: Some("podabc".into()) });
        let bad: Value = serde_json::from_str(r#"{"ctr_type":"Tertiary"}"#).unwrap();
        assert!(parse(&bad).unwrap_err().starts_with("ctr_type:"));
        let bad: Value = serde_json::from_str(r#"{"ctr_type":"Primary","cpuList":"0","LOW_TIC":"two"}"#).unwrap();
        assert!(parse(&bad).unwrap_err().starts_with("LOW_TIC:"));
    }

    #[test]
    fn listener_acks_a_registration_without_waiting_for_a_timeout() {
        let l = Listener::start("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = l.addr;
        let t = Instant::now();
        // As the artifact's client: send, keep the write side open, wait for 4 bytes.
        // The agent's side: registers pid 42, refuses pid 43.
        let rx = std::thread::spawn(move || {
            for _ in 0..3 {
                let (m, verdict) = l.rx.recv_timeout(Duration::from_secs(5)).unwrap();
                if let (Ok(Registration::Secondary { pid, .. }), Some(v)) = (m, verdict) {
                    let _ = v.send(if pid == Some(42) { Ok(()) } else { Err("no such process".into()) });
                }
            }
            l
        });
        let send = |msg: &[u8]| {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(msg).unwrap();
            let mut ack = [0u8; 4];
            c.read_exact(&mut ack).unwrap();
            ack
        };
        assert_eq!(&send(br#"{"ctr_type":"Secondary","pid":"42"}"#), b"ACK\0");
        assert!(t.elapsed() < Duration::from_millis(900), "{:?}", t.elapsed());
        assert_eq!(&send(br#"{"ctr_type":"Secondary","pid":43}"#), b"NAK\0");
        assert_eq!(&send(b"{\"ctr_type\":\"Secondary\"}"), b"NAK\0");
        rx.join().unwrap();
        assert!(Listener::start("0.0.0.0:0".parse().unwrap()).is_err());
    }
}
