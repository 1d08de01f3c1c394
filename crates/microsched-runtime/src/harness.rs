//! What the load generator and the controller cost the workers when they share the machine's
//! CPUs (one machine, loopback). Each of those threads sleeps between wake-ups, and on a small
//! VM a wake-up costs tens of µs of CPU (timer, scheduler, system calls) on the CPU it lands on.
//! Their own thread clocks measure it, and the load generator counts its wake-ups by cause:
//!
//! * woken by a reply: the kernel wakes it where the worker that sent the reply runs, so that
//!   worker pays the wake-up before it takes its next request — a cost per reply on the serving
//!   core (the simulator's `server.stack.client_ns`);
//! * woken by its own timer (arrivals, client timeouts) or the controller's tick: it preempts a
//!   worker (they spin when idle), one without a request if there is one, and a worker's
//!   synthetic request spins on the clock (`server.irq` with `steering = "idle_first"`,
//!   `request_work = "wall_clock"`).
//!
//! * the controller's period: it updates a periodic credit pool (Breakwater) once per tick, and
//!   a tick lasts longer than asked (the kernel's wake-up latency), so the pool moves at the
//!   tick's real rate (`policy.overload.rtt_us`, Breakwater's control period).
//!
//! Their CPU per wake-up varies (a tick takes 12–40 µs, a load-generator wake-up 10–100): the
//! replay draws each timer wake-up's length from a lognormal of the measured mean and spread
//! (`server.irq.cost_sigma`).
//!
//! The simulator replays all three, so that a scenario run in both can be compared with the
//! harness's cost on both sides; the server's own costs come from the bench's microbenchmarks.

use serde::Serialize;

use crate::clock::WakeupCpu;
use crate::loadgen::ClientCounters;
use crate::report::ServerReport;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Harness {
    /// CPUs' worth of harness work (CPU-seconds per second of each thread's run, summed).
    pub cpus: f64,
    /// The load generator's CPU per wake-up, µs: all of them, and those a reply ended.
    pub client_wakeup_us: f64,
    pub reply_wakeup_us: f64,
    /// The controller's CPU per tick, µs.
    pub tick_us: f64,
    /// The load generator's wake-ups by a datagram from the server, per answered request.
    pub reply_wakeups_per_request: f64,
    /// Wake-ups by a timer (the load generator's own and the controller's ticks) per second,
    /// and their CPU, µs: mean and standard deviation (of the two threads' wake-ups together).
    pub timer_wakeups_per_s: f64,
    pub timer_wakeup_us: f64,
    pub timer_wakeup_sd_us: f64,
    /// Breakwater's real control period (the mean interval between its pool updates), µs; 0
    /// with another controller.
    pub credit_period_us: f64,
}

impl Harness {
    pub fn of(client: &ClientCounters, server: &ServerReport) -> Self {
        let ctl = &server.controller;
        let ctl_ms = ctl.ticks as f64 * ctl.mean_tick_us / 1e3;
        let ratio = |x: f64, y: f64| if y > 0.0 { x / y } else { 0.0 };
        let cpus = ratio(client.cpu_ms, client.loop_ms) + ratio(ctl.cpu_ms, ctl_ms);
        let client_wakeup_us = 1e3 * ratio(client.cpu_ms, client.wakeups as f64);
        let tick_us = 1e3 * ratio(ctl.cpu_ms, ctl.ticks as f64);
        let answered = client.completed + client.aqm_dropped + client.lock_dropped + client.start_dropped;
        let reply_wakeups_per_request = ratio(client.wakeups_by_datagram as f64, answered as f64);
        let client_timer = client.wakeups.saturating_sub(client.wakeups_by_datagram) as f64;
        let client_timer_per_ms = ratio(client_timer, client.loop_ms);
        let ticks_per_ms = ratio(ctl.ticks as f64, ctl_ms);
        let timer_wakeups_per_s = 1e3 * (client_timer_per_ms + ticks_per_ms);
        // Each cause's own CPU per wake-up where the threads measured it (a wake-up by a reply
        // handles more than one by the load generator's timer), else the load generator's mean.
        let measured = |w: &WakeupCpu| (w.n > 0).then_some((w.mean_us, w.sd_us));
        let reply_wakeup_us = measured(&client.datagram_wakeup_cpu).map_or(client_wakeup_us, |m| m.0);
        let client_timer = measured(&client.timer_wakeup_cpu).unwrap_or((client_wakeup_us, 0.0));
        let tick = measured(&ctl.tick_cpu).unwrap_or((tick_us, 0.0));
        // The mixture of the two threads' timer wake-ups, weighted by their rates.
        let rate = client_timer_per_ms + ticks_per_ms;
        let timer_wakeup_us = ratio(client_timer_per_ms * client_timer.0 + ticks_per_ms * tick.0, rate);
        let second_moment = |(m, sd): (f64, f64)| sd * sd + m * m;
        let mean_sq = ratio(client_timer_per_ms * second_moment(client_timer) + ticks_per_ms * second_moment(tick), rate);
        let timer_wakeup_sd_us = (mean_sq - timer_wakeup_us * timer_wakeup_us).max(0.0).sqrt();
        let credit_period_us = if server.overload == "breakwater" { ctl.mean_credit_period_us } else { 0.0 };
        Self {
            cpus,
            client_wakeup_us,
            reply_wakeup_us,
            tick_us,
            reply_wakeups_per_request,
            timer_wakeups_per_s,
            timer_wakeup_us,
            timer_wakeup_sd_us,
            credit_period_us,
        }
    }

    /// The simulator's overrides that replay it (they replace the `this-machine` profile's
    /// closed-loop `client_ns`, where one wake-up serves many replies).
    pub fn sim_overrides(&self) -> Vec<String> {
        let mut o = vec![format!("server.stack.client_ns={:.0}", self.reply_wakeup_us * 1e3 * self.reply_wakeups_per_request)];
        if self.timer_wakeups_per_s > 0.0 && self.timer_wakeup_us > 0.0 {
            // A lognormal of the measured mean and coefficient of variation.
            let cv = self.timer_wakeup_sd_us / self.timer_wakeup_us;
            let sigma = (1.0 + cv * cv).ln().sqrt().min(3.0);
            o.extend([
                format!("server.irq.rate_per_s={:.0}", self.timer_wakeups_per_s),
                format!("server.irq.cost_us={:.2}", self.timer_wakeup_us),
                format!("server.irq.cost_sigma={sigma:.3}"),
                "server.irq.steering=\"idle_first\"".to_string(),
                "server.irq.request_work=\"wall_clock\"".to_string(),
            ]);
        }
        if self.credit_period_us > 0.0 {
            o.push(format!("policy.overload.rtt_us={:.1}", self.credit_period_us));
        }
        o
    }
}
