//! A Primary thread that took a lent core shares it with the Secondary there (harvesting
//! controllers' `mechanism.timeshare`): the artifact's balancer leaves the Secondary on a core a
//! Primary thread woke on, so the Linux scheduler alternates the two at equal weight until the
//! core is lent again. The Secondary's turns inside a request's run are added to its run time,
//! as the cache refill is, and counted apart so that the summary gives them to the Secondary.

use microsched_core::rng::Stream;
use microsched_core::Nanos;
use rand::Rng;

use super::Server;
use crate::requests::Slab;

/// The turns' lengths, the draws of the first turn, and what the Secondary got.
#[derive(Debug, Clone)]
pub struct Timesharing {
    pub turn: Nanos,
    pub first_turn: (Nanos, Nanos),
    pub rng: Stream,
}

/// A core's turn state while it is shared.
#[derive(Debug, Clone, Copy, Default)]
pub struct Turns {
    /// The Primary's time left in its current turn.
    pub left: Nanos,
    /// When the Primary's last request here ends (its thread sleeps after it; a later start
    /// wakes it, with a fresh first turn).
    pub busy_until: Nanos,
    /// The last request's run: when its first Secondary turn began, and how many it had (the
    /// turns alternate with Primary turns of the same length from there).
    pub secondary_from: Nanos,
    pub secondary_turns: u64,
}

impl Turns {
    /// The Secondary's time in the last request's run that is still to come at `now`.
    fn secondary_after(&self, turn: Nanos, now: Nanos) -> Nanos {
        if self.secondary_turns == 0 || now >= self.busy_until {
            return 0;
        }
        let since = now.saturating_sub(self.secondary_from);
        let (whole, part) = (since / (2 * turn), since % (2 * turn));
        let done = if whole >= self.secondary_turns { self.secondary_turns * turn } else { whole * turn + part.min(turn) };
        self.secondary_turns * turn - done
    }
}

impl Timesharing {
    /// The Secondary's turns and their time inside `work` of Primary run that starts at `now`,
    /// and the core's turn state after it.
    fn secondary_time(&mut self, t: &mut Turns, now: Nanos, work: Nanos) -> (u64, Nanos) {
        if now > t.busy_until {
            t.left = self.rng.gen_range(self.first_turn.0..=self.first_turn.1);
        }
        let turns = if work <= t.left {
            t.left -= work;
            0
        } else {
            let after_first = work - t.left;
            let turns = after_first.div_ceil(self.turn);
            t.secondary_from = now + t.left;
            t.left = turns * self.turn - after_first;
            turns
        };
        let extra = turns * self.turn;
        t.secondary_turns = turns;
        t.busy_until = now + work + extra;
        (turns, extra)
    }
}

impl Server {
    /// The core (just granted to Primary work waiting on a lent core) is shared with the
    /// Secondary until it parks.
    pub fn share_with_secondary(&mut self, core: u16) {
        if self.timeshare.is_some() {
            let c = &mut self.q.cores[core as usize];
            c.shared = true;
            c.turns = Turns::default();
        }
    }

    /// A request starting at `now` on a shared core runs longer by the Secondary's turns.
    pub(super) fn take_turns(&mut self, core: u16, req: u32, now: Nanos, slab: &mut Slab) {
        let ts = self.timeshare.as_mut().expect("a core is shared only with timesharing on");
        let c = &mut self.q.cores[core as usize];
        let r = &mut slab[req];
        let (turns, extra) = ts.secondary_time(&mut c.turns, now + self.cfg.packet_cost, r.left);
        r.left += extra;
        self.counters.secondary_turns += turns;
        self.counters.secondary_turn_ns += extra;
    }

    /// The Secondary's time in turns on shared cores up to `now` (`counters.secondary_turn_ns`
    /// books a run's turns when it starts: this leaves out those still to come).
    pub fn secondary_turn_ns_at(&self, now: Nanos) -> Nanos {
        let Some(ts) = &self.timeshare else { return 0 };
        let ahead: Nanos = self.q.cores.iter().filter(|c| c.shared).map(|c| c.turns.secondary_after(ts.turn, now)).sum();
        self.counters.secondary_turn_ns - ahead
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(first_turn: (Nanos, Nanos)) -> Timesharing {
        Timesharing { turn: 4_000, first_turn, rng: microsched_core::rng::stream(1, "t") }
    }

    #[test]
    fn a_request_longer_than_its_turn_waits_out_the_secondarys_turns() {
        let mut s = ts((0, 0));
        let mut t = Turns::default();
        // First turn 0: 5 µs of work = Secondary 4, Primary 4, Secondary 4, Primary 1.
        assert_eq!(s.secondary_time(&mut t, 10, 5_000), (2, 8_000));
        assert_eq!((t.left, t.busy_until), (3_000, 13_010));
        // Back to back: the turn goes on; 3 µs fit, the next 1 µs waits one Secondary turn.
        assert_eq!(s.secondary_time(&mut t, 13_010, 3_000), (0, 0));
        assert_eq!(s.secondary_time(&mut t, 16_010, 1_000), (1, 4_000));
        assert_eq!(t.left, 3_000);
    }

    #[test]
    fn the_secondarys_turns_are_booked_as_they_pass() {
        let mut s = ts((1_000, 1_000));
        let mut t = Turns::default();
        // Primary 1 µs from 10, then Secondary [1 010, 5 010), Primary [5 010, 9 010),
        // Secondary [9 010, 13 010), Primary [13 010, 14 010).
        assert_eq!(s.secondary_time(&mut t, 10, 6_000), (2, 8_000));
        let ahead = |at| t.secondary_after(4_000, at);
        assert_eq!([ahead(10), ahead(1_010), ahead(3_010), ahead(5_010), ahead(7_000)], [8_000, 8_000, 6_000, 4_000, 4_000]);
        assert_eq!([ahead(11_010), ahead(13_010), ahead(14_010), ahead(20_000)], [2_000, 0, 0, 0]);
    }

    #[test]
    fn a_thread_that_slept_starts_a_fresh_first_turn() {
        let mut s = ts((500, 1_500));
        let mut t = Turns { left: 0, busy_until: 100, ..Turns::default() };
        let mut fresh = 0;
        for i in 0..100 {
            t.busy_until = 0;
            let (_, extra) = s.secondary_time(&mut t, 1 + i, 1_000);
            assert!(extra == 0 || extra == 4_000);
            fresh += (extra == 0) as u32;
        }
        // First turns uniform on [0.5, 1.5 µs]: about half cover 1 µs.
        assert!((30..=70).contains(&fresh), "{fresh}");
    }
}
