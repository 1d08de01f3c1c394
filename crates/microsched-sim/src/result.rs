//! What a run returns: the summary, the time series, the latency CDF and optional per-request
//! records, in columns ready for DataFrames and Parquet.

use microsched_core::summary::Summary;
use microsched_core::Nanos;

use crate::requests::Req;

/// One row per sample interval; each value covers the interval that ends at `t_ms` (means and
/// counts) or is taken at `t_ms` (queue_len, oldest_delay_us, in_system).
#[derive(Debug, Clone, Default)]
pub struct TimeSeries {
    pub t_ms: Vec<f64>,
    pub cores_allocated: Vec<f64>,
    pub cores_busy: Vec<f64>,
    pub cores_parked: Vec<f64>,
    pub queue_len: Vec<f64>,
    pub oldest_delay_us: Vec<f64>,
    pub arrivals: Vec<f64>,
    pub completions: Vec<f64>,
    pub drops: Vec<f64>,
    pub throughput_rps: Vec<f64>,
    pub offered_rps: Vec<f64>,
    /// Requests generated and not yet answered: at clients, in the network or at the server.
    pub in_system: Vec<f64>,
    /// The core allocator's own signal at its last tick (delay in ns, utilization fraction, …;
    /// NaN for policies without one).
    pub alloc_signal: Vec<f64>,
    /// Credit pool C_total at `t_ms` (NaN without a credit-based overload controller).
    pub credit_pool: Vec<f64>,
    /// Credits issued C_issued at `t_ms` (NaN without a credit controller).
    pub credits_issued: Vec<f64>,
    /// Sessions on the drained list at `t_ms` (NaN without a credit controller).
    pub drained_sessions: Vec<f64>,
    /// Requests waiting for credits at clients at `t_ms`.
    pub client_queued: Vec<f64>,
}

impl TimeSeries {
    pub fn columns(&self) -> Vec<(&'static str, &Vec<f64>)> {
        vec![
            ("t_ms", &self.t_ms),
            ("cores_allocated", &self.cores_allocated),
            ("cores_busy", &self.cores_busy),
            ("cores_parked", &self.cores_parked),
            ("queue_len", &self.queue_len),
            ("oldest_delay_us", &self.oldest_delay_us),
            ("arrivals", &self.arrivals),
            ("completions", &self.completions),
            ("drops", &self.drops),
            ("throughput_rps", &self.throughput_rps),
            ("offered_rps", &self.offered_rps),
            ("in_system", &self.in_system),
            ("alloc_signal", &self.alloc_signal),
            ("credit_pool", &self.credit_pool),
            ("credits_issued", &self.credits_issued),
            ("drained_sessions", &self.drained_sessions),
            ("client_queued", &self.client_queued),
        ]
    }
}

/// Per-request records (all requests that ended, warm-up included), in columns.
#[derive(Debug, Clone, Default)]
pub struct RequestLog {
    pub id: Vec<u64>,
    pub session: Vec<u64>,
    pub rtype: Vec<u64>,
    pub created_ns: Vec<u64>,
    pub server_arrival_ns: Vec<u64>,
    pub start_ns: Vec<u64>,
    pub done_ns: Vec<u64>,
    pub response_ns: Vec<u64>,
    pub service_ns: Vec<u64>,
    pub dropped: Vec<u64>,
}

impl RequestLog {
    pub fn push(&mut self, r: &Req, response: Nanos) {
        self.id.push(r.id);
        self.session.push(r.session as u64);
        self.rtype.push(r.rtype as u64);
        self.created_ns.push(r.created);
        self.server_arrival_ns.push(r.arrive);
        self.start_ns.push(r.start);
        self.done_ns.push(r.done);
        self.response_ns.push(response);
        self.service_ns.push(r.service);
        self.dropped.push(r.dropped as u64);
    }

    pub fn columns(&self) -> Vec<(&'static str, &Vec<u64>)> {
        vec![
            ("id", &self.id),
            ("session", &self.session),
            ("type", &self.rtype),
            ("created_ns", &self.created_ns),
            ("server_arrival_ns", &self.server_arrival_ns),
            ("start_ns", &self.start_ns),
            ("done_ns", &self.done_ns),
            ("response_ns", &self.response_ns),
            ("service_ns", &self.service_ns),
            ("dropped", &self.dropped),
        ]
    }
}

#[derive(Debug, Clone)]
pub struct SimResult {
    pub summary: Summary,
    pub timeseries: TimeSeries,
    /// (latency µs, cumulative fraction).
    pub latency_cdf: (Vec<f64>, Vec<f64>),
    pub requests: Option<RequestLog>,
}
