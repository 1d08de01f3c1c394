//! Parking and granting cores: the core allocator's decisions carried out. They change which
//! cores the server has, not what a core runs, so they live apart from the run path.

use microsched_core::Nanos;

use super::cores::CoreMode;
use super::{Idle, Server, NONE};
use crate::events::{Event, EventQueue};
use crate::requests::Slab;

impl Server {
    /// Parks an idle core: it goes to the best-effort co-tenant.
    pub fn park(&mut self, core: u16, now: Nanos) {
        self.q.spinners.remove(core);
        self.q.active.remove(core);
        let c = &mut self.q.cores[core as usize];
        debug_assert!(c.current == NONE);
        c.yield_requested = false;
        c.park_attempting = false;
        c.shared = false;
        c.epoch = c.epoch.wrapping_add(1);
        c.set_mode(CoreMode::Parked, now, &mut self.q.ledger);
    }

    /// Grants one parked core (preferring one with queued work, else the lowest index); it can
    /// run work after the allocation delay. Returns it, or None if every core is allocated.
    pub fn grant(&mut self, now: Nanos, evq: &mut EventQueue) -> Option<u16> {
        self.grant_after(now, self.cfg.alloc_delay, 0, evq)
    }

    /// [`Server::grant`] with the allocation delay the allocator's own mechanism sets, and the
    /// extra run time (`refill`) of the first request the core then starts.
    pub fn grant_after(&mut self, now: Nanos, alloc_delay: Nanos, refill: Nanos, evq: &mut EventQueue) -> Option<u16> {
        let q = &mut self.q;
        let with_work = q.nonempty.items.iter().copied().filter(|&c| q.cores[c as usize].mode == CoreMode::Parked).min();
        let pick = with_work.or_else(|| q.ledger.lowest_parked())?;
        q.cores[pick as usize].refill = refill;
        q.cores[pick as usize].set_mode(CoreMode::Waking, now, &mut q.ledger);
        evq.push(now + alloc_delay, Event::WakeDone { node: self.node, core: pick });
        Some(pick)
    }

    /// A granted core is ready.
    pub fn wake_done(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Idle {
        self.q.cores[core as usize].set_mode(CoreMode::Search, now, &mut self.q.ledger);
        self.q.active.insert(core);
        self.find_work(core, now, slab, evq)
    }

    /// Asks an active core to park: at once if it is idle, else when it next runs out of work.
    pub fn request_yield(&mut self, core: u16, now: Nanos) {
        if self.q.spinners.contains(core) {
            self.park(core, now);
        } else if self.q.cores[core as usize].is_active() {
            self.q.cores[core as usize].yield_requested = true;
            self.yields_asked.push(core);
        }
    }

    /// The core's park attempt was refused for now; it keeps polling.
    pub fn mark_park_attempt(&mut self, core: u16) {
        self.q.cores[core as usize].park_attempting = true;
    }

    pub fn withdraw_yield_requests(&mut self) {
        for c in self.yields_asked.drain(..) {
            self.q.cores[c as usize].yield_requested = false;
        }
    }
}
