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
//! * [`control`]: the controller thread that ticks the allocator and the credit controller.
//! * [`rpc`]: session table and credit controller under one lock.
//! * [`handler`]: the application trait and the synthetic handler.
//! * [`be`]: the best-effort co-tenant.
//! * [`loadgen`], [`client`]: the load generator and Breakwater's client sessions.
//! * [`merge`]: the load generator's summary completed with the server's report.

pub mod be;
pub mod client;
pub mod clock;
pub mod config;
pub(crate) mod control;
pub mod handler;
pub mod loadgen;
pub mod merge;
pub mod netstat;
pub mod park;
pub mod queue;
pub mod report;
pub mod rpc;
pub mod server;
pub mod wire;
pub(crate) mod worker;

pub use config::ConfigError;
pub use loadgen::{LoadgenOpts, LoadgenResult};
pub use report::ServerReport;
pub use server::{ServeOpts, Server};

/// A well-mixed hash (splitmix64), for RSS-style session-to-core steering.
pub fn hash(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
