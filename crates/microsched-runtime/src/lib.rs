//! microsched-runtime: the real runtime. A UDP RPC server whose worker threads ("cores") park
//! and unpark under a core allocator, steal work from each other, and admit requests under a
//! credit-based overload controller; and an open-loop load generator with Breakwater's client.
//! The policies are `microsched-core`'s objects, the very ones the simulator drives: this crate
//! is their second driver, on a real clock and real sockets.
//!
//! One concern per file:
//!
//! * [`wire`]: the versioned binary protocol and its never-panicking decoder.
//! * [`server`]: socket, the receive path the workers and the controller poll (validation,
//!   admission), startup and report.
//! * [`worker`], [`queue`], [`park`]: the cores: run loop, queues with stealing, parking.
//! * [`sched`]: the cores' queueing policy (steering, requeueing, where an idle core finds work
//!   and whom it steals from): the simulator's `QueuePolicy` objects over a view of the runtime.
//! * [`control`]: the controller thread that ticks the allocator and the credit controller.
//! * [`rpc`]: session table and credit controller under one lock.
//! * [`handler`]: the application trait and the synthetic handler (runs request programs).
//! * [`dispatcher`]: the dispatcher thread of Shinjuku, Concord, Tiny Quanta and DARC (and of
//!   any scenario with `server.dispatcher`): arrivals, hand-offs, preemption signals.
//! * `preempt`: time-slice preemption (a timer thread, per-worker flags polled at yield points).
//! * [`coro`], [`mutex`]: requests as coroutines (yield points, blocking mutexes) and the
//!   mutexes they wait on.
//! * [`asqm`], [`kv`]: Protego's latency-aware locks (`server.lock_control`) and the key-value
//!   store handler.
//! * `startdrop`: Breakwater v2's worker-start drop (`policy.overload.latency_budget_us`).
//! * [`be`]: the best-effort co-tenant.
//! * [`loadgen`], [`client`]: the load generator and Breakwater's client sessions.
//! * [`merge`]: the load generator's summary completed with the server's report.

pub mod asqm;
pub mod auth;
pub mod be;
pub mod clock;
pub mod config;
pub(crate) mod control;
pub mod coro;
pub mod dispatcher;
pub mod handler;
pub mod harness;
pub mod kv;
pub mod loadgen;
pub mod merge;
pub mod mutex;
pub mod netstat;
pub mod park;
pub(crate) mod preempt;
pub mod queue;
pub mod records;
pub mod report;
pub mod rpc;
pub(crate) mod sched;
pub mod server;
pub(crate) mod startdrop;
pub mod trace;
pub mod wire;
pub(crate) mod worker;

pub use config::ConfigError;
pub use loadgen::{LoadgenOpts, LoadgenResult};
pub use report::ServerReport;
pub use server::{ServeOpts, Server};

/// RSS-style session-to-core steering uses the simulator's hash.
pub use microsched_core::rng::hash;
