//! Tiny Quanta (Luo et al., ASPLOS'24), as Synergy's fork (`Synergy-repo/TinyQuanta`
//! `tq_server.cpp`) schedules: a dispatcher core (`server.dispatcher`, its per-request cost)
//! sends each request to the worker with the fewest requests queued or running (JSQ; ties go
//! round robin from the last choice), and each worker time-slices its own requests round robin
//! with a tiny quantum (`server.preemption.quantum_us`, 2 µs in the paper; compiler-interrupt
//! costs): a preempted request goes to the back of its own worker's queue. Nothing is stolen.
//!
//! Simplified: new arrivals join the back of the worker's round robin (the code puts them at
//! the front), the bound of 8 (or 14) coroutines per worker and the MSQ tie-break on serviced
//! quanta are not modelled.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Next, Place, QueuePolicy, Requeue, ServerView};
use crate::ScenarioError;

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {}

impl Config {
    pub fn validate(&self, _field: &str) -> Result<(), ScenarioError> {
        Ok(())
    }

    pub fn build(&self) -> TinyQuanta {
        TinyQuanta { last: 0, idle: Vec::new() }
    }
}

#[derive(Debug, Clone)]
pub struct TinyQuanta {
    last: u16,
    /// Scratch: which workers spin (nothing running).
    idle: Vec<bool>,
}

impl<V: ServerView + ?Sized> QueuePolicy<V> for TinyQuanta {
    fn name(&self) -> &'static str {
        "tiny-quanta"
    }

    fn steer(&mut self, _flow: u32, view: &V) -> Place {
        let n = view.max_cores();
        self.idle.clear();
        self.idle.resize(n, false);
        for &c in view.spinners() {
            self.idle[c as usize] = true;
        }
        let mut best = (usize::MAX, 0u16);
        for i in 1..=n {
            let c = ((self.last as usize + i) % n) as u16;
            let load = view.queue_len(Place::Core(c)) + !self.idle[c as usize] as usize;
            if load < best.0 {
                best = (load, c);
            }
        }
        self.last = best.1;
        Place::Core(best.1)
    }

    fn notify(&mut self, _place: Place, _view: &V) -> Option<u16> {
        None
    }

    fn next(&mut self, core: u16, view: &V) -> Next {
        if view.queue_len(Place::Core(core)) > 0 {
            Next::Run(Place::Core(core))
        } else {
            Next::Idle
        }
    }

    fn requeue(&mut self, core: u16, _why: Requeue, _view: &V) -> Place {
        Place::Core(core)
    }
}
