//! The summary: the run's results at its end; several nodes' totals are merged by
//! [`NodeSummary::add`](microsched_core::summary::NodeSummary::add), not here field by field.
//!
//! Invariants: the flat resource keys are the nodes' totals (a single node's, exactly).

use microsched_core::sched::asqm::LockStats;
use microsched_core::summary::{Cores, Harvest, Irq, LockDrops, Requests, SimStats, Summary};

use super::Sim;
use crate::trace::Tracer;
use crate::result::SimResult;

impl<T: Tracer> Sim<T> {
    pub(super) fn finish(&mut self, wall_s: f64) -> SimResult {
        let sc = &self.scenario;
        let window_ns = self.end - self.warmup;
        let window_s = window_ns as f64 / 1e9;
        let nodes: Vec<_> =
            self.nodes.iter().enumerate().map(|(i, n)| n.summary(i as u16, sc.server.max_cores, self.end, window_ns)).collect();
        // The flat resource keys are the nodes' totals (a single node's, exactly).
        let mut total = nodes[0].clone();
        for (k, n) in nodes[1..].iter().enumerate() {
            total.add(n, k + 1);
        }
        total.cpu_utilization = if nodes.len() == 1 { total.cpu_utilization } else { total.cores.allocated_mean / total.cores.max as f64 };
        let credits = total.credits.take().map(|mut c| {
            let samples = self.nodes[0].credit.as_ref().map_or(0, |c| c.samples).max(1) as f64;
            c.client_queued_mean = self.client_queued_sum / samples;
            for a in &self.apps {
                c.client_timeouts += a.client_timeouts;
                c.client_overflows += a.client_overflows;
                c.credit_requests += a.credit_requests;
            }
            c.client_drops = c.client_timeouts + c.client_overflows;
            c
        });
        // Several nodes: the Primaries' harvests add up (node 0's eviction latency).
        let harvest = nodes.iter().filter_map(|n| n.harvest.as_ref()).enumerate().fold(None, |acc: Option<Harvest>, (k, h)| match acc {
            None => Some(h.clone()),
            Some(mut t) => {
                t.add(h, k);
                Some(t)
            }
        });
        let irq = nodes.iter().filter_map(|n| n.irq.as_ref()).fold(None, |acc: Option<Irq>, i| match acc {
            None => Some(i.clone()),
            Some(mut t) => {
                t.add(i);
                Some(t)
            }
        });
        let parking = nodes.iter().filter_map(|n| n.parking).reduce(|a, b| a.plus(&b));
        let first = &self.apps[0];
        let generated: u64 = self.apps.iter().map(|a| a.generated).sum();
        let summary = Summary {
            scenario: sc.name.clone(),
            seed: 0,
            allocator: self.nodes[0].allocator.name().to_string(),
            overload: self.nodes[0].credit.as_ref().map_or("none", |c| c.ctl.name()).to_string(),
            slo_us: first.slo_us,
            cores: Cores { ..total.cores },
            cpu_utilization: total.cpu_utilization,
            be_cores_mean: total.be_cores_mean,
            requests: Requests {
                generated: first.generated,
                completed: first.completed,
                dropped: first.dropped,
                in_flight: if self.apps.len() == 1 {
                    self.slab.live() as u64 - self.failure_reply.as_ref().map_or(0, |f| f.ghosts)
                } else {
                    first.in_flight()
                },
            },
            core_time: total.core_time,
            credits,
            sched: Some(total.sched),
            applications: self.apps.iter().map(|a| a.summary(window_s)).collect(),
            nodes,
            harvest,
            irq,
            parking,
            lock_control: self.failure_reply.as_ref().map(|f| {
                let stats: Vec<&LockStats> = self.nodes.iter().filter_map(|n| n.server.lock_drops().map(|(stats, _)| stats)).collect();
                let n = f.delay.len();
                LockDrops {
                    drops: self.nodes.iter().filter_map(|n| n.server.lock_drops()).map(|(_, drops)| drops).sum(),
                    failure_reply_us: microsched_core::metrics::us_percentiles(&f.delay, f.sum, n),
                    locks: LockStats::summaries(&stats, self.end, window_ns),
                }
            }),
            condvars: {
                let states: Vec<&crate::server::CondvarState> = self.nodes.iter().filter_map(|n| n.server.condvars()).collect();
                crate::server::CondvarState::summaries(&states)
            },
            sim: SimStats {
                events: self.events,
                wall_s,
                requests_per_wall_s: if wall_s > 0.0 { generated as f64 / wall_s } else { 0.0 },
                interrupted_at_ms: None,
            },
            ..first.recorder.summary(window_s)
        };
        SimResult { summary, timeseries: std::mem::take(&mut self.series), latency_cdf: first.recorder.latency_cdf(), requests: self.log.take() }
    }
}
