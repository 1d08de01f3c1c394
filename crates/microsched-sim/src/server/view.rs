//! What a core allocator's tick sees of the server. It runs at every tick, so its cost is kept
//! in one place, apart from the mechanism it observes.

use microsched_core::alloc::{AllocView, CoreId, CoreLoad, CoreObs};
use microsched_core::Nanos;

use super::cores::{busy_search, core_state, CoreMode};
use super::Server;
use crate::requests::Slab;

impl Server {
    /// Enqueue time of the oldest waiting request, per core (the shared queue is reported on
    /// core 0, as one queue of the server).
    fn oldest(&self, core: usize, slab: &Slab) -> Option<Nanos> {
        let own = self.q.cores[core].queue.front().map(|&r| slab[r].enqueued_at);
        if core == 0 {
            if let Some(&r) = self.q.shared.front() {
                let t = slab[r].enqueued_at;
                return Some(own.map_or(t, |o| o.min(t)));
            }
        }
        own
    }

    /// The congestion signal: max over queues (the dispatcher's included) of the oldest
    /// waiting request's age.
    pub fn max_delay(&self, now: Nanos, slab: &Slab) -> Nanos {
        // The age of the oldest queued request anywhere: overload controllers read it on
        // every arrival, so a plain loop over the non-empty queues' heads.
        let q = &self.q;
        let mut oldest = Nanos::MAX;
        for &c in &q.nonempty.items {
            if let Some(&r) = q.cores[c as usize].queue.front() {
                oldest = oldest.min(slab[r].enqueued_at);
            }
        }
        if let Some(&r) = q.shared.front() {
            oldest = oldest.min(slab[r].enqueued_at);
        }
        if let Some(r) = self.dispatcher.as_ref().and_then(|d| d.oldest()) {
            oldest = oldest.min(slab[r].enqueued_at);
        }
        if oldest == Nanos::MAX {
            0
        } else {
            now - oldest
        }
    }

    /// Requests waiting in any queue, the dispatcher's included.
    pub fn queued_total(&self) -> u64 {
        self.q.queued + self.dispatcher.as_ref().map_or(0, |d| d.queued() as u64)
    }

    /// The cores with waiting requests: a non-empty queue of their own, or core 0 when the
    /// shared queue holds some (it is reported there, as one queue of the server).
    fn queued_cores(&self) -> impl Iterator<Item = u16> + '_ {
        let q = &self.q;
        let shared_only = !q.shared.is_empty() && !q.nonempty.contains(0);
        q.nonempty.items.iter().copied().chain(shared_only.then_some(0))
    }

    /// What a core allocator sees now.
    pub fn alloc_view<'a>(&'a self, now: Nanos, slab: &'a Slab) -> TickView<'a> {
        TickView { server: self, slab, now }
    }

    /// The allocator ticked at `now`: from here on, changes to a core save what it saw.
    pub fn mark_tick(&mut self, now: Nanos) {
        self.q.ledger.tick = self.q.ledger.tick.wrapping_add(1);
        self.q.ledger.tick_at = now;
    }

    /// The idle core with the lowest index, if any.
    pub fn first_spinner(&self) -> Option<u16> {
        self.q.spinners.items.iter().copied().min()
    }

    /// Sum over cores (the dispatcher's included) of (busy, search, parked, transition,
    /// overhead) up to `now`.
    pub fn core_times(&self, now: Nanos) -> [Nanos; 5] {
        let mut acc = self.q.ledger.times_at(now);
        if let Some(d) = &self.dispatcher {
            let (busy, search) = d.times_at(now);
            acc[0] += busy;
            acc[1] += search;
        }
        acc
    }
}

/// The server as a core allocator sees it: built from the live state at each call, so that only
/// the cores the policy looks at cost anything.
pub struct TickView<'a> {
    server: &'a Server,
    slab: &'a Slab,
    now: Nanos,
}

impl TickView<'_> {
    pub(super) fn obs(&self, i: u16) -> CoreObs {
        let q = &self.server.q;
        let c = &q.cores[i as usize];
        let (busy_ns, search_ns) = busy_search(&c.times_at(self.now));
        let queued = (c.queue.len() + if i == 0 { q.shared.len() } else { 0 }) as u32;
        CoreObs {
            state: core_state(c.mode),
            queued,
            oldest_enqueued_at: self.server.oldest(i as usize, self.slab),
            enqueued_total: c.enqueued_total,
            dequeued_total: c.dequeued_total,
            busy_ns,
            search_ns,
        }
    }
}

impl AllocView for TickView<'_> {
    fn now(&self) -> Nanos {
        self.now
    }
    fn active(&self) -> usize {
        self.server.q.active.len()
    }
    fn waking(&self) -> usize {
        self.server.q.ledger.in_mode[CoreMode::Waking as usize] as usize
    }
    fn parked(&self) -> usize {
        self.server.q.ledger.in_mode[CoreMode::Parked as usize] as usize
    }
    fn busy_search_totals(&self) -> (Nanos, Nanos) {
        busy_search(&self.server.q.ledger.times_at(self.now))
    }
    // These two read only what they need of each core with queued work, not its whole
    // observation: they run at every tick.
    fn max_delay(&self) -> Nanos {
        self.server.max_delay(self.now, self.slab)
    }
    fn parked_with_work(&self) -> bool {
        let cores = &self.server.q.cores;
        self.server.queued_cores().any(|i| cores[i as usize].mode == CoreMode::Parked)
    }
    fn for_each_idle(&self, f: &mut dyn FnMut(CoreId)) {
        for &i in &self.server.q.spinners.items {
            f(i);
        }
    }
    fn for_each_queued(&self, f: &mut dyn FnMut(CoreId, &CoreObs)) {
        for i in self.server.queued_cores() {
            f(i, &self.obs(i));
        }
    }
    fn for_each_active(&self, f: &mut dyn FnMut(CoreId, &CoreObs)) {
        for &i in &self.server.q.active.items {
            f(i, &self.obs(i));
        }
    }
    // Every revoke visits every active core: only what the choice reads, and a core unchanged
    // since the tick has run its present mode all along.
    fn for_each_active_load(&self, f: &mut dyn FnMut(CoreId, CoreLoad)) {
        let (q, now) = (&self.server.q, self.now);
        let l = &q.ledger;
        for &i in &q.active.items {
            let c = &q.cores[i as usize];
            let queued = (c.queue.len() + if i == 0 { q.shared.len() } else { 0 }) as u32;
            let delay = match queued {
                0 => 0,
                _ => self.server.oldest(i as usize, self.slab).map_or(0, |t| now.saturating_sub(t)),
            };
            let busy = if c.at_tick.tick == l.tick {
                busy_search(&c.times_at(now)).0.saturating_sub(c.at_tick.busy)
            } else if matches!(c.mode, CoreMode::Busy | CoreMode::Overhead) {
                now - l.tick_at
            } else {
                0
            };
            f(i, CoreLoad { delay, queued, busy });
        }
    }
    fn prev(&self, core: CoreId) -> CoreObs {
        let q = &self.server.q;
        let c = &q.cores[core as usize];
        let t = if c.at_tick.tick == q.ledger.tick { c.at_tick } else { c.seen_at_tick(&q.ledger) };
        CoreObs {
            state: core_state(t.mode),
            enqueued_total: t.enqueued_total,
            busy_ns: t.busy,
            search_ns: t.search,
            ..CoreObs::new(core_state(t.mode))
        }
    }
}
