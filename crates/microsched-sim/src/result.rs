//! What a run returns: the summary, the time series, the latency CDF and optional per-request
//! records, in columns ready for DataFrames and Parquet.

use microsched_core::summary::Summary;
use microsched_core::Nanos;

use crate::requests::{Req, Stamps};

pub use microsched_core::timeseries::TimeSeries;

/// Per-request records (all requests that ended, warm-up included), in columns.
#[derive(Debug, Clone, Default)]
pub struct RequestLog {
    pub id: Vec<u64>,
    pub session: Vec<u64>,
    pub rtype: Vec<u64>,
    /// The application (0: the first).
    pub app: Vec<u64>,
    /// The node that answered.
    pub node: Vec<u64>,
    pub created_ns: Vec<u64>,
    pub server_arrival_ns: Vec<u64>,
    pub start_ns: Vec<u64>,
    pub done_ns: Vec<u64>,
    pub response_ns: Vec<u64>,
    pub service_ns: Vec<u64>,
    /// Time queued in all: runqueue waits (across preemptions and yields) and lock waits.
    pub queued_ns: Vec<u64>,
    pub dropped: Vec<u64>,
}

impl RequestLog {
    pub fn push(&mut self, r: &Req, st: &Stamps, response: Nanos) {
        self.id.push(st.id);
        self.session.push(r.session as u64);
        self.rtype.push(r.rtype as u64);
        self.app.push(r.app as u64);
        self.node.push(r.node as u64);
        self.created_ns.push(r.created);
        self.server_arrival_ns.push(st.arrive);
        self.start_ns.push(st.start);
        self.done_ns.push(st.done);
        self.response_ns.push(response);
        self.service_ns.push(r.service);
        self.queued_ns.push(r.queued_ns);
        self.dropped.push(r.dropped as u64);
    }

    pub fn columns(&self) -> Vec<(&'static str, &Vec<u64>)> {
        vec![
            ("id", &self.id),
            ("session", &self.session),
            ("type", &self.rtype),
            ("app", &self.app),
            ("node", &self.node),
            ("created_ns", &self.created_ns),
            ("server_arrival_ns", &self.server_arrival_ns),
            ("start_ns", &self.start_ns),
            ("done_ns", &self.done_ns),
            ("response_ns", &self.response_ns),
            ("service_ns", &self.service_ns),
            ("queued_ns", &self.queued_ns),
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
