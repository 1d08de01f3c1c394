//! IRQ work per request packet (`server.irq.per_request`, HarvestContainers §3.5): each request
//! that reaches the node brings its NIC interrupt and its veth pair's softirqs, one stretch on the
//! core that takes them. The stretch is placed when the request arrives, so the IRQ load follows
//! the Primary's own arrivals (its bursts included); see `microsched_core::sched::irq`.

use microsched_core::Nanos;

use super::cores::CoreMode;
use super::{Server, NONE};
use crate::events::{Event, EventQueue};
use crate::requests::{Req, Slab};

impl Server {
    /// A request packet reaches the node now: its receive work lands on a core (before the
    /// request itself is queued, which it precedes in the kernel).
    #[inline]
    pub fn request_packet_irq(&mut self, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        let Some(irq) = self.irq.as_mut() else { return };
        let Some(work) = irq.per_request else { return };
        let n = work.handlers as u64;
        irq.packet_count += n;
        if work.steered {
            // Affinitized to the Secondary's cores: no held core takes any (Fig. 8's shielding).
            irq.packet_secondary_ns += work.cost;
            return;
        }
        // RSS / irqbalance: the node's queues spread over all its cores, lent or not.
        let k = irq.pick(self.q.cores.len());
        let c = &mut self.q.cores[k];
        match c.mode {
            CoreMode::Parked | CoreMode::Waking => {
                // A lent (or parked) core: the Secondary's loss, no request's.
                irq.packet_secondary_ns += work.cost;
                return;
            }
            CoreMode::Busy if c.current != NONE && c.slice_len > 0 && slab[c.current].in_op && !slab[c.current].has(Req::WAITING_LOCK) => {
                // Suspends the running request for its length (preemptive-resume).
                c.slice_len += work.cost;
                slab[c.current].left += work.cost;
                c.gen = c.gen.wrapping_add(1);
                evq.push(c.slice_start + c.slice_len, Event::CoreDone { node: self.node, core: c.id, gen: c.gen });
                irq.in_service_ns += work.cost;
                irq.in_service_count += n;
            }
            _ => {
                // Idle, switching, or spinning for a lock: the core's next start waits for it.
                c.handler_until = c.handler_until.max(now) + work.cost;
                irq.idle_ns += work.cost;
                irq.idle_count += n;
            }
        }
        irq.packet_held_count += n;
    }
}
