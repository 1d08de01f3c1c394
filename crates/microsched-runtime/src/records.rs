//! Per-request records of a real run (`metrics.record_requests`, `microsched real --record`):
//! the load generator writes one row per request it generated, when the request ends, so that
//! a real run can be compared with the simulator request by request (the simulator offers the
//! same requests again with `workload.replay`: [`microsched_core::replay`]).
//!
//! Columns (the Python front writes them to Parquet): `id` (the load generator's sequence
//! number: generation order), `created_ns` (scheduled creation time from the start of the
//! schedule, the warm-up included: the simulator's `created_ns`), `session`, `type`,
//! `service_ns` (the service time asked for), `replica` (the server that answered, 0 with
//! one), `tries`, `outcome` (`ok`, or how it ended: the [`OUTCOMES`]), `latency_ns` (scheduled
//! creation to response; 0 if none), `server_queue_ns` (the server's queueing delay, from the
//! response: admission to first start; 0 if none), `server_service_ns` (the server's time from
//! that start to the response: the run, and any wait after a preemption or behind a mutex; 0
//! if none), `measured` (created in the measured window). What is left of the latency,
//! `latency − server_queue − server_service`, is the network and the client.
//!
//! Bounded: at most [`MAX_RECORDS`] rows (about 80 MB in memory); past it requests are counted
//! in `cut`, not kept, and the front says so.

use serde::{Deserialize, Serialize};

use microsched_core::Nanos;

/// Most rows one run keeps.
pub const MAX_RECORDS: usize = 1_000_000;

/// How a request ended, as the `outcome` column names it.
pub const OUTCOMES: [&str; 11] = [
    "ok",
    "aqm_dropped",
    "rejected",
    "lock_dropped",
    "start_dropped",
    "seda_rejected",
    "client_timeout",
    "client_overflow",
    "timed_out",
    "in_flight_end",
    "queued_end",
];

/// How a request ended (an index into [`OUTCOMES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Outcome {
    Ok = 0,
    AqmDropped,
    Rejected,
    LockDropped,
    StartDropped,
    SedaRejected,
    ClientTimeout,
    ClientOverflow,
    TimedOut,
    InFlightEnd,
    QueuedEnd,
}

/// One request's row.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub id: u64,
    pub created_ns: Nanos,
    pub session: u32,
    pub rtype: u16,
    pub service_ns: Nanos,
    pub replica: u16,
    pub tries: u8,
    pub outcome: Outcome,
    pub latency_ns: Nanos,
    pub server_queue_ns: Nanos,
    pub server_service_ns: Nanos,
    pub measured: bool,
}

/// The records, by column.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Records {
    pub id: Vec<u64>,
    pub created_ns: Vec<u64>,
    pub session: Vec<u32>,
    #[serde(rename = "type")]
    pub rtype: Vec<u16>,
    pub service_ns: Vec<u64>,
    pub replica: Vec<u16>,
    pub tries: Vec<u8>,
    pub outcome: Vec<String>,
    pub latency_ns: Vec<u64>,
    pub server_queue_ns: Vec<u64>,
    pub server_service_ns: Vec<u64>,
    pub measured: Vec<bool>,
    /// Requests that ended after the bound was reached (not kept).
    pub cut: u64,
    /// The bound.
    pub limit: u64,
}

impl Records {
    pub fn new() -> Self {
        Records { limit: MAX_RECORDS as u64, ..Default::default() }
    }

    pub fn len(&self) -> usize {
        self.id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.id.is_empty()
    }

    pub fn push(&mut self, r: Row) {
        if self.id.len() >= MAX_RECORDS {
            self.cut += 1;
            return;
        }
        self.id.push(r.id);
        self.created_ns.push(r.created_ns);
        self.session.push(r.session);
        self.rtype.push(r.rtype);
        self.service_ns.push(r.service_ns);
        self.replica.push(r.replica);
        self.tries.push(r.tries);
        self.outcome.push(OUTCOMES[r.outcome as usize].to_string());
        self.latency_ns.push(r.latency_ns);
        self.server_queue_ns.push(r.server_queue_ns);
        self.server_service_ns.push(r.server_service_ns);
        self.measured.push(r.measured);
    }

    /// The rows in generation order (they are pushed as requests end).
    pub fn sort(&mut self) {
        let mut order: Vec<usize> = (0..self.id.len()).collect();
        order.sort_by_key(|&i| self.id[i]);
        fn permute<T: Clone>(v: &mut Vec<T>, order: &[usize]) {
            *v = order.iter().map(|&i| v[i].clone()).collect();
        }
        permute(&mut self.id, &order);
        permute(&mut self.created_ns, &order);
        permute(&mut self.session, &order);
        permute(&mut self.rtype, &order);
        permute(&mut self.service_ns, &order);
        permute(&mut self.replica, &order);
        permute(&mut self.tries, &order);
        permute(&mut self.outcome, &order);
        permute(&mut self.latency_ns, &order);
        permute(&mut self.server_queue_ns, &order);
        permute(&mut self.server_service_ns, &order);
        permute(&mut self.measured, &order);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: u64) -> Row {
        Row {
            id,
            created_ns: id * 10,
            session: 0,
            rtype: 0,
            service_ns: 1,
            replica: 0,
            tries: 1,
            outcome: Outcome::Ok,
            latency_ns: 5,
            server_queue_ns: 1,
            server_service_ns: 2,
            measured: true,
        }
    }

    #[test]
    fn rows_come_out_in_generation_order_and_the_bound_counts_what_it_cuts() {
        let mut r = Records::new();
        for id in [2, 0, 1] {
            r.push(row(id));
        }
        r.sort();
        assert_eq!(r.id, vec![0, 1, 2]);
        assert_eq!(r.created_ns, vec![0, 10, 20]);
        r.id.resize(MAX_RECORDS, 0);
        r.push(row(9));
        assert_eq!((r.len(), r.cut), (MAX_RECORDS, 1));
    }
}
