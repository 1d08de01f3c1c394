//! The wire protocol: a small, versioned binary format over UDP, one message per datagram.
//!
//! Every message starts with a 4-byte header: the magic `b"MS"`, the protocol [`VERSION`] and a
//! kind byte. Fields follow in little-endian order, with a fixed length per kind; a datagram of
//! any other length is malformed. [`decode`] never panics, whatever the bytes: it returns a
//! [`DecodeError`] whose [`DecodeError::reason`] is the counter the server bumps.
//!
//! | kind | message        | fields after the header                                        |
//! |------|----------------|----------------------------------------------------------------|
//! | 1    | Connect        | cookie u32, demand u32                                         |
//! | 2    | ConnectAck     | cookie u32, token u64, credits u32                             |
//! | 3    | Request        | token u64, req_id u64, demand u32, service_ns u64, rtype u16   |
//! | 4    | Response       | req_id u64, credits u32, status u8, qdelay_ns u64              |
//! | 5    | Credit         | cookie u32, credits u32                                        |
//! | 6    | Disconnect     | token u64                                                      |
//! | 7    | CreditRequest  | token u64, demand u32                                          |
//! | 8    | Full           | cookie u32                                                     |
//! | 9    | AuthConnect    | cookie u32, demand u32, stamp_ms u64, mac [u8; 16]             |
//!
//! * The **cookie** is the client's own tag for a session (its index in the load generator),
//!   echoed by the server in `ConnectAck` and `Credit` so that one client socket can carry many
//!   sessions. The server never trusts it for anything.
//! * The **token** is the server's unguessable 64-bit session secret, handed out in
//!   `ConnectAck`; every later message of the session carries it.
//! * **credits** is always absolute (Breakwater's `win`): the number of requests the client may
//!   have outstanding. 0 with no overload control.
//! * A `Response` answers every request that reached the server with a valid token: `Ok` (served),
//!   `Dropped` (AQM drop notice), `Rejected` (the session had no credit for it) or
//!   `LockDropped` (status 3: dropped by ASQM at a lock, inside the application). `qdelay_ns` is
//!   the time the request waited at the server before a worker started it, `service_ns` its time
//!   from that start to the response (since version 2).
//! * `Full` answers a `Connect` the server cannot take (every session slot is held): the client
//!   learns why it gets no `ConnectAck` (idle sessions expire, so a later retry may succeed).
//! * `demand` is the number of requests still queued at the client after this one (Breakwater's
//!   piggybacked demand); in `Connect` and `CreditRequest` it asks for credits.

pub const MAGIC: [u8; 2] = *b"MS";
/// 2: `Response` carries the server's `service_ns` (a version-1 peer is refused with a
/// clear error, not misread).
pub const VERSION: u8 = 2;
pub const HEADER_LEN: usize = 4;
/// Largest encoded message: a receive buffer of this size never truncates a valid one.
pub const MAX_LEN: usize = HEADER_LEN + 34;

/// How the server answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    Ok = 0,
    /// Dropped by the server's AQM (a drop notice: the client frees the credit).
    Dropped = 1,
    /// The session had no credit for it: refused without running.
    Rejected = 2,
    /// Dropped inside the application by ASQM (a lock it would have waited too long for): a
    /// failure reply sent at once, the credit returned.
    LockDropped = 3,
    /// Dropped at worker start (Breakwater v2's latency budget): a failure reply, the credit
    /// returned.
    StartDropped = 4,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msg {
    Connect { cookie: u32, demand: u32 },
    ConnectAck { cookie: u32, token: u64, credits: u32 },
    Request { token: u64, req_id: u64, demand: u32, service_ns: u64, rtype: u16 },
    /// `qdelay_ns`: the server's queueing delay (admission to first start); `service_ns`: its
    /// time from the first start to the response (the run itself, and any wait after a
    /// preemption or behind a mutex). Both 0 for a request that never started.
    Response { req_id: u64, credits: u32, status: Status, qdelay_ns: u64, service_ns: u64 },
    Credit { cookie: u32, credits: u32 },
    Disconnect { token: u64 },
    CreditRequest { token: u64, demand: u32 },
    Full { cookie: u32 },
    /// A Connect carrying a MAC under the shared secret (see [`crate::auth`]).
    AuthConnect { cookie: u32, demand: u32, stamp_ms: u64, mac: [u8; 16] },
}

/// Why a datagram is not a valid message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than the header.
    Short,
    BadMagic,
    BadVersion(u8),
    UnknownKind(u8),
    /// Right kind, wrong length.
    BadLength { kind: u8, len: usize },
    BadStatus(u8),
}

impl DecodeError {
    /// A stable name for counters and reports.
    pub fn reason(&self) -> &'static str {
        match self {
            DecodeError::Short => "short",
            DecodeError::BadMagic => "bad_magic",
            DecodeError::BadVersion(_) => "bad_version",
            DecodeError::UnknownKind(_) => "unknown_kind",
            DecodeError::BadLength { .. } => "bad_length",
            DecodeError::BadStatus(_) => "bad_status",
        }
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Short => write!(f, "datagram shorter than the {HEADER_LEN}-byte header"),
            DecodeError::BadMagic => write!(f, "bad magic (not a microsched datagram)"),
            DecodeError::BadVersion(v) => write!(f, "protocol version {v} is not supported (this is version {VERSION})"),
            DecodeError::UnknownKind(k) => write!(f, "unknown message kind {k}"),
            DecodeError::BadLength { kind, len } => write!(f, "message kind {kind} with a wrong length of {len} bytes"),
            DecodeError::BadStatus(s) => write!(f, "unknown response status {s}"),
        }
    }
}

impl std::error::Error for DecodeError {}

const K_CONNECT: u8 = 1;
const K_CONNECT_ACK: u8 = 2;
const K_REQUEST: u8 = 3;
const K_RESPONSE: u8 = 4;
const K_CREDIT: u8 = 5;
const K_DISCONNECT: u8 = 6;
const K_CREDIT_REQUEST: u8 = 7;
const K_FULL: u8 = 8;
const K_AUTH_CONNECT: u8 = 9;

/// Body length of each kind.
fn body_len(kind: u8) -> Option<usize> {
    Some(match kind {
        K_CONNECT => 8,
        K_CONNECT_ACK => 16,
        K_REQUEST => 30,
        K_RESPONSE => 29,
        K_CREDIT => 8,
        K_DISCONNECT => 8,
        K_CREDIT_REQUEST => 12,
        K_FULL => 4,
        K_AUTH_CONNECT => 32,
        _ => return None,
    })
}

/// A bounds-checked little-endian reader; the lengths are checked once before reading, so its
/// reads cannot fail, but they still return zero rather than panic if that ever changed.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        if let Some(s) = self.buf.get(self.pos..self.pos + N) {
            out.copy_from_slice(s);
        }
        self.pos += N;
        out
    }
    fn u8(&mut self) -> u8 {
        self.bytes::<1>()[0]
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.bytes())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.bytes())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.bytes())
    }
}

/// Decodes one datagram. Never panics.
pub fn decode(buf: &[u8]) -> Result<Msg, DecodeError> {
    if buf.len() < HEADER_LEN {
        return Err(DecodeError::Short);
    }
    if buf[0..2] != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    if buf[2] != VERSION {
        return Err(DecodeError::BadVersion(buf[2]));
    }
    let kind = buf[3];
    let want = body_len(kind).ok_or(DecodeError::UnknownKind(kind))?;
    if buf.len() != HEADER_LEN + want {
        return Err(DecodeError::BadLength { kind, len: buf.len() });
    }
    let mut r = Reader { buf, pos: HEADER_LEN };
    Ok(match kind {
        K_CONNECT => Msg::Connect { cookie: r.u32(), demand: r.u32() },
        K_CONNECT_ACK => Msg::ConnectAck { cookie: r.u32(), token: r.u64(), credits: r.u32() },
        K_REQUEST => Msg::Request { token: r.u64(), req_id: r.u64(), demand: r.u32(), service_ns: r.u64(), rtype: r.u16() },
        K_RESPONSE => {
            let (req_id, credits) = (r.u64(), r.u32());
            let status = match r.u8() {
                0 => Status::Ok,
                1 => Status::Dropped,
                2 => Status::Rejected,
                3 => Status::LockDropped,
                4 => Status::StartDropped,
                s => return Err(DecodeError::BadStatus(s)),
            };
            Msg::Response { req_id, credits, status, qdelay_ns: r.u64(), service_ns: r.u64() }
        }
        K_CREDIT => Msg::Credit { cookie: r.u32(), credits: r.u32() },
        K_DISCONNECT => Msg::Disconnect { token: r.u64() },
        K_CREDIT_REQUEST => Msg::CreditRequest { token: r.u64(), demand: r.u32() },
        K_FULL => Msg::Full { cookie: r.u32() },
        K_AUTH_CONNECT => {
            let (cookie, demand, stamp_ms) = (r.u32(), r.u32(), r.u64());
            let mut mac = [0u8; 16];
            for b in &mut mac {
                *b = r.u8();
            }
            Msg::AuthConnect { cookie, demand, stamp_ms, mac }
        }
        _ => return Err(DecodeError::UnknownKind(kind)),
    })
}

/// A message encoded into a fixed buffer, ready for `send_to`.
#[derive(Clone, Copy)]
pub struct Encoded {
    buf: [u8; MAX_LEN],
    len: usize,
}

impl std::ops::Deref for Encoded {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

struct Writer {
    buf: [u8; MAX_LEN],
    len: usize,
}

impl Writer {
    fn new(kind: u8) -> Self {
        let mut buf = [0u8; MAX_LEN];
        buf[0..2].copy_from_slice(&MAGIC);
        buf[2] = VERSION;
        buf[3] = kind;
        Self { buf, len: HEADER_LEN }
    }
    fn put(&mut self, b: &[u8]) -> &mut Self {
        self.buf[self.len..self.len + b.len()].copy_from_slice(b);
        self.len += b.len();
        self
    }
    fn done(&self) -> Encoded {
        Encoded { buf: self.buf, len: self.len }
    }
}

pub fn encode(m: &Msg) -> Encoded {
    match *m {
        Msg::Connect { cookie, demand } => Writer::new(K_CONNECT).put(&cookie.to_le_bytes()).put(&demand.to_le_bytes()).done(),
        Msg::ConnectAck { cookie, token, credits } => Writer::new(K_CONNECT_ACK)
            .put(&cookie.to_le_bytes())
            .put(&token.to_le_bytes())
            .put(&credits.to_le_bytes())
            .done(),
        Msg::Request { token, req_id, demand, service_ns, rtype } => Writer::new(K_REQUEST)
            .put(&token.to_le_bytes())
            .put(&req_id.to_le_bytes())
            .put(&demand.to_le_bytes())
            .put(&service_ns.to_le_bytes())
            .put(&rtype.to_le_bytes())
            .done(),
        Msg::Response { req_id, credits, status, qdelay_ns, service_ns } => Writer::new(K_RESPONSE)
            .put(&req_id.to_le_bytes())
            .put(&credits.to_le_bytes())
            .put(&[status as u8])
            .put(&qdelay_ns.to_le_bytes())
            .put(&service_ns.to_le_bytes())
            .done(),
        Msg::Credit { cookie, credits } => Writer::new(K_CREDIT).put(&cookie.to_le_bytes()).put(&credits.to_le_bytes()).done(),
        Msg::Disconnect { token } => Writer::new(K_DISCONNECT).put(&token.to_le_bytes()).done(),
        Msg::CreditRequest { token, demand } => {
            Writer::new(K_CREDIT_REQUEST).put(&token.to_le_bytes()).put(&demand.to_le_bytes()).done()
        }
        Msg::Full { cookie } => Writer::new(K_FULL).put(&cookie.to_le_bytes()).done(),
        Msg::AuthConnect { cookie, demand, stamp_ms, mac } => Writer::new(K_AUTH_CONNECT)
            .put(&cookie.to_le_bytes())
            .put(&demand.to_le_bytes())
            .put(&stamp_ms.to_le_bytes())
            .put(&mac)
            .done(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all() -> Vec<Msg> {
        vec![
            Msg::Connect { cookie: 7, demand: 3 },
            Msg::ConnectAck { cookie: 7, token: 0xdead_beef_0123_4567, credits: 9 },
            Msg::Request { token: u64::MAX, req_id: 42, demand: 1, service_ns: 20_000, rtype: 65535 },
            Msg::Response { req_id: 42, credits: 63, status: Status::Ok, qdelay_ns: 1234, service_ns: 5678 },
            Msg::Response { req_id: 43, credits: 0, status: Status::Dropped, qdelay_ns: 0, service_ns: 0 },
            Msg::Response { req_id: 44, credits: 1, status: Status::Rejected, qdelay_ns: 0, service_ns: 0 },
            Msg::Response { req_id: 45, credits: 2, status: Status::LockDropped, qdelay_ns: 7, service_ns: 0 },
            Msg::Response { req_id: 46, credits: 3, status: Status::StartDropped, qdelay_ns: 8, service_ns: 0 },
            Msg::Credit { cookie: 1, credits: 5 },
            Msg::Disconnect { token: 5 },
            Msg::CreditRequest { token: 5, demand: 16 },
            Msg::Full { cookie: 3 },
            Msg::AuthConnect { cookie: 3, demand: 2, stamp_ms: 1_700_000_000_000, mac: [7; 16] },
        ]
    }

    #[test]
    fn round_trip_every_kind() {
        for m in all() {
            let e = encode(&m);
            assert!(e.len() <= MAX_LEN);
            assert_eq!(decode(&e), Ok(m));
        }
    }

    #[test]
    fn malformed_is_an_error_with_a_reason() {
        let ok = encode(&Msg::Disconnect { token: 1 });
        assert_eq!(decode(&[]), Err(DecodeError::Short));
        assert_eq!(decode(b"XS\x01\x06").unwrap_err().reason(), "bad_magic");
        let mut v = ok.to_vec();
        v[2] = 9;
        assert_eq!(decode(&v), Err(DecodeError::BadVersion(9)));
        v[2] = VERSION;
        v[3] = 200;
        assert_eq!(decode(&v), Err(DecodeError::UnknownKind(200)));
        v[3] = 6;
        v.push(0);
        assert_eq!(decode(&v).unwrap_err().reason(), "bad_length");
        let mut r = encode(&Msg::Response { req_id: 1, credits: 1, status: Status::Ok, qdelay_ns: 0, service_ns: 0 }).to_vec();
        r[HEADER_LEN + 12] = 5;
        assert_eq!(decode(&r), Err(DecodeError::BadStatus(5)));
        // Every truncation of every message is an error, never a panic.
        for m in all() {
            let e = encode(&m);
            for n in 0..e.len() {
                assert!(decode(&e[..n]).is_err());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]

        /// Random bytes never panic the decoder.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&bytes);
        }

        /// Random bodies behind a valid header never panic, and what decodes re-encodes to the
        /// same bytes.
        #[test]
        fn valid_headers_random_bodies(kind in 0u8..10, body in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut v = vec![MAGIC[0], MAGIC[1], VERSION, kind];
            v.extend_from_slice(&body);
            if let Ok(m) = decode(&v) {
                prop_assert_eq!(&encode(&m)[..], &v[..]);
            }
        }
    }
}
