//! The completion path: a core's slice end, the response (or failure reply) leaving the server,
//! and the cleanup thread a dropped request leaves behind.
//!
//! Invariants: a finished request leaves exactly one response; a response is booked without an
//! event only when nothing can observe the difference (`settles_now`); a freed core searches for
//! work before anything else happens on it.

use microsched_core::program::Op;
use microsched_core::Nanos;

use super::Sim;
use crate::trace::Tracer;
use crate::dispatcher::Work;
use crate::events::Event;
use crate::requests::Req;
use crate::server::SliceEnd;

impl<T: Tracer> Sim<T> {
    /// What follows a core's slice end: the response of a finished request, and the core's
    /// search for work when it is free.
    #[inline(always)]
    pub(super) fn after_slice(&mut self, node: u16, core: u16, end: SliceEnd) {
        let now = self.now;
        if let SliceEnd::Finished(_) = end {
            self.nodes[node as usize].server.dispatcher_note(Work::Completion, now, &mut self.evq);
        }
        match end {
            SliceEnd::Stale | SliceEnd::Running => return,
            SliceEnd::Finished(req) if self.slab[req].has(Req::GHOST) => {
                self.slab.remove(req);
                if let Some(f) = &mut self.failure_reply {
                    f.ghosts -= 1;
                }
            }
            SliceEnd::Finished(req) => {
                let dropped = self.respond(node, req);
                if dropped && self.cleanup(node, core, req) {
                    return;
                }
            }
            SliceEnd::Freed => {}
        }
        let idle = self.nodes[node as usize].server.find_work(core, now, &mut self.slab, &mut self.evq);
        self.after_idle(node, core, idle);
    }

    /// A finished request's response (or failure reply) leaves the server; true if it was
    /// dropped.
    #[inline(always)]
    pub(super) fn respond(&mut self, node: u16, req: u32) -> bool {
        let now = self.now;
        self.slab.stamp(req, |s| s.done = now);
        let dropped = self.slab[req].dropped;
        self.tracer.respond(&self.slab, node, req, true, now, dropped);
        let credited = self.nodes[node as usize].credit.is_some();
        let credits = if credited { self.credit_response(req, dropped) } else { 0 };
        let at = self.net.arrival(now);
        if !credited && self.settles_now(req, at) {
            self.response(req, credits, at);
        } else {
            self.net.deliver(at, Event::ResponseArrive { req, credits }, &mut self.evq);
        }
        if credited {
            self.send_wakeups(node);
        }
        dropped
    }

    /// Whether the response to `req`, reaching its client at `at`, can be booked now instead of
    /// as an event: nothing acts on its arrival (no credits, SEDA or request log; a failure
    /// reply, which may be retried or leave a cleanup thread, always travels), and nothing reads
    /// what it changes before `at` (it lands before the next sample, in the window it would
    /// land in, and before the run ends). Saves one event per request.
    #[inline(always)]
    pub(super) fn settles_now(&self, req: u32, at: Nanos) -> bool {
        !self.slab[req].dropped
            && at < self.end
            && at < self.last_sample_at + self.sample_every
            && (self.measuring || at < self.warmup)
            && self.log.is_none()
            && self.seda.is_none()
    }

    /// After the failure reply of a request dropped at a lock step: its thread re-takes the
    /// cleanup lock it had taken (a dropped SET frees its item under the slab lock), never
    /// dropped, as a cleanup thread of its own on the same core. True if the core stays busy.
    pub(super) fn cleanup(&mut self, node: u16, core: u16, req: u32) -> bool {
        let server = &mut self.nodes[node as usize].server;
        let Some(m) = server.take_cleanup(req) else { return false };
        let hold = server.lock_cleanup_ns();
        let r = self.slab[req];
        let id = self.slab.stamps(req).id;
        let ghost = self.slab.insert(Req { created: self.now, session: r.session, flow: r.flow, app: r.app, node, has_program: true, flags: Req::GHOST, ..Req::default() }, id);
        if let Some(f) = &mut self.failure_reply {
            f.ghosts += 1;
        }
        server.set_program(ghost, &[Op::Acquire(m), Op::Compute(hold), Op::Release(m)]);
        server.run_cleanup(core, ghost, m, self.now, &mut self.slab, &mut self.evq)
    }
}
