//! d-FCFS with work stealing, as Shenango and Caladan schedule: RSS hashes a session to a home
//! core (steered to an active core while its home is parked, as the IOKernel does); an idle core
//! runs its own queue, else steals the older half of a random victim's; a spinning core is sent
//! to steal as soon as work queues behind a busy one. A request that goes back to a runqueue
//! joins the tail of the queue of the core it was on (Caladan's `thread_ready` on the local
//! runqueue; a woken waiter goes to the waker's core).

use rand::Rng;

use super::{Next, Place, QueuePolicy, Requeue, ServerView};
use crate::rng::{hash, Stream};

#[derive(Debug, Clone)]
pub struct DistributedFcfs {
    steal: bool,
    rng: Stream,
    /// `server.steering = "random"`: every request joins a random active core's queue.
    random_steering: Option<Stream>,
}

impl DistributedFcfs {
    pub fn new(steal: bool, rng: Stream) -> Self {
        Self { steal, rng, random_steering: None }
    }

    /// Steers each request to a random active core (the study's and McClure's simulators),
    /// drawing from `rng`, instead of its session's RSS home.
    pub fn steer_randomly(&mut self, rng: Stream) {
        self.random_steering = Some(rng);
    }
}

impl<V: ServerView + ?Sized> QueuePolicy<V> for DistributedFcfs {
    fn name(&self) -> &'static str {
        if self.steal {
            "d-fcfs+steal"
        } else {
            "d-fcfs"
        }
    }

    #[inline]
    fn steer(&mut self, flow: u32, view: &V) -> Place {
        if let Some(rng) = &mut self.random_steering {
            let active = view.active();
            if !active.is_empty() {
                return Place::Core(active[rng.gen_range(0..active.len())]);
            }
        }
        let h = hash(flow as u64);
        let home = (h % view.max_cores() as u64) as u16;
        // The active set only when the home is parked: the runtime's view builds it by reading
        // every core's phase.
        if view.is_active(home) {
            return Place::Core(home);
        }
        let active = view.active();
        if active.is_empty() {
            Place::Core(home)
        } else {
            Place::Core(active[(h % active.len() as u64) as usize])
        }
    }

    #[inline]
    fn notify(&mut self, place: Place, view: &V) -> Option<u16> {
        // The spinning core notices the queued work on its next steal pass; the pass is modelled
        // as instantaneous, the steal itself costs the server's steal cost. Only from a victim:
        // a core in the middle of its own steal holds the requests it is taking, which nobody
        // may take from it meanwhile (the driver keeps it out of `victims` until it is done).
        if !self.steal {
            return None;
        }
        let spinner = view.spinners().last().copied()?;
        match place {
            Place::Core(v) if !view.victims().contains(&v) => None,
            _ => Some(spinner),
        }
    }

    #[inline]
    fn next(&mut self, core: u16, view: &V) -> Next {
        if view.queue_len(Place::Core(core)) > 0 {
            return Next::Run(Place::Core(core));
        }
        if self.steal && view.queued() > 0 {
            // A random core with stealable work, as Caladan's steal loop (which scans from a
            // random start) finds one. The thief's own queue is empty: never its own victim.
            let victims = view.victims();
            if !victims.is_empty() {
                return Next::Steal(victims[self.rng.gen_range(0..victims.len())]);
            }
        }
        Next::Idle
    }

    fn requeue(&mut self, core: u16, _why: Requeue, _view: &V) -> Place {
        Place::Core(core)
    }
}
