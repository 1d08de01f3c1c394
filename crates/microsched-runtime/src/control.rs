//! The controller thread: Caladan's IOKernel loop for one application, on a real clock.
//!
//! Every tick it observes the cores ([`CoreObs`] built from the real queues and phase times),
//! publishes the congestion signal (max over cores of the oldest waiting request's age, read by
//! the AQM and the credit controller, as stale as one tick), withdraws stale
//! yield requests and calls [`CoreAllocator::tick`] every allocator interval, carrying out a
//! `Grant` (wake a parked worker, one with queued work first) or a `Yield`; calls the credit
//! controller's timer every control period and sends the credit messages of its wake-ups; tells
//! the credit controller when the active core count changed; and samples the time series.
//!
//! When no worker is searching (all busy, parked or waking), nobody polls the socket: the
//! controller then receives the waiting datagrams itself at each tick (into the cores' inboxes,
//! where the allocator sees them, as the IOKernel sees the RX queues of parked cores), and waits
//! for the socket to become readable instead of sleeping blindly.
//!
//! It sleeps between ticks (1 ns timer slack) rather than spinning: on a 2-CPU machine a spinning
//! controller would take a whole CPU from the workers and the best-effort co-tenant. The kernel
//! makes the real period longer than asked; the report gives the measured mean. With
//! `runtime.realtime` it runs under `SCHED_FIFO`, so that a wake-up preempts a spinning worker at
//! once instead of waiting out the worker's scheduler slice (the IOKernel has a core of its own).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use microsched_core::alloc::{AllocAction, CoreObs, SliceView};
use microsched_core::Nanos;

use crate::clock::{realtime_priority, tight_timer_slack};
use crate::park::Phase;
use crate::report::{ControllerReport, SeriesInfo, ServerSeries, MAX_SERIES_ROWS};
use crate::sched::Sched;
use crate::server::Shared;

/// Datagrams the controller receives per tick when no worker polls the socket.
const RX_DRAIN: usize = 256;

pub(crate) struct ControlOut {
    pub series: ServerSeries,
    pub series_info: SeriesInfo,
    pub report: ControllerReport,
    pub grants: u64,
}

pub(crate) fn run(
    sh: Arc<Shared>,
    mut sched: Sched,
    tick_ns: Nanos,
    mut sample_ns: Nanos,
    be_ops: Option<Arc<std::sync::atomic::AtomicU64>>,
    realtime: bool,
) -> ControlOut {
    tight_timer_slack();
    // Held for the thread's life: the policy goes back when the controller returns.
    let realtime_guard = if realtime { realtime_priority() } else { None };
    let realtime = realtime_guard.is_some();
    let n = sh.cores.len();
    let alloc_iv = sh.alloc.lock().interval();
    let credit_iv = sh.rpc.lock().timer_interval();
    // The congestion signal has readers only with a dynamic allocator or a credit controller
    // (its AQM reads it at every request); otherwise the controller only samples the series,
    // and waking every tick would just take the CPU from the workers (20 % of the peak rate of
    // one worker at 50 µs ticks on 2 CPUs).
    let tick_ns = if alloc_iv.is_none() && !sh.credit_based {
        tick_ns.max(sample_ns)
    } else {
        tick_ns
    };
    let mut obs = vec![CoreObs::new(microsched_core::alloc::CoreState::Active); n];
    // The cores at the previous allocator tick, for policies that difference counters.
    let mut prev_obs = obs.clone();
    let mut series = ServerSeries::default();
    let mut halvings = 0u32;
    let (mut next_alloc, mut next_credit, mut next_sample) = (
        alloc_iv.unwrap_or(u64::MAX),
        credit_iv.unwrap_or(u64::MAX),
        sample_ns,
    );
    let mut reported_active = sh.active_cores() as u32;
    sh.rpc.lock().on_cores_changed(0, reported_active);
    let (mut ticks, mut alloc_ticks, mut grants, mut credit_updates) = (0u64, 0u64, 0u64, 0u64);
    let first = sh.clock.now();
    let cpu_start = crate::clock::thread_cpu_ns();
    let mut last_sample_t = first;
    let mut last_times = [0u64; 4];
    let mut last_be = 0u64;
    let mut msgs = Vec::new();
    let mut buf = [0u8; 2048];
    let mut last_expiry = first;
    let (mut tick_start, mut tick_cpu) = (None, crate::clock::WakeupCpuMeter::default());
    let mut alloc_calls = AllocCalls::default();
    let mut policy_error = None;
    while !sh.stop.load(Ordering::Relaxed) {
        ticks += 1;
        // A policy written in Python failed (its exception, or a decision out of bounds): the
        // server stops and reports it rather than running on with neutral decisions.
        if microsched_core::plugin::failed() {
            policy_error = microsched_core::plugin::take_failure();
            sh.stop.store(true, Ordering::Relaxed);
            break;
        }
        // Nobody polls the socket: receive for the cores.
        let searching = |sh: &Shared| sh.cores.iter().any(|c| c.parker.phase() == Phase::Search);
        // (With a dispatcher thread, it alone receives.)
        if sh.dispatch.is_none() && !searching(&sh) {
            crate::server::poll_socket(&sh, &mut sched, RX_DRAIN, &mut buf, &mut msgs);
        }
        let now = sh.clock.now();
        // Observe. The shared queue (c-FCFS) is reported on core 0, as one queue of the server,
        // as the simulator reports it.
        let mut max_delay = 0;
        for (i, c) in sh.cores.iter().enumerate() {
            let t = c.parker.times(now);
            let (mut oldest, mut queued) = (c.oldest(), c.queued());
            let (mut enqueued_total, mut dequeued_total) =
                (c.enqueued_total.load(Ordering::Relaxed), c.dequeued_total.load(Ordering::Relaxed));
            if i == 0 {
                // The shared queue is reported on core 0, its turnover too (as the simulator
                // does): without it Shenango never saw a central queue's standing items.
                if let Some(s) = sh.shared.stamps.oldest() {
                    oldest = Some(oldest.map_or(s, |o| o.min(s)));
                }
                queued += sh.shared.stamps.len();
                let (pushed, taken) = sh.shared.stamps.totals();
                enqueued_total += pushed;
                dequeued_total += taken;
            }
            if let Some(o) = oldest {
                max_delay = max_delay.max(now.saturating_sub(o));
            }
            obs[i] = CoreObs {
                state: c.parker.phase().core_state(),
                queued: queued.min(u32::MAX as u64) as u32,
                oldest_enqueued_at: oldest,
                enqueued_total,
                dequeued_total,
                busy_ns: t[0],
                search_ns: t[1],
            };
        }
        sh.delay_ns.store(max_delay, Ordering::Relaxed);
        // Idle sessions expire (a scan of the slots, so a few times per idle period only).
        if now.saturating_sub(last_expiry) >= (sh.session_idle_ns / 4).max(1_000_000) {
            last_expiry = now;
            let n = sh.rpc.lock().expire_idle(now, sh.session_idle_ns);
            sh.counters.expired_sessions.fetch_add(n as u64, Ordering::Relaxed);
        }
        // Core allocation.
        if now >= next_alloc {
            alloc_ticks += 1;
            for c in &sh.cores {
                c.yield_requested.store(false, Ordering::Relaxed);
            }
            let call_start = sh.clock.now();
            let action = sh.alloc.lock().tick(&SliceView { now, cores: &obs, prev: &prev_obs });
            alloc_calls.record(sh.clock.now().saturating_sub(call_start), alloc_iv);
            prev_obs.copy_from_slice(&obs);
            match action {
                AllocAction::Nothing => {}
                AllocAction::Grant => {
                    // A parked core with queued work first, else any parked core.
                    let pick = (0..n)
                        .filter(|&i| sh.cores[i].parker.phase() == Phase::Parked)
                        .max_by_key(|&i| (sh.cores[i].queued() > 0, std::cmp::Reverse(i)));
                    if let Some(i) = pick {
                        if sh.cores[i].parker.grant(now) {
                            grants += 1;
                        }
                    }
                }
                AllocAction::Yield(core) => {
                    if let Some(c) = sh.cores.get(core as usize) {
                        c.yield_requested.store(true, Ordering::Release);
                    }
                }
            }
            next_alloc = advance(next_alloc, alloc_iv.unwrap_or(u64::MAX), now);
        }
        // Credits.
        {
            let mut rpc = sh.rpc.lock();
            let active = sh.active_cores() as u32;
            if active != reported_active {
                reported_active = active;
                rpc.on_cores_changed(now, active);
            }
            if now >= next_credit {
                rpc.on_timer(now, max_delay);
                credit_updates += 1;
                next_credit = advance(next_credit, credit_iv.unwrap_or(u64::MAX), now);
            }
            rpc.wakeups(&mut msgs);
        }
        for m in msgs.drain(..) {
            sh.send_credit(m);
        }
        if let Some(t) = sh.trace.get() {
            trace_counters(&sh, t, now, max_delay);
        }
        // Time series.
        if now >= next_sample {
            let mut times = [0u64; 4];
            for c in &sh.cores {
                let t = c.parker.times(now);
                for k in 0..4 {
                    times[k] += t[k];
                }
            }
            let queued = sh.queued();
            let dt = now.saturating_sub(last_sample_t).max(1) as f64;
            let d = |k: usize| times[k].saturating_sub(last_times[k]) as f64 / dt;
            series.unix_ns.push(sh.clock.start_unix_ns() + now);
            series.cols.t_ms.push(now as f64 / 1e6);
            series.cols.cores_allocated.push(d(0) + d(1) + d(3));
            series.cores_waking.push(d(3));
            series.cols.cores_busy.push(d(0));
            series.cols.cores_parked.push(d(2));
            series.cols.queue_len.push(queued as f64);
            series.cols.oldest_delay_us.push(max_delay as f64 / 1e3);
            series
                .cols
                .alloc_signal
                .push(sh.alloc.lock().signal().unwrap_or(f64::NAN));
            let st = sh.rpc.lock().stats();
            series
                .cols
                .credit_pool
                .push(st.map_or(f64::NAN, |s| s.pool as f64));
            series
                .cols
                .credits_issued
                .push(st.map_or(f64::NAN, |s| s.issued as f64));
            series
                .cols
                .drained_sessions
                .push(st.map_or(f64::NAN, |s| s.drained as f64));
            let be = be_ops.as_ref().map_or(0, |c| c.load(Ordering::Relaxed));
            series
                .be_ops_per_s
                .push(be.saturating_sub(last_be) as f64 / dt * 1e9);
            series.core_ns.push(times);
            series.be_ops.push(be);
            series
                .completed
                .push(sh.counters.completed.load(Ordering::Relaxed));
            last_be = be;
            last_times = times;
            last_sample_t = now;
            // Bounded memory: at the row limit, half the rows at twice the interval.
            if series.len() >= MAX_SERIES_ROWS {
                series.halve();
                sample_ns = sample_ns.saturating_mul(2);
                halvings += 1;
            }
            next_sample = advance(next_sample, sample_ns, now);
        }
        // `tick_us` is the controller's period: duties due more often (Caladan's 5 µs allocator
        // interval, made for an IOKernel with a core of its own) run once per tick. Waking at
        // their own rate, a controller sharing 2 CPUs with the workers took so much of them
        // that CoreSync at 2× load lost half its goodput to static allocation (6.6 k vs 13 k
        // req/s); at 50 µs ticks the two match.
        let next = now + tick_ns;
        let now2 = sh.clock.now();
        // Each tick is a wake-up: its CPU from one sleep's start to the next.
        let cpu_now = crate::clock::thread_cpu_ns();
        if let Some(start) = tick_start.replace(cpu_now) {
            tick_cpu.add(cpu_now.saturating_sub(start));
        }
        if next > now2 {
            let d = Duration::from_nanos(next - now2);
            if sh.dispatch.is_some() || searching(&sh) {
                std::thread::sleep(d);
            } else {
                crate::server::wait_readable(&sh.sock, d);
            }
        }
    }
    let elapsed = sh.clock.now().saturating_sub(first);
    ControlOut {
        series_info: SeriesInfo {
            rows: series.len() as u64,
            max_rows: MAX_SERIES_ROWS as u64,
            interval_ms: sample_ns as f64 / 1e6,
            halvings,
        },
        series,
        report: ControllerReport {
            target_tick_us: tick_ns as f64 / 1e3,
            ticks,
            mean_tick_us: if ticks > 0 {
                elapsed as f64 / ticks as f64 / 1e3
            } else {
                0.0
            },
            alloc_ticks,
            realtime,
            cpu_ms: crate::clock::thread_cpu_ns().saturating_sub(cpu_start) as f64 / 1e6,
            tick_cpu: tick_cpu.get(),
            credit_updates,
            mean_credit_period_us: if credit_updates > 0 {
                elapsed as f64 / credit_updates as f64 / 1e3
            } else {
                0.0
            },
            alloc_call_us_mean: if alloc_calls.calls > 0 { alloc_calls.total_ns as f64 / alloc_calls.calls as f64 / 1e3 } else { 0.0 },
            alloc_call_us_max: alloc_calls.max_ns as f64 / 1e3,
            alloc_overruns: alloc_calls.overruns,
            policy_error,
        },
        grants,
    }
}

/// How long the allocator's `tick` took: a policy slower than its own interval (a Python one,
/// say) cannot decide as often as it asks to, and the report says so instead of hiding it.
#[derive(Default)]
struct AllocCalls {
    calls: u64,
    total_ns: u64,
    max_ns: u64,
    /// Calls longer than the allocator's interval.
    overruns: u64,
}

impl AllocCalls {
    fn record(&mut self, took: Nanos, interval: Option<Nanos>) {
        self.calls += 1;
        self.total_ns += took;
        self.max_ns = self.max_ns.max(took);
        self.overruns += interval.is_some_and(|iv| took > iv) as u64;
    }
}

/// The next deadline of a periodic duty after `now` (skipping missed periods).
fn advance(deadline: Nanos, period: Nanos, now: Nanos) -> Nanos {
    if period == u64::MAX {
        return u64::MAX;
    }
    let next = deadline.saturating_add(period);
    if next > now {
        next
    } else {
        now + period
    }
}

/// The counters of a traced server's timeline, at each controller tick.
#[cold]
fn trace_counters(sh: &Shared, t: &crate::trace::TraceSink, now: Nanos, max_delay: Nanos) {
    let (mut parked, mut busy) = (0, 0);
    for c in &sh.cores {
        match c.parker.phase() {
            Phase::Parked => parked += 1,
            Phase::Busy => busy += 1,
            _ => {}
        }
    }
    let credits = sh.rpc.lock().stats().map(|s| (s.pool, s.issued));
    t.counters(now, sh.cores.len() - parked, busy, sh.queued(), max_delay, credits);
}
