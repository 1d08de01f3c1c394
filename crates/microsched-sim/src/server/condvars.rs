//! Condition variables of the request programs (`workload.condvars`): per condvar an item count
//! and a FIFO of waiting requests, off every core, as Caladan's `condvar_wait` parks a uthread.
//! A `wait` step (`Acquire, Wait, Compute, Release`) takes an item if there is one; else the
//! request releases the mutex and joins the FIFO (under ASQM the wait may be refused: the
//! artifact's `condvar_wait_if_uncongested`). A signal adds an item and makes the oldest waiter
//! runnable; that waiter's wait joins its accumulated queueing delay (the artifact's
//! `condvar_signal`), and when it runs it re-takes the mutex with a plain lock (never dropped)
//! and checks again (Mesa semantics: another consumer may have taken the item first).

use std::collections::VecDeque;

use microsched_core::summary::CondvarSummary;
use microsched_core::Nanos;

use super::NONE;

/// One condvar's counters over the measured window.
#[derive(Debug, Clone)]
struct Stats {
    waits: u64,
    wakeups: u64,
    signals: u64,
    drops: u64,
    wait: hdrhistogram::Histogram<u64>,
    wait_sum: u128,
}

pub struct CondvarState {
    names: Vec<String>,
    items: Vec<u64>,
    /// Per condvar: waiting request slots, each with when it began waiting.
    waiters: Vec<VecDeque<(u32, Nanos)>>,
    /// Per request slot: notified, it must re-take the condvar's mutex before checking again.
    notified: Vec<bool>,
    stats: Vec<Stats>,
    measuring: bool,
}

impl CondvarState {
    pub fn new(names: Vec<String>) -> Self {
        let n = names.len();
        let stats = Stats { waits: 0, wakeups: 0, signals: 0, drops: 0, wait: hdrhistogram::Histogram::new(3).expect("valid sigfig"), wait_sum: 0 };
        Self { names, items: vec![0; n], waiters: vec![VecDeque::new(); n], notified: Vec::new(), stats: vec![stats; n], measuring: false }
    }

    pub fn start_window(&mut self) {
        self.measuring = true;
    }

    /// Whether request slot `req` was notified (and forgets it: it now re-takes the mutex).
    pub(super) fn take_notified(&mut self, req: u32) -> bool {
        self.notified.get_mut(req as usize).is_some_and(|n| std::mem::replace(n, false))
    }

    /// Takes an item of `cv` if there is one.
    pub(super) fn take_item(&mut self, cv: u32) -> bool {
        let i = &mut self.items[cv as usize];
        if *i == 0 {
            return false;
        }
        *i -= 1;
        true
    }

    /// `cv`'s queueing delay at `now`: its oldest waiter's age (the artifact's `condvar_queue_tsc`).
    pub(super) fn oldest_wait(&self, cv: u32, now: Nanos) -> Nanos {
        self.waiters[cv as usize].front().map_or(0, |&(_, since)| now.saturating_sub(since))
    }

    pub(super) fn wait(&mut self, cv: u32, req: u32, now: Nanos) {
        debug_assert!(req != NONE);
        self.waiters[cv as usize].push_back((req, now));
        if self.measuring {
            self.stats[cv as usize].waits += 1;
        }
    }

    pub(super) fn dropped(&mut self, cv: u32) {
        if self.measuring {
            self.stats[cv as usize].drops += 1;
        }
    }

    /// A signal on `cv` at `now`: one more item, and the oldest waiter (with when it began
    /// waiting), now marked notified.
    pub(super) fn signal(&mut self, cv: u32, now: Nanos) -> Option<(u32, Nanos)> {
        let c = cv as usize;
        self.items[c] += 1;
        let woken = self.waiters[c].pop_front();
        if let Some((w, _)) = woken {
            let i = w as usize;
            if self.notified.len() <= i {
                self.notified.resize(i + 1, false);
            }
            self.notified[i] = true;
        }
        if self.measuring {
            let s = &mut self.stats[c];
            s.signals += 1;
            if let Some((_, since)) = woken {
                let waited = now - since;
                s.wakeups += 1;
                s.wait.record(waited).expect("auto-resizing histogram");
                s.wait_sum += u128::from(waited);
            }
        }
        woken
    }

    /// Summaries merged over the nodes' states (same condvars).
    pub fn summaries(nodes: &[&CondvarState]) -> Vec<CondvarSummary> {
        let Some(first) = nodes.first() else { return Vec::new() };
        (0..first.names.len())
            .map(|c| {
                let mut wait = hdrhistogram::Histogram::<u64>::new(3).expect("valid sigfig");
                let mut out = CondvarSummary { name: first.names[c].clone(), ..CondvarSummary::default() };
                let mut sum = 0u128;
                for n in nodes {
                    let s = &n.stats[c];
                    wait.add(&s.wait).expect("auto-resizing histogram");
                    out.waits += s.waits;
                    out.wakeups += s.wakeups;
                    out.signals += s.signals;
                    out.drops += s.drops;
                    out.items_left += n.items[c];
                    sum += s.wait_sum;
                }
                out.wait_us = microsched_core::metrics::us_percentiles(&wait, sum, out.wakeups);
                out
            })
            .collect()
    }
}
