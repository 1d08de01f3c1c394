//! Application handlers: what a worker runs for a request. A real application (a key-value
//! store with locks comes next) implements [`Handler`]; the runtime ships the synthetic one.

use crate::clock::spin_for;

/// A request as the handler sees it (validated by the receive path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub session: u32,
    pub req_id: u64,
    /// Request type (index into the scenario's `workload.types`).
    pub rtype: u16,
    /// The CPU time the request asks for (the load generator draws it from the scenario).
    pub service_ns: u64,
}

/// What a handler says about a request it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
}

/// Runs requests on a worker thread. Called concurrently from every worker.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, req: &Request) -> Outcome;
}

/// Spins for the service time the request carries: the synthetic workload of the papers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Synthetic;

impl Handler for Synthetic {
    fn handle(&self, req: &Request) -> Outcome {
        spin_for(req.service_ns);
        Outcome::Ok
    }
}
