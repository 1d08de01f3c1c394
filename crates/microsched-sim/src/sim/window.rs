//! The measurement window and sampling: the warm-up's end (the window's start snapshots) and the
//! time series' samples.
//!
//! Invariants: statistics count only events inside the window; each sample covers the interval
//! since the previous one, and the next sample is always scheduled.

use microsched_core::summary::Parking;

use super::Sim;
use crate::trace::Tracer;
use crate::events::Event;

/// Counters of one time-series interval.
#[derive(Default, Clone, Copy)]
pub(super) struct Interval {
    pub(super) arrivals: u64,
    pub(super) completions: u64,
    pub(super) drops: u64,
}

impl<T: Tracer> Sim<T> {
    /// The warm-up's end: the measured window starts; the nodes take their start snapshots.
    pub(super) fn window_start(&mut self) {
        let now = self.now;
        self.measuring = true;
        for n in &mut self.nodes {
            n.window_start_times = n.server.core_times(now);
            n.window_start_sched = n.server.counters();
            if let Some((snap, _)) = n.server.dispatcher_snapshot(now) {
                n.window_start_dispatch = snap;
            }
            n.window_start_parking = n.parking_now();
            n.window_start_core_busy = n.core_busy(now);
            n.server.start_window(now);
        }
    }

    pub(super) fn sample(&mut self) {
        let now = self.now;
        let dt = (now - self.last_sample_at) as f64;
        let measuring = self.measuring;
        let s = &mut self.series;
        s.t_ms.push(now as f64 / 1e6);
        let (mut allocated, mut busy, mut parked, mut queue_len, mut oldest) = (0.0, 0.0, 0.0, 0.0, 0.0f64);
        let (mut pool, mut issued, mut drained) = (f64::NAN, f64::NAN, f64::NAN);
        let mut park = Parking::default();
        let (mut parking, mut gated) = (false, false);
        for (i, n) in self.nodes.iter_mut().enumerate() {
            let p = n.parking_now();
            park = park.plus(&p.since(&n.last_sample_parking));
            n.last_sample_parking = p;
            parking |= n.parks_cores();
            gated |= p.gate.is_some();
            let times = n.server.core_times(now);
            let d = |k: usize| (times[k] - n.last_sample_times[k]) as f64 / dt;
            // A waking core is already the LC application's (taken from the BE co-tenant), though
            // not yet usable: it counts as allocated, so allocated + parked = max_cores; except
            // where the Secondary runs on it until it is usable, and for the Secondary's turns on
            // a core it shares with Primary requests, as in the summary.
            let turns_at = n.server.secondary_turn_ns_at(now);
            let turns = (turns_at - n.last_sample_secondary_turns) as f64 / dt;
            n.last_sample_secondary_turns = turns_at;
            let waking = if n.allocator.secondary_runs_while_waking() { 0.0 } else { d(3) };
            allocated += d(0) + d(1) + waking + d(4) - turns;
            busy += d(0) - turns;
            parked += d(2);
            queue_len += n.server.queued_total() as f64;
            oldest = oldest.max(n.server.max_delay(now, &self.slab) as f64 / 1e3);
            n.last_sample_times = times;
            if let Some(c) = &mut n.credit {
                let st = c.ctl.stats();
                let first = i == 0;
                pool = if first { st.pool as f64 } else { pool + st.pool as f64 };
                issued = if first { st.issued as f64 } else { issued + st.issued as f64 };
                drained = if first { st.drained as f64 } else { drained + st.drained as f64 };
                if measuring {
                    c.samples += 1;
                    c.pool_sum += st.pool as f64;
                    c.pool_max = c.pool_max.max(st.pool as f64);
                    c.issued_sum += st.issued as f64;
                    c.drained_sum += st.drained as f64;
                }
            }
        }
        s.cores_allocated.push(allocated);
        s.cores_busy.push(busy);
        s.cores_parked.push(parked);
        s.queue_len.push(queue_len);
        s.oldest_delay_us.push(oldest);
        s.arrivals.push(self.interval.arrivals as f64);
        s.completions.push(self.interval.completions as f64);
        s.drops.push(self.interval.drops as f64);
        s.throughput_rps.push(self.interval.completions as f64 / dt * 1e9);
        s.offered_rps.push(self.apps.iter().map(|a| a.arrivals.rate_at(now as f64)).sum());
        s.in_system.push(self.slab.live() as f64);
        s.alloc_signal.push(self.nodes[0].allocator.signal().unwrap_or(f64::NAN));
        s.credit_pool.push(pool);
        s.credits_issued.push(issued);
        s.drained_sessions.push(drained);
        let queued: u64 = self.apps.iter().flat_map(|a| a.clients.iter()).map(|c| c.queued).sum();
        s.client_queued.push(queued as f64);
        let count = |on: bool, v: u64| if on { v as f64 } else { f64::NAN };
        s.park_attempts.push(count(parking, park.attempts));
        s.park_vetoes.push(count(gated, park.gate.map_or(0, |g| g.vetoes())));
        s.parks.push(count(parking, park.parks));
        s.wakeups.push(count(parking, park.wakeups));
        if measuring && self.nodes[0].credit.is_some() {
            self.client_queued_sum += queued as f64;
        }
        self.interval = Interval::default();
        self.last_sample_at = now;
        self.evq.push(now + self.sample_every, Event::Sample);
    }
}
