//! The runtime's loopback tests, one binary (one link instead of seven): each module is one
//! concern's tests; every test that starts a server takes `common::serial()` first, so that
//! servers run one at a time across modules (they measure, and the machine has 2 CPUs).

mod common;
mod coresync_artifact;
mod coroutines;
mod dispatcher;
mod preemption;
mod protego;
mod replicas;
mod server;
mod spin_locks;
