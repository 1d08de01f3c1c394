//! Tiny Quanta (Luo et al., ASPLOS'24), as Synergy's fork (`Synergy-repo/TinyQuanta`
//! `tq_server.cpp`, built by its `run.sh`: `NUM_WORKER_COROS=8`, `QUANTUM_CYCLE=5000`,
//! `NEW_DISPATCHER`, `MSQ`) schedules:
//!
//! * A dispatcher core (`server.dispatcher`, its per-request cost) sends each request to a
//!   worker's dispatch ring (`Place::Core`): the worker with the fewest requests dispatched and
//!   not finished (ring + coroutines, JSQ); ties go to the one whose unfinished requests have
//!   received the most quanta (`MSQ`, the heap's comparator), then round robin from the last
//!   choice.
//! * Each worker time-slices up to `coroutines` (8) requests, one coroutine each, with a tiny
//!   quantum (`server.preemption.quantum_us`, ≈ 2 µs; compiler-interrupt costs): it pops the
//!   front of its busy list, runs it one quantum, and pushes it back if unfinished. Its busy
//!   list lives in `Place::Class(worker)`; requests beyond the cap wait in the ring.
//! * The worker looks at its ring only when its busy list is empty, or after
//!   `ring_poll_quanta` (4, `DISPATCH_RING_DEQUEUE_PERIOD`) runs if a coroutine is free; it
//!   takes as many requests as it has free coroutines and puts them at the *front* of the busy
//!   list in arrival order ("prioritize new jobs"), so they get their first quantum before
//!   the older, preempted ones. A request never leaves its worker.
//!
//! Simplified: the dispatcher sends request by request, not in bursts split into
//! `ceil(n / workers)` chunks, and counts completions exactly (the code refreshes its counts
//! after each burst).
//!
//! Options: `coroutines = 0` (no cap) with `ring_poll_quanta = 1` (look every run) is round
//! robin over everything queued (processor sharing as the quantum shrinks); `coroutines = 1` is
//! FCFS per worker; `msq = false` breaks JSQ ties round robin only.

use std::collections::VecDeque;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Next, Place, QueuePolicy, Requeue, ServerView};
use crate::scenario::Scenario;
use crate::{Nanos, ScenarioError};

/// Tiny Quanta's dispatcher (`tq_server.cpp`, `NEW_DISPATCHER`) only steers arrivals: a
/// preempted request stays on its worker (the worker's round robin), the worker yields on its
/// own compiler-interrupt timer (no signal from the dispatcher), and completions reach the
/// dispatcher as per-worker counters it reads after each burst, not as work per completion.
pub const DISPATCHER_ROUTES: super::dispatcher::Routes = super::dispatcher::Routes::ARRIVALS_ONLY;

/// Tiny Quanta (Luo et al., ASPLOS'24): a JSQ dispatcher and workers that time-slice a few
/// requests each with a tiny quantum (compiler interrupts).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Requests a worker time-slices at once (`NUM_WORKER_COROS`: 8 in `run.sh`, 14 in the
    /// Makefile's default); more wait in its ring. 0: no cap.
    #[serde(default = "default_coroutines")]
    pub coroutines: u32,
    /// Runs between two looks at the ring while requests are in service
    /// (`DISPATCH_RING_DEQUEUE_PERIOD`).
    #[serde(default = "default_poll")]
    pub ring_poll_quanta: u32,
    /// JSQ ties go to the worker whose requests received the most quanta (`MSQ`).
    #[serde(default = "yes")]
    pub msq: bool,
}

fn default_coroutines() -> u32 {
    8
}

fn default_poll() -> u32 {
    4
}

fn yes() -> bool {
    true
}

impl Default for Config {
    fn default() -> Self {
        Self { coroutines: default_coroutines(), ring_poll_quanta: default_poll(), msq: true }
    }
}

impl super::SchedChecks for Config {
    /// What a scenario choosing Tiny Quanta (ASPLOS'24) leaves out of what makes it preemptive: a quantum (the one
    /// Synergy's evaluation runs it at), from a dispatcher core.
    fn warnings(&self, sc: &Scenario) -> Vec<String> {
        super::missing_preemption(sc, "tiny_quanta", 2.0, true)
    }

    fn validate(&self, field: &str, sc: &Scenario) -> Result<(), ScenarioError> {
        if self.ring_poll_quanta == 0 {
            return Err(ScenarioError::new(format!("{field}.ring_poll_quanta"), "0 is not allowed: use 1 (look at the ring after every run) or more (the artifact: 4)"));
        }
        if super::worker_cores(sc) > 256 {
            return Err(ScenarioError::new("server.max_cores", "tiny_quanta keeps a run list per worker: use at most 256 workers"));
        }
        if let Some(i) = sc.workload.locks.iter().position(|l| !l.spin) {
            return Err(ScenarioError::new(
                format!("workload.locks[{i}].spin"),
                "tiny_quanta keeps each request on its worker, which a blocking mutex would take it off: use spin = true",
            ));
        }
        Ok(())
    }

    fn dispatcher_routes(&self) -> super::dispatcher::Routes {
        DISPATCHER_ROUTES
    }
}

impl super::SchedConfig for Config {
    type Policy = TinyQuanta;

    fn build(&self, env: &crate::env::SchedEnv) -> TinyQuanta {
        let n = env.workers as usize;
        TinyQuanta {
            cap: if self.coroutines == 0 { u32::MAX } else { self.coroutines },
            period: self.ring_poll_quanta,
            msq: self.msq,
            last: 0,
            w: vec![Worker::default(); n],
        }
    }
}

/// What the policy knows of one worker.
#[derive(Debug, Clone, Default)]
struct Worker {
    /// Requests holding a coroutine: running, in the busy list, or taken from the ring and not
    /// yet run.
    in_flight: u32,
    /// Of those, the ones still at the head of the ring (taken, to be run first, in order).
    admitted: u32,
    /// Runs since the worker last looked at its ring (`dispatch_index`).
    runs: u32,
    /// Quanta received by each request of the busy list, in its order (the policy's copy).
    quanta: VecDeque<u32>,
    /// Quanta received by the running request.
    current: u32,
    /// Quanta received by all requests in flight (`serviced_quanta`).
    serviced: u64,
}

#[derive(Debug, Clone)]
pub struct TinyQuanta {
    cap: u32,
    period: u32,
    msq: bool,
    last: u16,
    w: Vec<Worker>,
}

impl TinyQuanta {
    fn worker(&mut self, core: u16) -> &mut Worker {
        let i = core as usize;
        if self.w.len() <= i {
            self.w.resize(i + 1, Worker::default());
        }
        &mut self.w[i]
    }

    /// Requests sent to `core` and not finished (`num_running_jobs`).
    fn load<V: ServerView + ?Sized>(&self, core: u16, view: &V) -> usize {
        let w = self.w.get(core as usize).cloned().unwrap_or_default();
        view.queue_len(Place::Core(core)) + (w.in_flight - w.admitted) as usize
    }
}

impl<V: ServerView + ?Sized> QueuePolicy<V> for TinyQuanta {
    fn name(&self) -> &'static str {
        "tiny-quanta"
    }

    fn steer(&mut self, _flow: u32, view: &V) -> Place {
        let n = view.max_cores();
        let mut best: Option<(usize, u64, u16)> = None;
        for i in 1..=n {
            let c = ((self.last as usize + i) % n) as u16;
            let load = self.load(c, view);
            let sq = if self.msq { self.w.get(c as usize).map_or(0, |w| w.serviced) } else { 0 };
            if best.is_none_or(|(l, s, _)| load < l || (load == l && sq > s)) {
                best = Some((load, sq, c));
            }
        }
        let c = best.map_or(0, |b| b.2);
        self.last = c;
        if view.spinners().contains(&c) {
            // An idle worker looks at its ring at once and runs the request.
            let w = self.worker(c);
            w.in_flight += 1;
            w.current = 0;
            w.runs = 0;
        }
        Place::Core(c)
    }

    fn notify(&mut self, _place: Place, _view: &V) -> Option<u16> {
        None
    }

    fn next(&mut self, core: u16, view: &V) -> Next {
        let (cap, period) = (self.cap, self.period);
        let ring = view.queue_len(Place::Core(core));
        let busy = view.queue_len(Place::Class(core as u8));
        let w = self.worker(core);
        if w.admitted > 0 {
            w.admitted -= 1;
            w.current = 0;
            return Next::Run(Place::Core(core));
        }
        let free = cap - w.in_flight;
        if busy == 0 || (w.runs >= period && free > 0) {
            w.runs = 0;
            let k = (free as usize).min(ring) as u32;
            if k > 0 {
                w.in_flight += k;
                w.admitted = k - 1;
                w.current = 0;
                return Next::Run(Place::Core(core));
            }
        }
        if busy > 0 {
            w.current = w.quanta.pop_front().unwrap_or(0);
            return Next::Run(Place::Class(core as u8));
        }
        Next::Idle
    }

    fn missed(&mut self, core: u16, place: Place) {
        let w = self.worker(core);
        match place {
            // Only this worker takes from its ring, and the dispatcher pushes one request at a
            // time: an empty take means the ring held at most one request, still being pushed.
            // Forget the batch `next` admitted (it counts again from the ring next time).
            Place::Core(_) => {
                w.in_flight -= 1 + w.admitted;
                w.admitted = 0;
            }
            Place::Class(_) => w.quanta.push_front(w.current),
            Place::Shared => {}
        }
    }

    fn requeue(&mut self, core: u16, _why: Requeue, _view: &V) -> Place {
        let w = self.worker(core);
        w.quanta.push_back(w.current + 1);
        w.serviced += 1;
        Place::Class(core as u8)
    }

    fn per_request(&self) -> bool {
        true
    }

    fn quantum(&mut self, core: u16, _rtype: u16, _service: Nanos, default: Nanos) -> Nanos {
        self.worker(core).runs += 1;
        default
    }

    fn finished(&mut self, core: u16, _service: Nanos) {
        let w = self.worker(core);
        w.in_flight -= 1;
        w.serviced -= w.current as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::sched::toy_view::ToyView as View;

    fn policy(workers: usize) -> TinyQuanta {
        TinyQuanta { cap: 8, period: 4, msq: true, last: 0, w: vec![Worker::default(); workers] }
    }

    /// The runtime counts a request in a ring before the request is there to take: each empty
    /// take a worker makes then must not count as a request in service, or after `cap` of them
    /// the worker never looks at its ring again (the requests left there at the end of a run:
    /// the runtime's dispatcher test saw 15).
    #[test]
    fn empty_takes_from_the_ring_are_not_counted_in_service() {
        let mut tq = policy(2);
        let view = View { own: vec![1, 0], class: vec![0, 0], ..Default::default() };
        for _ in 0..20 {
            assert_eq!(tq.next(0, &view), Next::Run(Place::Core(0)));
            QueuePolicy::<View>::missed(&mut tq, 0, Place::Core(0));
        }
        // The request is there now: the worker still takes it, and JSQ sees one request on
        // worker 0 (the one in its ring), not 21.
        assert_eq!(tq.load(0, &view), 1);
        assert_eq!(tq.next(0, &view), Next::Run(Place::Core(0)));
        let view = View { own: vec![0, 0], class: vec![0, 0], ..Default::default() };
        assert_eq!(tq.load(0, &view), 1);
        QueuePolicy::<View>::finished(&mut tq, 0, 1000);
        assert_eq!(tq.load(0, &view), 0);
    }

    /// An empty take from the busy list gives the head's quanta back.
    #[test]
    fn an_empty_take_from_the_busy_list_keeps_the_heads_quanta() {
        let mut tq = policy(1);
        tq.w[0].in_flight = 1;
        tq.w[0].quanta.push_back(3);
        let view = View { own: vec![0], class: vec![1], ..Default::default() };
        assert_eq!(tq.next(0, &view), Next::Run(Place::Class(0)));
        QueuePolicy::<View>::missed(&mut tq, 0, Place::Class(0));
        assert_eq!(tq.w[0].quanta.front(), Some(&3));
    }
}
