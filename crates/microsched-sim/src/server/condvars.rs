//! Condition variables of the request programs (`workload.condvars`): per condvar an item count
//! and a FIFO of waiting requests, off every core, as Caladan's `condvar_wait` parks a uthread.
//! A `wait` step (`Acquire, Wait, Compute, Release`) takes an item if there is one; else the
//! request releases the mutex and joins the FIFO (under ASQM the wait may be refused: the
//! artifact's `condvar_wait_if_uncongested`). A signal adds an item and makes the oldest waiter
//! runnable; that waiter's wait joins its accumulated queueing delay (the artifact's
//! `condvar_signal`), and when it runs it re-takes the mutex with a plain lock (never dropped)
//! and checks again (Mesa semantics: another consumer may have taken the item first).

use std::collections::VecDeque;

use microsched_core::sched::condvar::CondvarStats;
use microsched_core::summary::CondvarSummary;
use microsched_core::Nanos;

pub struct CondvarState {
    items: Vec<u64>,
    /// Per condvar: waiting request slots, each with when it began waiting (a woken one is
    /// marked with the request's [`crate::requests::Req::NOTIFIED`] flag).
    waiters: Vec<VecDeque<(u32, Nanos)>>,
    pub stats: CondvarStats,
}

impl CondvarState {
    pub fn new(names: Vec<String>) -> Self {
        let n = names.len();
        Self { items: vec![0; n], waiters: vec![VecDeque::new(); n], stats: CondvarStats::new(names) }
    }

    pub fn start_window(&mut self) {
        self.stats.measuring = true;
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
        self.waiters[cv as usize].push_back((req, now));
        self.stats.wait(cv);
    }

    pub(super) fn dropped(&mut self, cv: u32) {
        self.stats.dropped(cv);
    }

    /// A signal on `cv` at `now`: one more item, and the oldest waiter (with when it began
    /// waiting), for the caller to mark notified.
    pub(super) fn signal(&mut self, cv: u32, now: Nanos) -> Option<(u32, Nanos)> {
        self.items[cv as usize] += 1;
        self.stats.signal(cv);
        let woken = self.waiters[cv as usize].pop_front();
        if let Some((_, since)) = woken {
            self.stats.woken(cv, now - since);
        }
        woken
    }

    /// Summaries merged over the nodes' states (same condvars).
    pub fn summaries(nodes: &[&CondvarState]) -> Vec<CondvarSummary> {
        let stats: Vec<&CondvarStats> = nodes.iter().map(|n| &n.stats).collect();
        CondvarStats::summaries(&stats, |cv| nodes.iter().map(|n| n.items[cv as usize]).sum())
    }
}
