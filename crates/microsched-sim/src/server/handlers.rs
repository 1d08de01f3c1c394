//! Interference handlers placed idle first (`server.irq.steering = "idle_first"`): threads that
//! share the server's CPUs and that the kernel wakes on an idle CPU when there is one (a
//! one-machine run's load generator and controller). Each handler is an event at the node's
//! rate; it costs a request only when it finds every core busy (it preempts one of them) or when
//! a request starts on the idle core it still occupies.

use microsched_core::sched::irq::Irq;
use microsched_core::Nanos;

use super::cores::{Core, CoreMode};
use super::{Server, NONE};
use crate::events::{Event, EventQueue};
use crate::requests::{Req, Slab};

impl Server {
    /// One of the node's handlers arrives now.
    pub fn handler_lands(&mut self, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        let Some(irq) = self.irq.as_mut() else { return };
        let cost = irq.cost();
        let cores = &mut self.q.cores;
        let idle = cores.iter().filter(|c| c.mode == CoreMode::Search).count();
        if idle > 0 {
            let k = irq.pick(idle);
            let c = cores.iter_mut().filter(|c| c.mode == CoreMode::Search).nth(k).expect("k < idle");
            c.handler_until = c.handler_until.max(now) + cost;
            irq.idle_ns += cost;
            irq.idle_count += 1;
            return;
        }
        let busy = cores.iter().filter(|c| c.mode == CoreMode::Busy).count();
        if busy == 0 {
            // Every core is parked, waking or switching: the handler takes none of the server's time.
            return;
        }
        let k = irq.pick(busy);
        let c = cores.iter_mut().filter(|c| c.mode == CoreMode::Busy).nth(k).expect("k < busy");
        let req = c.current;
        let computing = req != NONE && c.slice_len > 0 && slab[req].in_op && !slab[req].has(Req::WAITING_LOCK);
        if computing {
            // Preempted for the handler's length. CPU work ends that much later; a spin on the
            // clock ends when the handler gives the core back, if that is past its own end.
            let until = c.handler_until.max(now) + cost;
            let end = c.slice_start + c.slice_len;
            let delay = if irq.wall_clock { until.saturating_sub(end) } else { cost };
            c.handler_until = if irq.wall_clock { until } else { c.handler_until };
            if delay > 0 {
                c.slice_len += delay;
                slab[req].left += delay;
                c.gen = c.gen.wrapping_add(1);
                evq.push(c.slice_start + c.slice_len, Event::CoreDone { node: self.node, core: c.id, gen: c.gen });
                irq.in_service_ns += delay;
                irq.in_service_count += 1;
            }
        } else {
            // Spinning for a lock or between two steps: the core's next start waits for it.
            c.handler_until = c.handler_until.max(now) + cost;
            irq.idle_ns += cost;
            irq.idle_count += 1;
        }
    }
}

/// What a request starting on `c` now waits for a handler still running there (moved from the
/// handlers' idle time to their time in service).
#[inline]
pub(super) fn wait(c: &mut Core, irq: &mut Irq, now: Nanos) -> Nanos {
    if c.handler_until <= now {
        return 0;
    }
    let w = c.handler_until - now;
    c.handler_until = 0;
    irq.idle_ns -= w;
    irq.in_service_ns += w;
    irq.in_service_count += 1;
    w
}
