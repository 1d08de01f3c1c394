//! The network: one-way trips between clients and server nodes, with optional jitter.
//!
//! Invariants: with no jitter, trips arrive in the order they were sent (the queue's network lane).

use microsched_core::rng::Stream;
use microsched_core::Nanos;
use rand::Rng;

use crate::events::{Event, EventQueue, NETWORK_LANE};

pub(super) struct Network {
    pub(super) one_way: Nanos,
    pub(super) jitter: Nanos,
    pub(super) rng: Stream,
}

impl Network {
    /// Schedules `ev` one network trip from `now`.
    #[inline(always)]
    pub(super) fn send(&mut self, now: Nanos, ev: Event, evq: &mut EventQueue) {
        let at = self.arrival(now);
        self.deliver(at, ev, evq);
    }

    /// When a trip leaving at `now` arrives (draws its jitter).
    #[inline(always)]
    pub(super) fn arrival(&mut self, now: Nanos) -> Nanos {
        if self.jitter == 0 {
            now + self.one_way
        } else {
            now + self.one_way + self.rng.gen_range(0..=self.jitter)
        }
    }

    /// Schedules `ev` at `at`, a trip's `arrival`.
    #[inline(always)]
    pub(super) fn deliver(&self, at: Nanos, ev: Event, evq: &mut EventQueue) {
        if self.jitter == 0 {
            // Constant delay: trips arrive in the order they were sent.
            evq.push_in_order(NETWORK_LANE, at, ev);
        } else {
            evq.push(at, ev);
        }
    }
}
