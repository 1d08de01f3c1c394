//! An optional shared secret that authenticates `Connect`, so that only clients holding it can
//! take a session slot. The secret comes from the environment variable [`ENV`] (never from the
//! scenario file, which is shared and versioned); server and load generator read it at start.
//!
//! With a secret, a client sends `AuthConnect { cookie, demand, stamp_ms, mac }`: `stamp_ms` its
//! Unix time in ms, `mac` the first 16 bytes of HMAC-SHA256(secret, "microsched-connect-v1" ‖
//! cookie ‖ demand ‖ stamp_ms). The server accepts a stamp within [`WINDOW_MS`] of its own clock
//! and remembers the MACs it accepted within that window, so a captured `AuthConnect` cannot be
//! replayed from another address (a retransmission from the same address is the same session).
//! A plain `Connect` gets no answer and is counted `unauthenticated`; a wrong MAC `bad_mac`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The environment variable holding the shared secret (unset: no authentication; empty: an error).
pub const ENV: &str = "MICROSCHED_SECRET";
/// How far a Connect's time stamp may be from the server's clock.
pub const WINDOW_MS: u64 = 30_000;
/// MAC bytes carried in `AuthConnect`.
pub const MAC_LEN: usize = 16;

type HmacSha256 = Hmac<Sha256>;

#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)") // never printed
    }
}

impl Secret {
    pub fn new(bytes: &[u8]) -> Option<Self> {
        (!bytes.is_empty()).then(|| Self(bytes.to_vec()))
    }

    /// The secret in [`ENV`], if set. Set but empty is an error: it would silently turn
    /// authentication off (a typo in a deployment must not open the server).
    pub fn from_env() -> Result<Option<Self>, crate::config::ConfigError> {
        Self::from_value(std::env::var_os(ENV).as_deref())
    }

    /// [`Secret::from_env`] on a value of [`ENV`] (`None`: unset).
    pub fn from_value(v: Option<&std::ffi::OsStr>) -> Result<Option<Self>, crate::config::ConfigError> {
        match v {
            None => Ok(None),
            Some(v) => Self::new(v.as_encoded_bytes()).map(Some).ok_or_else(|| {
                crate::config::ConfigError(format!(
                    "{ENV}: set but empty, which would turn authentication off: give it a non-empty secret, or unset \
                     it to run without authentication"
                ))
            }),
        }
    }

    fn hmac(&self, cookie: u32, demand: u32, stamp_ms: u64) -> HmacSha256 {
        let mut m = HmacSha256::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        m.update(b"microsched-connect-v1");
        m.update(&cookie.to_le_bytes());
        m.update(&demand.to_le_bytes());
        m.update(&stamp_ms.to_le_bytes());
        m
    }

    pub fn mac(&self, cookie: u32, demand: u32, stamp_ms: u64) -> [u8; MAC_LEN] {
        let full = self.hmac(cookie, demand, stamp_ms).finalize().into_bytes();
        let mut out = [0u8; MAC_LEN];
        out.copy_from_slice(&full[..MAC_LEN]);
        out
    }

    /// Checks a MAC (in constant time) and its time stamp against `now_ms`.
    pub fn verify(&self, cookie: u32, demand: u32, stamp_ms: u64, mac: &[u8; MAC_LEN], now_ms: u64) -> Result<(), Refusal> {
        self.hmac(cookie, demand, stamp_ms).verify_truncated_left(mac).map_err(|_| Refusal::BadMac)?;
        if now_ms.abs_diff(stamp_ms) > WINDOW_MS {
            return Err(Refusal::Stale);
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    BadMac,
    /// A valid MAC on a stamp outside the window, or replayed from another address.
    Stale,
}

/// The MACs accepted within the window, with the address that sent them.
#[derive(Debug, Default)]
pub struct ReplayGuard {
    seen: HashMap<[u8; MAC_LEN], (SocketAddr, u64)>,
}

impl ReplayGuard {
    /// Whether an `AuthConnect` with this MAC from `peer` may proceed (a first use, or a
    /// retransmission from the same address).
    pub fn admit(&mut self, mac: [u8; MAC_LEN], peer: SocketAddr, stamp_ms: u64, now_ms: u64) -> bool {
        if self.seen.len() > 65_536 {
            self.seen.retain(|_, (_, s)| now_ms.abs_diff(*s) <= WINDOW_MS);
        }
        match self.seen.get(&mac) {
            Some((p, _)) => *p == peer,
            None => {
                self.seen.insert(mac, (peer, stamp_ms));
                true
            }
        }
    }
}

pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_verifies_and_refuses_tampering_staleness_and_replay() {
        let s = Secret::new(b"s3cret").unwrap();
        let now = 1_700_000_000_000;
        let mac = s.mac(7, 0, now);
        assert_eq!(s.verify(7, 0, now, &mac, now + 1000), Ok(()));
        assert_eq!(s.verify(8, 0, now, &mac, now), Err(Refusal::BadMac));
        assert_eq!(Secret::new(b"other").unwrap().verify(7, 0, now, &mac, now), Err(Refusal::BadMac));
        assert_eq!(s.verify(7, 0, now, &mac, now + WINDOW_MS + 1), Err(Refusal::Stale));
        assert!(Secret::new(b"").is_none());
        let empty = Secret::from_value(Some(std::ffi::OsStr::new(""))).unwrap_err();
        assert!(empty.0.starts_with("MICROSCHED_SECRET: set but empty") && empty.0.contains("unset"), "{empty}");
        assert!(Secret::from_value(None).unwrap().is_none());
        assert!(Secret::from_value(Some(std::ffi::OsStr::new("x"))).unwrap().is_some());
        let (a, b): (SocketAddr, SocketAddr) = ("127.0.0.1:1".parse().unwrap(), "127.0.0.1:2".parse().unwrap());
        let mut g = ReplayGuard::default();
        assert!(g.admit(mac, a, now, now));
        assert!(g.admit(mac, a, now, now), "a retransmission");
        assert!(!g.admit(mac, b, now, now), "a replay from elsewhere");
    }
}
