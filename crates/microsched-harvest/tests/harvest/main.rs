//! The harvesting agent's tests on real processes and cgroup trees, one binary (one link instead
//! of three). Each test owns its child processes and temporary directories, so they run in
//! parallel threads.

mod actuate;
mod common;
mod cpuset_v1;
mod state_file;
