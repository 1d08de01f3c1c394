//! What the load generator and the controller cost the workers when they share the machine's
//! CPUs (one machine, loopback). Each of those threads sleeps between wake-ups, and on a small
//! VM a wake-up costs tens of µs of CPU (timer, scheduler, system calls) on the CPU it lands on.
//! Their own thread clocks measure it, and the load generator counts its wake-ups by cause:
//!
//! * woken by a reply: the kernel wakes it where the worker that sent the reply runs, so that
//!   worker pays the wake-up before it takes its next request — a cost per reply on the serving
//!   core (the simulator's `server.stack.client_ns`);
//! * woken by its own timer (arrivals, client timeouts) or the controller's tick: a thread
//!   placed on an idle CPU if there is one, else preempting a worker, whose synthetic request
//!   spins on the clock (`server.irq` with `steering = "idle_first"`, `request_work =
//!   "wall_clock"`).
//!
//! The simulator replays both, so that a scenario run in both can be compared with the
//! harness's cost on both sides; the server's own costs come from the bench's microbenchmarks.

use serde::Serialize;

use crate::loadgen::ClientCounters;
use crate::report::ControllerReport;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Harness {
    /// CPUs' worth of harness work (CPU-seconds per second of each thread's run, summed).
    pub cpus: f64,
    /// CPU per wake-up of a harness thread, µs.
    pub burst_us: f64,
    /// The load generator's wake-ups by a reply, per request it got an answer to.
    pub reply_wakeups_per_request: f64,
    /// Wake-ups by a timer (the load generator's own and the controller's ticks) per second.
    pub timer_wakeups_per_s: f64,
}

impl Harness {
    pub fn of(client: &ClientCounters, ctl: &ControllerReport) -> Self {
        let ctl_ms = ctl.ticks as f64 * ctl.mean_tick_us / 1e3;
        let per_ms = |x: f64, run_ms: f64| if run_ms > 0.0 { x / run_ms } else { 0.0 };
        let cpus = per_ms(client.cpu_ms, client.loop_ms) + per_ms(ctl.cpu_ms, ctl_ms);
        let wakeups = client.wakeups + ctl.ticks;
        let burst_us = if wakeups > 0 { (client.cpu_ms + ctl.cpu_ms) * 1e3 / wakeups as f64 } else { 0.0 };
        let answered = client.completed + client.aqm_dropped + client.lock_dropped + client.start_dropped;
        let reply_wakeups_per_request = if answered > 0 { client.wakeups_by_datagram as f64 / answered as f64 } else { 0.0 };
        let timer_wakeups = client.wakeups.saturating_sub(client.wakeups_by_datagram) as f64;
        let timer_wakeups_per_s = 1e3 * (per_ms(timer_wakeups, client.loop_ms) + per_ms(ctl.ticks as f64, ctl_ms));
        Self { cpus, burst_us, reply_wakeups_per_request, timer_wakeups_per_s }
    }

    /// The simulator's overrides that replay it (they replace the `this-machine` profile's
    /// closed-loop `client_ns`, where one wake-up serves many replies).
    pub fn sim_overrides(&self) -> Vec<String> {
        if self.burst_us <= 0.0 {
            return Vec::new();
        }
        let mut o = vec![format!("server.stack.client_ns={:.0}", self.burst_us * 1e3 * self.reply_wakeups_per_request)];
        if self.timer_wakeups_per_s > 0.0 {
            o.extend([
                format!("server.irq.rate_per_s={:.0}", self.timer_wakeups_per_s),
                format!("server.irq.cost_us={:.2}", self.burst_us),
                "server.irq.steering=\"idle_first\"".to_string(),
                "server.irq.request_work=\"wall_clock\"".to_string(),
            ]);
        }
        o
    }
}
