//! Per-condition-variable statistics of the request programs' `wait`/`signal` steps
//! (`workload.condvars`), kept alike by the simulator (per node) and the real runtime (its whole
//! run), and reported as the summary's `condvars`.

use crate::summary::CondvarSummary;
use crate::Nanos;

#[derive(Debug, Clone)]
struct Counts {
    waits: u64,
    wakeups: u64,
    signals: u64,
    drops: u64,
    wait: hdrhistogram::Histogram<u64>,
    wait_sum: u128,
}

/// Every condvar's counters, by condvar id (declaration order).
#[derive(Debug, Clone, Default)]
pub struct CondvarStats {
    names: Vec<String>,
    counts: Vec<Counts>,
    /// Counting (the measured window has started).
    pub measuring: bool,
}

impl CondvarStats {
    pub fn new(names: Vec<String>) -> Self {
        let c = Counts { waits: 0, wakeups: 0, signals: 0, drops: 0, wait: hdrhistogram::Histogram::new(3).expect("valid sigfig"), wait_sum: 0 };
        Self { counts: vec![c; names.len()], names, measuring: false }
    }

    /// Condvars tracked.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The counts of `cv`, if it is a tracked condvar and the window is on.
    fn at(&mut self, cv: u32) -> Option<&mut Counts> {
        if !self.measuring {
            return None;
        }
        self.counts.get_mut(cv as usize)
    }

    /// Items added to every condvar (the window's signals, summed).
    pub fn signals(&self) -> u64 {
        self.counts.iter().map(|c| c.signals).sum()
    }

    /// A request found no item and waits on `cv`.
    pub fn wait(&mut self, cv: u32) {
        if let Some(c) = self.at(cv) {
            c.waits += 1;
        }
    }

    /// A wait on `cv` was refused (ASQM): the request is dropped.
    pub fn dropped(&mut self, cv: u32) {
        if let Some(c) = self.at(cv) {
            c.drops += 1;
        }
    }

    /// An item was added to `cv`.
    pub fn signal(&mut self, cv: u32) {
        if let Some(c) = self.at(cv) {
            c.signals += 1;
        }
    }

    /// A waiter of `cv` was woken after waiting `waited`.
    pub fn woken(&mut self, cv: u32, waited: Nanos) {
        if let Some(c) = self.at(cv) {
            c.wakeups += 1;
            c.wait.record(waited).expect("auto-resizing histogram");
            c.wait_sum += u128::from(waited);
        }
    }

    /// Summaries merged over `nodes` (same condvars); `items_left(cv)`: items not taken at the end.
    pub fn summaries(nodes: &[&CondvarStats], items_left: impl Fn(u32) -> u64) -> Vec<CondvarSummary> {
        let Some(first) = nodes.first() else { return Vec::new() };
        (0..first.names.len())
            .map(|cv| {
                let mut wait = hdrhistogram::Histogram::<u64>::new(3).expect("valid sigfig");
                let mut out = CondvarSummary { name: first.names[cv].clone(), items_left: items_left(cv as u32), ..CondvarSummary::default() };
                let mut sum = 0u128;
                for n in nodes {
                    let c = &n.counts[cv];
                    wait.add(&c.wait).expect("auto-resizing histogram");
                    out.waits += c.waits;
                    out.wakeups += c.wakeups;
                    out.signals += c.signals;
                    out.drops += c.drops;
                    sum += c.wait_sum;
                }
                out.wait_us = crate::metrics::us_percentiles(&wait, sum, out.wakeups);
                out
            })
            .collect()
    }
}
