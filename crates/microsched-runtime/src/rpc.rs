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
use std::net::SocketAddr;

use microsched_core::overload::{Admission, CreditController, CreditLink, CreditStats};
use microsched_core::Nanos;

/// Advertised credit values remembered per session for the allowance.
pub const ADV_HISTORY: usize = 4;

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
    /// Last time the session was heard from (connect, request, credit request) or answered.
    last_seen: Nanos,
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
}

impl Rpc {
    pub fn new(ctl: Option<Box<dyn CreditController>>, sessions: u32) -> Self {
        Self {
            ctl,
            slots: vec![None; sessions as usize],
            by_token: HashMap::new(),
            by_peer: HashMap::new(),
            free: (0..sessions).rev().collect(),
            connected: 0,
            ever_connected: false,
            wake: Vec::new(),
        }
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
    /// Every session that ever connected has disconnected.
    pub fn all_gone(&self) -> bool {
        self.ever_connected && self.connected == 0
    }

    /// A connect from `peer` with the client's `cookie`: a slot and a fresh random token (the
    /// same ones again for a retransmitted connect), and the credits for its demand. `None`: all
    /// slots are taken.
    pub fn connect(&mut self, now: Nanos, peer: SocketAddr, cookie: u32, demand: u32) -> Option<(u64, u32)> {
        let sid = match self.by_peer.get(&(peer, cookie)) {
            Some(&sid) => sid,
            None => {
                let sid = self.free.pop()?;
                let mut token: u64 = rand::random();
                while token == 0 || self.by_token.contains_key(&token) {
                    token = rand::random();
                }
                self.slots[sid as usize] =
                    Some(Slot { token, peer, cookie, live: true, outstanding: 0, adv: [0; ADV_HISTORY], adv_i: 0, last_seen: now });
                self.by_token.insert(token, sid);
                self.by_peer.insert((peer, cookie), sid);
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
        slot.last_seen = now;
        Some((slot.token, credits))
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

    /// A request of an authenticated session reaches the server.
    pub fn admit(&mut self, now: Nanos, sid: u32, demand: u32, delay: Nanos) -> Verdict {
        self.touch(sid, now);
        let Some(ctl) = &mut self.ctl else { return Verdict::Admit };
        let slot = self.slots[sid as usize].as_mut().expect("authenticated slot");
        if slot.outstanding >= slot.allowance() {
            return Verdict::Reject { credits: slot.adv[slot.adv_i] };
        }
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
        let (token, peer, cookie) = (slot.token, slot.peer, slot.cookie);
        self.by_token.remove(&token);
        self.by_peer.remove(&(peer, cookie));
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
