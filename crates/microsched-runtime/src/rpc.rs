//! The RPC layer's state: the session table (tokens, peers) and the credit controller, under one
//! lock. The receive path (workers polling the socket) authenticates and admits requests through it, workers report
//! completions, the controller ticks the credit pool.
//!
//! The credit controller is `microsched_core::overload::build`'s object, the very one the
//! simulator drives; this file only carries its decisions out. Breakwater's sessions are
//! `0..clients.sessions`, so a connect takes a free slot of that range.
//!
//! **Credit enforcement.** A request of a session that already has as many requests at the server
//! as it holds credits is *credit-less*: it is refused (a `Rejected` notice, never run, never
//! shown to the controller). Credits are absolute and the latest value may still be on its way to
//! the client while it uses an older, larger one, so the allowance is the largest of the last
//! [`ADV_HISTORY`] values the server advertised to the session.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use microsched_core::overload::{Admission, CreditController, CreditLink, CreditStats};
use microsched_core::Nanos;

/// Advertised credit values remembered per session for the allowance.
pub const ADV_HISTORY: usize = 4;

/// Who holds sessions, for the fairness rules ([`Fairness`]): a loopback client is its socket
/// address (local processes differ by port), a remote IPv4 client its /24 network and a remote
/// IPv6 client its /64 (one sender with many addresses or ports of one network counts once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientKey {
    Socket(SocketAddr),
    V4Net(u32),
    V6Net(u64),
}

impl ClientKey {
    pub fn of(peer: SocketAddr) -> Self {
        let ip = match peer.ip() {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            ip => ip,
        };
        match ip {
            ip if ip.is_loopback() => ClientKey::Socket(peer),
            IpAddr::V4(v4) => ClientKey::V4Net(u32::from(v4) & 0xffff_ff00),
            IpAddr::V6(v6) => ClientKey::V6Net((u128::from(v6) >> 64) as u64),
        }
    }
}

/// How session slots are shared between clients ([`ClientKey`]).
///
/// * **Cap.** A client holds at most `max_per_client` sessions (a Connect past it is answered
///   `Full`).
/// * **Eviction.** A resent Connect is not activity. When every slot is taken, a new session
///   may take the slot of a session idle for `evict_idle_ns` (nothing at the server, no
///   request or credit request): one of a client that never sent a request at all (it squats:
///   Connects only) whoever asks, else, for a client holding less than its fair share (slots /
///   clients holding or asking for slots, rounded up), one of the client holding the most, if
///   that client holds more than its share. So one client alone may take every slot; a client
///   that only re-sends Connects keeps none from a newcomer, and one that uses its sessions
///   keeps its fair share of them.
/// * **Rate.** Each client may send `connect_rate` Connects per second, in bursts of up to
///   `connect_burst` (a token bucket); Connects past it are dropped unanswered and counted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fairness {
    pub max_per_client: u32,
    pub connect_rate: f64,
    pub connect_burst: f64,
    pub evict_idle_ns: Nanos,
}

impl Fairness {
    /// Every slot to one client if it is alone, idle sessions evictable after
    /// min(1 s, `session_idle_ns`), max(100, slots) Connects per second in bursts of
    /// 2 × slots + 64 (a load generator connects all its sessions at once and re-sends the
    /// unanswered ones every 100 ms).
    pub fn defaults(slots: u32, session_idle_ns: Nanos) -> Self {
        Self {
            max_per_client: slots,
            connect_rate: f64::from(slots.max(100)),
            connect_burst: 2.0 * f64::from(slots) + 64.0,
            evict_idle_ns: session_idle_ns.min(1_000_000_000),
        }
    }
}

/// What a Connect got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connected {
    /// A slot (new, or the one it already had: a resent Connect) with its token and credits.
    Ack { token: u64, credits: u32 },
    /// Every slot is taken (and none could be evicted for it).
    Full,
    /// The client already holds `max_per_client` sessions.
    OverCap,
    /// The client sent more Connects than its rate allows: dropped, unanswered.
    RateLimited,
}

/// Per client: sessions held and its Connect token bucket.
#[derive(Debug, Clone, Copy)]
struct ClientState {
    held: u32,
    tokens: f64,
    refilled_at: Nanos,
    /// A request or credit request of one of its sessions ever arrived: it uses what it holds.
    /// A client that only ever sent Connects squats its slots.
    active: bool,
}

/// After a fruitless scan for an evictable session, the next scan waits this long.
const EVICT_SCAN_GAP_NS: Nanos = 1_000_000;

/// Clients remembered at most (those holding nothing with a full bucket are forgotten first).
const MAX_CLIENTS: usize = 65_536;

#[derive(Debug, Clone)]
struct Slot {
    token: u64,
    peer: SocketAddr,
    cookie: u32,
    live: bool,
    /// Requests of the session at the server (admitted or AQM-dropped, until their response).
    outstanding: u32,
    adv: [u32; ADV_HISTORY],
    adv_i: usize,
    /// Last time the session was active: connected, or a request or credit request of it
    /// arrived or was answered (a resent Connect does not count).
    last_seen: Nanos,
    client: ClientKey,
}

impl Slot {
    fn advertise(&mut self, credits: u32) {
        self.adv_i = (self.adv_i + 1) % ADV_HISTORY;
        self.adv[self.adv_i] = credits;
    }
    fn allowance(&self) -> u32 {
        self.adv.iter().copied().max().unwrap_or(0)
    }
}

/// Outcome of authenticating a datagram's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    Ok(u32),
    UnknownToken,
    /// A valid token from another address than the session's: spoofed or stolen.
    WrongPeer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Admit,
    /// AQM drop: answer with a drop notice carrying `credits`.
    Drop { credits: u32 },
    /// No credit: answer with a rejection carrying `credits`.
    Reject { credits: u32 },
}

/// An explicit credit message to send.
#[derive(Debug, Clone, Copy)]
pub struct CreditMsg {
    pub peer: SocketAddr,
    pub cookie: u32,
    pub credits: u32,
}

pub struct Rpc {
    ctl: Option<Box<dyn CreditController>>,
    slots: Vec<Option<Slot>>,
    by_token: HashMap<u64, u32>,
    by_peer: HashMap<(SocketAddr, u32), u32>,
    free: Vec<u32>,
    connected: u32,
    ever_connected: bool,
    wake: Vec<(u32, u32)>,
    fair: Fairness,
    clients: HashMap<ClientKey, ClientState>,
    evicted: u64,
    /// A scan for an evictable session found none: the next one waits until then (a flood of
    /// Connects from new clients scans the slots at most every [`EVICT_SCAN_GAP_NS`]).
    no_scan_until: Nanos,
}

impl Rpc {
    /// A session table of `sessions` slots under [`Fairness::defaults`] (10 s idle expiry).
    pub fn new(ctl: Option<Box<dyn CreditController>>, sessions: u32) -> Self {
        Self::with_fairness(ctl, sessions, Fairness::defaults(sessions, 10_000_000_000))
    }

    pub fn with_fairness(ctl: Option<Box<dyn CreditController>>, sessions: u32, fair: Fairness) -> Self {
        Self {
            ctl,
            slots: vec![None; sessions as usize],
            by_token: HashMap::new(),
            by_peer: HashMap::new(),
            free: (0..sessions).rev().collect(),
            connected: 0,
            ever_connected: false,
            wake: Vec::new(),
            fair,
            clients: HashMap::new(),
            evicted: 0,
            no_scan_until: 0,
        }
    }

    pub fn fairness(&self) -> Fairness {
        self.fair
    }

    /// Sessions evicted so far in favour of a client under its fair share.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Sessions `peer`'s client holds.
    pub fn held_by(&self, peer: SocketAddr) -> u32 {
        self.clients.get(&ClientKey::of(peer)).map_or(0, |c| c.held)
    }

    pub fn credit_based(&self) -> bool {
        self.ctl.is_some()
    }
    pub fn controller_name(&self) -> &'static str {
        self.ctl.as_ref().map_or("none", |c| c.name())
    }
    pub fn timer_interval(&self) -> Option<Nanos> {
        self.ctl.as_ref().and_then(|c| c.timer_interval())
    }
    pub fn stats(&self) -> Option<CreditStats> {
        self.ctl.as_ref().map(|c| c.stats())
    }
    /// The credit controller as the core allocator sees it (CoreSync's §III-D interface), if any.
    pub fn link(&mut self) -> Option<&mut dyn CreditLink> {
        self.ctl.as_mut().map(|c| &mut **c as &mut dyn CreditLink)
    }
    /// Sessions holding no credits (0 without a credit controller).
    pub fn drained(&self) -> u32 {
        self.ctl.as_ref().map_or(0, |c| c.drained())
    }
    pub fn connected(&self) -> u32 {
        self.connected
    }
    /// Session slots in all.
    pub fn slots(&self) -> u32 {
        self.slots.len() as u32
    }
    /// Every session that ever connected has disconnected.
    pub fn all_gone(&self) -> bool {
        self.ever_connected && self.connected == 0
    }

    /// A connect from `peer` with the client's `cookie`: a slot and a fresh random token (the
    /// same ones again for a resent connect, which does not count as activity), and the credits
    /// for its demand; or why not ([`Fairness`]).
    pub fn connect(&mut self, now: Nanos, peer: SocketAddr, cookie: u32, demand: u32) -> Connected {
        let key = ClientKey::of(peer);
        if !self.take_token(now, key) {
            return Connected::RateLimited;
        }
        let sid = match self.by_peer.get(&(peer, cookie)) {
            Some(&sid) => sid,
            None => {
                let held = self.clients.get(&key).map_or(0, |c| c.held);
                if held >= self.fair.max_per_client {
                    // A cap of every slot is no cap: the table is full.
                    return if (self.fair.max_per_client as usize) < self.slots.len() { Connected::OverCap } else { Connected::Full };
                }
                if self.free.is_empty() && !self.evict_for(now, key, held) {
                    return Connected::Full;
                }
                let Some(sid) = self.free.pop() else { return Connected::Full };
                let mut token: u64 = rand::random();
                while token == 0 || self.by_token.contains_key(&token) {
                    token = rand::random();
                }
                self.slots[sid as usize] = Some(Slot {
                    token,
                    peer,
                    cookie,
                    live: true,
                    outstanding: 0,
                    adv: [0; ADV_HISTORY],
                    adv_i: 0,
                    last_seen: now,
                    client: key,
                });
                self.by_token.insert(token, sid);
                self.by_peer.insert((peer, cookie), sid);
                self.client_mut(now, key).held += 1;
                self.connected += 1;
                self.ever_connected = true;
                sid
            }
        };
        let credits = match (&mut self.ctl, demand) {
            (Some(ctl), d) if d > 0 => ctl.on_credit_request(now, sid, d).unwrap_or(0),
            _ => 0,
        };
        let slot = self.slots[sid as usize].as_mut().expect("connected slot");
        slot.advertise(credits);
        Connected::Ack { token: slot.token, credits }
    }

    fn client_mut(&mut self, now: Nanos, key: ClientKey) -> &mut ClientState {
        let burst = self.fair.connect_burst;
        self.clients.entry(key).or_insert(ClientState { held: 0, tokens: burst, refilled_at: now, active: false })
    }

    /// Takes one Connect token of `key`'s bucket, if it has one.
    fn take_token(&mut self, now: Nanos, key: ClientKey) -> bool {
        if !self.clients.contains_key(&key) && self.clients.len() >= MAX_CLIENTS {
            // Forget the clients that hold nothing and whose bucket has refilled (they are as
            // if new); if that frees nothing, a new client waits.
            let (rate, burst) = (self.fair.connect_rate, self.fair.connect_burst);
            self.clients.retain(|_, c| {
                c.held > 0 || c.tokens + now.saturating_sub(c.refilled_at) as f64 * 1e-9 * rate < burst
            });
            if self.clients.len() >= MAX_CLIENTS {
                return false;
            }
        }
        let (rate, burst) = (self.fair.connect_rate, self.fair.connect_burst);
        let c = self.client_mut(now, key);
        let dt = now.saturating_sub(c.refilled_at) as f64 * 1e-9;
        c.tokens = (c.tokens + dt * rate).min(burst);
        c.refilled_at = c.refilled_at.max(now);
        if c.tokens >= 1.0 {
            c.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Every slot is taken and `key` (holding `held`) asks for one. Evicts, among the sessions
    /// idle for `evict_idle_ns` with nothing at the server: first the longest idle of a client
    /// that never sent a request (it only squats: re-sent Connects), whoever asks; else, if
    /// `key` is under its fair share, the longest idle of the client holding the most, if that
    /// one is over it.
    fn evict_for(&mut self, now: Nanos, key: ClientKey, held: u32) -> bool {
        if now < self.no_scan_until {
            return false;
        }
        let holders = self.clients.values().filter(|c| c.held > 0).count() as u32 + u32::from(held == 0);
        let share = (self.slots.len() as u32).div_ceil(holders.max(1));
        let over_share = (held < share)
            .then(|| {
                self.clients
                    .iter()
                    .filter(|(k, c)| **k != key && c.held > share)
                    .max_by_key(|(_, c)| c.held)
                    .map(|(k, _)| *k)
            })
            .flatten();
        let idle = self.fair.evict_idle_ns;
        let squatter = |c: &ClientKey| self.clients.get(c).is_some_and(|c| !c.active);
        let pick = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(sid, s)| s.as_ref().map(|s| (sid, s)))
            .filter(|(_, s)| s.live && s.client != key && s.outstanding == 0 && now.saturating_sub(s.last_seen) >= idle)
            .filter(|(_, s)| squatter(&s.client) || Some(s.client) == over_share)
            .min_by_key(|(_, s)| (!squatter(&s.client), s.last_seen))
            .map(|(sid, _)| sid as u32);
        match pick {
            Some(sid) => {
                self.disconnect(now, sid);
                self.evicted += 1;
                true
            }
            None => {
                self.no_scan_until = now + EVICT_SCAN_GAP_NS;
                false
            }
        }
    }

    pub fn auth(&self, token: u64, peer: SocketAddr) -> Auth {
        match self.by_token.get(&token) {
            None => Auth::UnknownToken,
            Some(&sid) => match &self.slots[sid as usize] {
                Some(s) if s.live && s.peer == peer => Auth::Ok(sid),
                Some(s) if s.live => Auth::WrongPeer,
                _ => Auth::UnknownToken,
            },
        }
    }

    /// A request of an authenticated session reaches the server. One refused for want of
    /// credit is not activity: a session whose requests are all refused so is idle for
    /// eviction (else a client sending credit-less requests could hold every slot).
    pub fn admit(&mut self, now: Nanos, sid: u32, demand: u32, delay: Nanos) -> Verdict {
        if self.ctl.is_none() {
            self.touch(sid, now);
            return Verdict::Admit;
        }
        let slot = self.slots[sid as usize].as_mut().expect("authenticated slot");
        if slot.outstanding >= slot.allowance() {
            return Verdict::Reject { credits: slot.adv[slot.adv_i] };
        }
        self.touch(sid, now);
        let Some(ctl) = &mut self.ctl else { unreachable!("checked above") };
        let slot = self.slots[sid as usize].as_mut().expect("authenticated slot");
        slot.outstanding += 1;
        match ctl.on_request(now, sid, demand, delay) {
            Admission::Admit => Verdict::Admit,
            Admission::Drop => {
                let credits = ctl.on_response(now, sid, true, delay);
                slot.outstanding -= 1;
                slot.advertise(credits);
                Verdict::Drop { credits }
            }
        }
    }

    /// A request of `sid` completed; the credits to piggyback on its response.
    pub fn complete(&mut self, now: Nanos, sid: u32, delay: Nanos) -> u32 {
        self.complete_as(now, sid, delay, false)
    }

    /// A request of `sid` ended, `dropped` (by ASQM, inside the application) or not.
    pub fn complete_as(&mut self, now: Nanos, sid: u32, delay: Nanos, dropped: bool) -> u32 {
        self.touch(sid, now);
        let Some(ctl) = &mut self.ctl else { return 0 };
        let credits = ctl.on_response(now, sid, dropped, delay);
        if let Some(slot) = self.slots[sid as usize].as_mut() {
            slot.outstanding = slot.outstanding.saturating_sub(1);
            slot.advertise(credits);
        }
        credits
    }

    /// An explicit credit request; the credits to send back, if any.
    pub fn credit_request(&mut self, now: Nanos, sid: u32, demand: u32) -> Option<(SocketAddr, u32, u32)> {
        self.touch(sid, now);
        let ctl = self.ctl.as_mut()?;
        let credits = ctl.on_credit_request(now, sid, demand)?;
        let slot = self.slots[sid as usize].as_mut()?;
        slot.advertise(credits);
        Some((slot.peer, slot.cookie, credits))
    }

    fn touch(&mut self, sid: u32, now: Nanos) {
        if let Some(s) = self.slots.get_mut(sid as usize).and_then(|s| s.as_mut()) {
            s.last_seen = s.last_seen.max(now);
            if let Some(c) = self.clients.get_mut(&s.client) {
                c.active = true;
            }
        }
    }

    /// Disconnects the live sessions that have nothing at the server and have not been heard
    /// from for `idle` ns, so that clients that vanished (or a flood of Connects) cannot hold
    /// the slots forever. Returns how many expired.
    pub fn expire_idle(&mut self, now: Nanos, idle: Nanos) -> u32 {
        let stale: Vec<u32> = (0..self.slots.len() as u32)
            .filter(|&sid| {
                self.slots[sid as usize]
                    .as_ref()
                    .is_some_and(|s| s.live && s.outstanding == 0 && now.saturating_sub(s.last_seen) >= idle)
            })
            .collect();
        for &sid in &stale {
            self.disconnect(now, sid);
        }
        stale.len() as u32
    }

    pub fn disconnect(&mut self, now: Nanos, sid: u32) {
        let Some(slot) = self.slots[sid as usize].as_mut() else { return };
        if !slot.live {
            return;
        }
        slot.live = false;
        let (token, peer, cookie, client) = (slot.token, slot.peer, slot.cookie, slot.client);
        self.by_token.remove(&token);
        self.by_peer.remove(&(peer, cookie));
        if let Some(c) = self.clients.get_mut(&client) {
            c.held = c.held.saturating_sub(1);
        }
        self.free.push(sid);
        self.connected -= 1;
        if let Some(ctl) = &mut self.ctl {
            // Demand 0 releases the session's unused credits.
            let _ = ctl.on_credit_request(now, sid, 0);
        }
    }

    pub fn on_timer(&mut self, now: Nanos, delay: Nanos) {
        if let Some(ctl) = &mut self.ctl {
            ctl.on_timer(now, delay);
        }
    }

    pub fn on_cores_changed(&mut self, now: Nanos, active: u32) {
        if let Some(ctl) = &mut self.ctl {
            ctl.on_cores_changed(now, active);
        }
    }

    /// The controller's wake-ups of drained sessions, as credit messages to live sessions.
    pub fn wakeups(&mut self, out: &mut Vec<CreditMsg>) {
        let Some(ctl) = &mut self.ctl else { return };
        ctl.take_wakeups(&mut self.wake);
        for (sid, credits) in self.wake.drain(..) {
            if let Some(slot) = self.slots.get_mut(sid as usize).and_then(|s| s.as_mut()) {
                if slot.live {
                    slot.advertise(credits);
                    out.push(CreditMsg { peer: slot.peer, cookie: slot.cookie, credits });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn token(c: Connected) -> u64 {
        match c {
            Connected::Ack { token, .. } => token,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn clients_are_sockets_on_loopback_and_networks_elsewhere() {
        let k = ClientKey::of;
        assert_ne!(k(addr("127.0.0.1:1000")), k(addr("127.0.0.1:1001")));
        assert_eq!(k(addr("10.1.2.3:1000")), k(addr("10.1.2.200:5")));
        assert_ne!(k(addr("10.1.2.3:1000")), k(addr("10.1.3.3:1000")));
        assert_eq!(k(addr("[2001:db8::1]:9")), k(addr("[2001:db8::ffff]:10")));
        assert_ne!(k(addr("[2001:db8::1]:9")), k(addr("[2001:db8:0:1::1]:9")));
        assert_eq!(k(addr("[::ffff:10.1.2.3]:1")), k(addr("10.1.2.9:2")));
        assert_eq!(k(addr("[::ffff:127.0.0.1]:1")), ClientKey::Socket(addr("[::ffff:127.0.0.1]:1")));
    }

    /// One socket takes every slot and keeps re-sending its Connects (the same tokens come
    /// back, and nothing is refreshed): it squats, and a newcomer takes every slot it needs
    /// from it; the squatter's evicted cookies come back as new sessions and find none.
    #[test]
    fn a_squatter_resending_connects_keeps_no_slot_from_a_newcomer() {
        let mut rpc = Rpc::new(None, 20);
        let (hog, lg) = (addr("127.0.0.1:4000"), addr("127.0.0.1:5000"));
        let first: Vec<u64> = (0..20).map(|c| token(rpc.connect(0, hog, c, 0))).collect();
        for k in 1..=4 {
            for c in 0..20 {
                assert_eq!(token(rpc.connect(k * S / 2, hog, c, 0)), first[c as usize]);
            }
        }
        // Younger than the eviction time (1 s)? No: connected at 0, nothing since.
        let got: Vec<u64> = (0..20).map(|c| token(rpc.connect(2 * S, lg, c, 0))).collect();
        assert_eq!((rpc.held_by(hog), rpc.held_by(lg), rpc.evicted()), (0, 20, 20));
        // The newcomer uses its sessions; the squatter's come-backs find no slot.
        let Auth::Ok(sid) = rpc.auth(got[0], lg) else { panic!() };
        assert_eq!(rpc.admit(2 * S, sid, 0, 0), Verdict::Admit);
        for c in 0..20 {
            assert_eq!(rpc.connect(2 * S + S / 2, hog, c, 0), Connected::Full);
        }
    }

    /// A client that uses its sessions is not a squatter: a newcomer evicts its idle sessions
    /// only up to its fair share, and never one that is busy or recently used.
    #[test]
    fn a_slot_hog_keeps_no_idle_slot_from_a_newcomer() {
        let mut rpc = Rpc::new(None, 20);
        let (hog, lg) = (addr("127.0.0.1:4000"), addr("127.0.0.1:5000"));
        let first: Vec<u64> = (0..20).map(|c| token(rpc.connect(0, hog, c, 0))).collect();
        assert_eq!(rpc.connect(0, hog, 20, 0), Connected::Full, "alone, it takes every slot, no more");
        // Re-sent every 0.5 s for 3 s: the same sessions, and they stay idle.
        for k in 1..=6 {
            for c in 0..20 {
                assert_eq!(token(rpc.connect(k * S / 2, hog, c, 0)), first[c as usize]);
            }
        }
        // Two of them are in use: one has a request at the server, one was used 0.5 s ago.
        let Auth::Ok(busy) = rpc.auth(first[0], hog) else { panic!() };
        rpc.slots[busy as usize].as_mut().unwrap().outstanding = 1;
        let Auth::Ok(used) = rpc.auth(first[1], hog) else { panic!() };
        assert_eq!(rpc.admit(3 * S - S / 2, used, 0, 0), Verdict::Admit);
        // The newcomer: fair share 10 of 20 slots.
        let mut got = 0;
        for c in 0..20 {
            if let Connected::Ack { .. } = rpc.connect(3 * S, lg, c, 0) {
                got += 1;
            }
        }
        assert_eq!(got, 10);
        assert_eq!((rpc.held_by(hog), rpc.held_by(lg), rpc.evicted()), (10, 10, 10));
        assert!(matches!(rpc.auth(first[0], hog), Auth::Ok(_)), "a session with a request at the server stays");
        assert!(matches!(rpc.auth(first[1], hog), Auth::Ok(_)), "a session used within the eviction time stays");
        // The hog's evicted cookies come back as new sessions: it is at its share, so no.
        let evicted_cookie = (2..20).find(|&c| !matches!(rpc.auth(first[c as usize], hog), Auth::Ok(_))).unwrap();
        assert_eq!(rpc.connect(3 * S, hog, evicted_cookie, 0), Connected::Full);
        assert_eq!(rpc.connected(), 20);
    }

    /// The hog: one client holds every slot and sends one request per session every
    /// 0.2 s, each refused for want of credit. Refused requests are not activity: after the
    /// eviction time its sessions are idle and a newcomer gets in.
    #[test]
    fn sessions_whose_requests_are_all_refused_for_credit_are_idle_for_eviction() {
        let cfg: microsched_core::scenario::OverloadCfg = serde_json::from_value(serde_json::json!({"kind": "breakwater"})).unwrap();
        let env = microsched_core::env::OverloadEnv { sessions: 20, max_cores: 2, rtt_ns: 50_000, seed: 0 };
        let ctl = microsched_core::overload::build(&cfg, &env).expect("builds");
        assert!(ctl.is_some());
        let mut rpc = Rpc::new(ctl, 20);
        let (hog, lg) = (addr("127.0.0.1:4000"), addr("127.0.0.1:5000"));
        // Connects asking for no credit: none granted.
        let sids: Vec<u32> = (0..20)
            .map(|c| {
                let t = token(rpc.connect(0, hog, c, 0));
                let Auth::Ok(sid) = rpc.auth(t, hog) else { panic!() };
                sid
            })
            .collect();
        let mut now = 0;
        let mut newcomer = None;
        for _ in 0..30 {
            now += S / 5;
            for &sid in &sids {
                assert!(matches!(rpc.admit(now, sid, 0, 0), Verdict::Reject { .. }));
            }
            if let Connected::Ack { .. } = rpc.connect(now, lg, 0, 0) {
                newcomer = Some(now);
                break;
            }
        }
        let at = newcomer.expect("the newcomer got a slot within 6 s");
        assert!(at >= S, "not before the eviction time (1 s): {at}");
        assert!(at <= S + S / 5, "at the first try after it: {at}");
        assert_eq!(rpc.evicted(), 1);
    }

    #[test]
    fn recently_connected_sessions_are_not_evicted_and_the_cap_holds() {
        let mut rpc = Rpc::with_fairness(None, 4, Fairness { max_per_client: 3, ..Fairness::defaults(4, 10 * S) });
        let (a, b) = (addr("127.0.0.1:1"), addr("127.0.0.1:2"));
        for c in 0..3 {
            token(rpc.connect(0, a, c, 0));
        }
        // a uses its sessions (one request, long ago): fair share applies to it.
        rpc.touch(0, 0);
        assert_eq!(rpc.connect(0, a, 3, 0), Connected::OverCap);
        token(rpc.connect(0, b, 0, 0));
        // Full, and b holds 1 < its share 2 while a holds 3 > 2; but a's sessions are younger
        // than the eviction time (1 s).
        assert_eq!(rpc.connect(S - 500_000, b, 1, 0), Connected::Full);
        // Old enough now, but a fruitless scan makes the next wait 1 ms.
        assert_eq!(rpc.connect(S + 100_000, b, 1, 0), Connected::Full);
        assert!(matches!(rpc.connect(S + 1_000_000, b, 1, 0), Connected::Ack { .. }));
        assert_eq!((rpc.held_by(a), rpc.held_by(b)), (2, 2));
        assert_eq!(rpc.connect(3 * S, b, 2, 0), Connected::Full, "at its share: no more evictions");
    }

    #[test]
    fn connects_past_the_rate_get_nothing_until_the_bucket_refills() {
        let fair = Fairness { connect_rate: 10.0, connect_burst: 5.0, ..Fairness::defaults(2, S) };
        let mut rpc = Rpc::with_fairness(None, 2, fair);
        let a = addr("127.0.0.1:1");
        let out: Vec<Connected> = (0..7).map(|i| rpc.connect(0, a, i, 0)).collect();
        assert!(matches!(out[0], Connected::Ack { .. }) && matches!(out[1], Connected::Ack { .. }));
        assert_eq!(&out[2..5], &[Connected::Full; 3]);
        assert_eq!(&out[5..], &[Connected::RateLimited; 2]);
        // Another client has a bucket of its own; a's refills at 10 per second.
        assert_eq!(rpc.connect(0, addr("127.0.0.1:2"), 0, 0), Connected::Full);
        assert_eq!(rpc.connect(S / 20, a, 0, 0), Connected::RateLimited);
        assert!(matches!(rpc.connect(S / 5, a, 0, 0), Connected::Ack { .. }), "a resend, after a refill");
    }
}
