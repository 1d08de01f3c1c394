//! The dispatcher core's work. Only servers configured with a dispatcher reach it, so it stays
//! out of the per-core request path.

use microsched_core::sched::Slack;
use microsched_core::Nanos;

use super::Server;
use crate::dispatcher::{DispatchSnap, Work, WorkEvent};
use crate::events::EventQueue;
use crate::requests::{Req, Slab};

impl Server {
    /// The dispatcher core hands the request it dispatched to the queueing policy.
    pub fn dispatch_done(&mut self, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        let d = self.dispatcher.as_mut().expect("dispatch events need a dispatcher");
        let (req, more, next) = d.done(now, evq);
        if let Some(n) = next {
            let r = &mut slab[n];
            r.queued_ns += now - r.enqueued_at;
        }
        let Some(req) = req else {
            if !more {
                self.dispatcher_try_work(now, slab, evq);
            }
            return;
        };
        let r = &mut slab[req];
        r.enqueued_at = now;
        if self.per_request {
            self.policy.clock(now);
        }
        let place = self.policy.steer_typed(r.flow, r.rtype, &self.q);
        self.make_runnable(req, place, now, slab, evq);
        if !more {
            self.dispatcher_try_work(now, slab, evq);
        }
    }

    /// The dispatcher's counters at `now`, and the requests waiting for it; None without one.
    pub fn dispatcher_snapshot(&self, now: Nanos) -> Option<(DispatchSnap, u64)> {
        self.dispatcher.as_ref().map(|d| (d.snapshot(now), d.queued() as u64))
    }

    /// Bookkeeping that goes through the dispatcher core (the policy's routes decide which).
    #[inline]
    pub fn dispatcher_note(&mut self, work: Work, now: Nanos, evq: &mut EventQueue) {
        if let Some(d) = &mut self.dispatcher {
            d.note(work, now, evq);
        }
    }

    /// An idle dispatcher core runs a request of its own if the policy finds slack: the one it
    /// has begun, else the oldest never-started one of the shared queue.
    fn dispatcher_try_work(&mut self, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        let Some(d) = self.dispatcher.as_ref() else { return };
        if !d.idle() {
            return;
        }
        let slack = self.policy.dispatcher_slack(now);
        if slack == Slack::Never {
            return;
        }
        let d = self.dispatcher.as_mut().expect("checked");
        let pick = if d.job.is_some() {
            None
        } else {
            match self.q.shared.iter().position(|&r| !slab[r].started && !slab[r].has_program) {
                Some(i) => Some(i),
                None => return,
            }
        };
        match slack {
            Slack::Never => {}
            Slack::After(at) => d.retry_at(at, evq),
            Slack::Run(len) => {
                if let Some(i) = pick {
                    let req = self.q.shared.remove(i).expect("found");
                    self.q.queued -= 1;
                    let r = &mut slab[req];
                    r.queued_ns += now - r.enqueued_at;
                    r.started = true;
                    r.set(Req::RECEIVED, true);
                    slab.stamp(req, |s| s.start = now);
                    let work = self.cfg.packet_cost + self.cfg.preemption.inflate(slab[req].service);
                    d.job = Some((req, work.max(1)));
                }
                d.run_chunk(len, now, evq);
            }
        }
    }

    /// A dispatcher core's own-request event: returns the request it finished, if any (the
    /// driver answers it).
    pub fn dispatcher_work(&mut self, gen: u32, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Option<u32> {
        let d = self.dispatcher.as_mut()?;
        let before = d.work_ns;
        match d.work_event(gen, now) {
            WorkEvent::Stale => None,
            WorkEvent::Retry => {
                self.dispatcher_try_work(now, slab, evq);
                None
            }
            WorkEvent::ChunkEnd(done) => {
                self.counters.dispatcher_work_ns += d.work_ns - before;
                if let Some(req) = done {
                    self.counters.dispatcher_requests += 1;
                    let r = &mut slab[req];
                    r.left = 0;
                    r.in_op = false;
                    r.pc = 1;
                }
                // Back to dispatching: arrivals that waited first.
                let (more, next) = d.resume(now, evq);
                if let Some(n) = next {
                    let r = &mut slab[n];
                    r.queued_ns += now - r.enqueued_at;
                }
                if !more {
                    self.dispatcher_try_work(now, slab, evq);
                }
                done
            }
        }
    }
}
