//! What the server counts and reports: per-reason rejection counters (every datagram that is not
//! served is counted under exactly one reason), request counters, core time, the best-effort
//! co-tenant's work, and a time series sampled by the controller thread.

use std::sync::atomic::{AtomicU64, Ordering};

use microsched_core::timeseries::TimeSeries;
use serde::{Deserialize, Serialize};

macro_rules! counters {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $f:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Default)]
        pub struct $name { $($(#[$fm])* pub $f: AtomicU64,)* }
        impl $name {
            pub fn snapshot(&self) -> serde_json::Map<String, serde_json::Value> {
                let mut m = serde_json::Map::new();
                $(m.insert(stringify!($f).to_string(), self.$f.load(Ordering::Relaxed).into());)*
                m
            }
        }
    };
}

counters!(
    /// Server counters, bumped with relaxed atomics on the hot path.
    Counters {
        /// Datagrams received.
        datagrams,
        /// Malformed datagrams, by decoder reason.
        short, bad_magic, bad_version, unknown_kind, bad_length, bad_status,
        /// A token no live session has.
        unknown_token,
        /// A valid token from another address than its session's (spoofing).
        wrong_peer,
        /// A kind only the server sends (ConnectAck, Response, Credit).
        unexpected_kind,
        /// A connect when every session slot is taken (answered with `Full`).
        no_slot,
        /// A connect from a client already holding its most sessions (`--max-client-sessions`;
        /// answered with `Full`).
        client_cap,
        /// Connects over their client's rate (`--connect-rate`): dropped, unanswered.
        connect_rate_limited,
        /// Idle sessions evicted in favour of a client under its fair share of the slots.
        evicted_sessions,
        /// Sessions disconnected by the server after `runtime.session_idle_ms` of silence.
        expired_sessions,
        /// With a shared secret: a plain Connect (no MAC), never answered.
        unauthenticated,
        /// With a shared secret: an AuthConnect whose MAC is wrong, or stale, or replayed.
        bad_mac,
        /// A request of an unknown type or with a service time above the server's cap.
        bad_request,
        /// Requests with a valid token that reached the server: admitted + aqm_dropped + rejected_no_credit.
        requests,
        admitted,
        aqm_dropped,
        rejected_no_credit,
        completed,
        connects,
        disconnects,
        credit_requests,
        credit_messages,
        send_errors,
        /// Requests run as coroutines (they have a program, or the handler asked for one).
        coroutines,
        /// Yield points reached (the request went back to its worker's run queue).
        yields,
        /// Requests that gave up their worker at a preempt flag (time-slice preemption).
        preemptions,
        /// Quantum deadlines the timer found expired; those at which the policy let the request
        /// run another quantum (Synergy's conditional preemption); and the timer's lateness
        /// after the deadlines, summed (ns).
        quantum_expiries,
        avoided_preemptions,
        preempt_late_ns,
        /// Mutex acquisitions (lock steps reached).
        lock_acquisitions,
        /// Mutex acquisitions that found the mutex taken (the request waited off its worker).
        mutex_waits,
        /// Time those waiters spent waiting, summed (ns).
        mutex_wait_ns,
        /// Starts postponed because every coroutine stack was in use.
        stack_waits,
        /// Lock steps refused by `server.lock_control` (ASQM or try_lock).
        lock_drops,
        /// Failure replies sent for requests dropped inside the application (wire `LockDropped`).
        lock_dropped,
        /// Failure replies of requests dropped at worker start (`latency_budget_us`, wire
        /// `StartDropped`).
        start_dropped,
        /// Locks taken by a request after its failure reply (cleanups, never dropped).
        lock_cleanups,
        /// Lock waits that ended with the waiter's accumulated delay past the ASQM budget.
        waits_over_budget,
        /// Condition-variable waits (the waiter released its mutex and left its worker), the
        /// waiters a notify made runnable again, and `wait_if_uncongested` refusals.
        condvar_waits,
        condvar_wakeups,
        condvar_drops,
        // `condvar_items` (items the request programs' `signal` steps added) is counted once,
        // per condvar, as its `signals`: the snapshot sums them ([`crate::server`]).
    }
);

impl Counters {
    #[inline]
    pub fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
    /// Datagrams dropped as malformed or unauthorised (never trusted, never answered).
    pub fn rejected_total(&self) -> u64 {
        [
            &self.short,
            &self.bad_magic,
            &self.bad_version,
            &self.unknown_kind,
            &self.bad_length,
            &self.bad_status,
            &self.unknown_token,
            &self.wrong_peer,
            &self.unexpected_kind,
            &self.no_slot,
            &self.client_cap,
            &self.connect_rate_limited,
            &self.unauthenticated,
            &self.bad_mac,
            &self.bad_request,
        ]
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .sum()
    }
}

/// Server-side time series: one row per sample interval, values at the sample time or means
/// over the interval (cores). The simulator's columns are `cols` (the server fills t_ms, the core,
/// queue, allocator and credit columns; the client columns stay empty: the load generator has
/// them), flattened into the JSON; the rest only the real runtime has.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerSeries {
    /// Wall-clock time of each sample, ns since the Unix epoch (to align with the load generator).
    pub unix_ns: Vec<u64>,
    #[serde(flatten)]
    pub cols: TimeSeries,
    /// Granted cores not yet running (the real allocation delay), part of cores_allocated.
    pub cores_waking: Vec<f64>,
    pub be_ops_per_s: Vec<f64>,
    /// Cumulative core time per phase at the sample: busy, search, parked, waking (ns).
    pub core_ns: Vec<[u64; 4]>,
    /// Cumulative best-effort square roots at the sample.
    pub be_ops: Vec<u64>,
    /// Cumulative requests completed by the server at the sample.
    #[serde(default)]
    pub completed: Vec<u64>,
}

/// Rows the server's time series keeps at most: when it reaches them, adjacent rows are merged
/// pairwise ([`ServerSeries::halve`]) and the sample interval doubles, so that a server running
/// for days holds at most this many rows (about 1.2 MB) covering its whole run.
pub const MAX_SERIES_ROWS: usize = 8192;

impl ServerSeries {
    pub fn len(&self) -> usize {
        self.unix_ns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.unix_ns.is_empty()
    }

    /// Merges rows pairwise (a last odd row stays as it is): cumulative counters and values taken
    /// at the sample time keep the later row's value (as if sampled half as often); means over
    /// the interval (cores, best-effort rate) become the mean over both intervals, weighted by
    /// their lengths. The rows keep their meaning at twice the interval.
    pub fn halve(&mut self) {
        let n = self.len();
        if n < 2 {
            return;
        }
        let pairs = n / 2;
        let keep = pairs + n % 2;
        let t = &self.cols.t_ms;
        let dt: Vec<f64> = (0..n).map(|i| if t.len() == n { t[i] - if i == 0 { 0.0 } else { t[i - 1] } } else { 1.0 }).collect();
        fn later<T: Copy>(v: &mut Vec<T>, n: usize, pairs: usize, keep: usize) {
            if v.len() != n {
                return;
            }
            for j in 0..pairs {
                v[j] = v[2 * j + 1];
            }
            if keep > pairs {
                v[pairs] = v[n - 1];
            }
            v.truncate(keep);
        }
        let mean = |v: &mut Vec<f64>| {
            if v.len() != n {
                return;
            }
            for j in 0..pairs {
                let (a, b, wa, wb) = (v[2 * j], v[2 * j + 1], dt[2 * j].max(0.0), dt[2 * j + 1].max(0.0));
                v[j] = match (a.is_finite(), b.is_finite()) {
                    (true, true) if wa + wb > 0.0 => (a * wa + b * wb) / (wa + wb),
                    (true, true) => (a + b) / 2.0,
                    (true, false) => a,
                    (false, _) => b,
                };
            }
            if keep > pairs {
                v[pairs] = v[n - 1];
            }
            v.truncate(keep);
        };
        let c = &mut self.cols;
        for v in [&mut c.cores_allocated, &mut c.cores_busy, &mut c.cores_parked, &mut self.cores_waking, &mut self.be_ops_per_s] {
            mean(v);
        }
        for v in [
            &mut c.t_ms,
            &mut c.queue_len,
            &mut c.oldest_delay_us,
            &mut c.alloc_signal,
            &mut c.credit_pool,
            &mut c.credits_issued,
            &mut c.drained_sessions,
            // The client's columns stay empty on the server; merged the same way if not.
            &mut c.arrivals,
            &mut c.completions,
            &mut c.drops,
            &mut c.throughput_rps,
            &mut c.offered_rps,
            &mut c.in_system,
            &mut c.client_queued,
        ] {
            later(v, n, pairs, keep);
        }
        later(&mut self.unix_ns, n, pairs, keep);
        later(&mut self.core_ns, n, pairs, keep);
        later(&mut self.be_ops, n, pairs, keep);
        later(&mut self.completed, n, pairs, keep);
    }
}

/// What the server's time series holds (printed instead of the series itself: `serve --json`
/// reports this, `serve --series FILE` writes the rows).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SeriesInfo {
    pub rows: u64,
    pub max_rows: u64,
    /// The interval between rows (ms): `metrics.sample_interval_us` (at least 1 ms), doubled at
    /// each halving.
    pub interval_ms: f64,
    /// Times the rows were merged pairwise to stay within `max_rows`.
    pub halvings: u32,
}

/// The limits the server ran with.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Limits {
    /// Connects had to prove the shared secret (`MICROSCHED_SECRET`).
    pub authentication: bool,
    /// Largest service time a request could ask for (µs).
    pub max_service_us: f64,
    /// Session slots, the most one client could hold, its Connect rate and burst, how long a
    /// session had to be idle to be evicted for a newcomer, and to expire.
    pub sessions: u32,
    pub max_client_sessions: u32,
    pub connect_rate_per_s: f64,
    pub connect_burst: f64,
    pub evict_idle_ms: f64,
    pub session_idle_ms: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CoreReport {
    pub max: u32,
    pub allocated_mean: f64,
    pub busy_mean: f64,
    pub parked_mean: f64,
    pub waking_mean: f64,
    /// busy, search, parked, waking: ns over the whole run, summed over cores.
    pub busy_ns: u64,
    pub search_ns: u64,
    pub parked_ns: u64,
    pub waking_ns: u64,
    pub total_ns: u64,
    /// Core grants carried out, parks.
    pub grants: u64,
    pub parks: u64,
    /// Parks decided while some session held no credits (counted at the decision, under the
    /// RPC lock; CoreSync's rule (1) forbids them).
    #[serde(default)]
    pub parks_while_drained: u64,
    /// Requests run per worker.
    pub completed_per_worker: Vec<u64>,
    /// The measured core wake-up latency: grant to the worker running again, over all workers
    /// (`None` without any wake-up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_us: Option<WakeReport>,
}

/// The runtime's core wake-up latencies (µs), as `server.wake_latency` can take them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct WakeReport {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl WakeReport {
    pub fn from_histogram(h: &hdrhistogram::Histogram<u64>) -> Option<Self> {
        (!h.is_empty()).then(|| WakeReport {
            count: h.len(),
            mean: h.mean() / 1e3,
            p50: h.value_at_quantile(0.5) as f64 / 1e3,
            p99: h.value_at_quantile(0.99) as f64 / 1e3,
            max: h.max() as f64 / 1e3,
        })
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BeReport {
    pub threads: u32,
    /// Whether the threads run under SCHED_IDLE (else nice 19).
    pub sched_idle: bool,
    pub ops: u64,
    pub ops_per_s: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ControllerReport {
    pub target_tick_us: f64,
    pub ticks: u64,
    /// Mean real period between ticks.
    pub mean_tick_us: f64,
    pub alloc_ticks: u64,
    /// Whether the controller thread got `SCHED_FIFO` (`runtime.realtime`).
    #[serde(default)]
    pub realtime: bool,
    /// The controller thread's own CPU time (user + system), ms: on one machine, CPU the
    /// workers do not get.
    #[serde(default)]
    pub cpu_ms: f64,
    /// Its CPU per tick (each tick is a wake-up from a sleep).
    #[serde(default)]
    pub tick_cpu: crate::clock::WakeupCpu,
    /// Pool updates of a periodic credit controller (Breakwater's `on_timer`), and their mean
    /// real period, µs (0 without one): at most one per tick, so the tick's length when the
    /// tick is longer than the controller's own period.
    #[serde(default)]
    pub credit_updates: u64,
    #[serde(default)]
    pub mean_credit_period_us: f64,
    /// The core allocator's `tick` calls: mean and longest time, µs, and how many took longer
    /// than the allocator's own interval (it then decides less often than it asks to).
    #[serde(default)]
    pub alloc_call_us_mean: f64,
    #[serde(default)]
    pub alloc_call_us_max: f64,
    #[serde(default)]
    pub alloc_overruns: u64,
    /// A policy written in Python failed and stopped the server: its error (the policy, the
    /// call, the value or the traceback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_error: Option<String>,
}

/// What `microsched serve` prints at the end (JSON).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerReport {
    pub addr: String,
    pub scenario: String,
    pub allocator: String,
    pub overload: String,
    /// The queueing policy (`d-fcfs+steal`, `d-fcfs`, `c-fcfs`).
    #[serde(default)]
    pub queue_policy: String,
    pub workers: u32,
    /// Whether each worker ran pinned to a CPU of its own (`runtime.pin_workers`).
    #[serde(default)]
    pub pinned_workers: bool,
    pub start_unix_ns: u64,
    pub duration_s: f64,
    /// Why the server stopped: "duration", "clients_gone", "stopped".
    pub stop_reason: String,
    pub counters: serde_json::Map<String, serde_json::Value>,
    /// Malformed or unauthorised datagrams, all reasons together.
    pub rejected_total: u64,
    /// Admitted requests still queued when the server stopped (never answered).
    pub abandoned: u64,
    /// Datagrams the kernel dropped at the server's socket (receive buffer full): never seen.
    #[serde(default)]
    pub kernel_drops: u64,
    pub cores: CoreReport,
    pub be: BeReport,
    pub controller: ControllerReport,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub timeseries_info: SeriesInfo,
    /// Left out of `serve --json` (written by `serve --series FILE`); `microsched real` merges
    /// it with the load generator's.
    #[serde(default)]
    pub timeseries: ServerSeries,
    /// Per lock family (whole run), with `server.lock_control`.
    #[serde(default)]
    pub locks: Vec<microsched_core::summary::LockSummary>,
    /// Per condition variable of the request programs (whole run), with `workload.condvars`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub condvars: Vec<microsched_core::summary::CondvarSummary>,
    /// The dispatcher thread's load and waiting, when the server runs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatcher: Option<crate::dispatcher::DispatcherReport>,
}

impl ServerReport {
    pub fn counter(&self, name: &str) -> u64 {
        self.counters
            .get(name)
            .and_then(|v| v.as_u64())
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rows` rows at 1 ms, as the controller samples them: 2 cores, one busy from 2 ms on.
    fn series(rows: usize) -> ServerSeries {
        let mut s = ServerSeries::default();
        for i in 1..=rows {
            let busy = if i > 2 { 1.0 } else { 0.0 };
            s.unix_ns.push(1_000_000 * i as u64);
            s.cols.t_ms.push(i as f64);
            s.cols.cores_allocated.push(2.0);
            s.cols.cores_busy.push(busy);
            s.cols.cores_parked.push(0.0);
            s.cols.queue_len.push(i as f64);
            s.cols.oldest_delay_us.push(0.0);
            s.cols.alloc_signal.push(f64::NAN);
            s.cols.credit_pool.push(f64::NAN);
            s.cols.credits_issued.push(f64::NAN);
            s.cols.drained_sessions.push(f64::NAN);
            s.cores_waking.push(0.0);
            s.be_ops_per_s.push(if i % 2 == 0 { 10.0 } else { f64::NAN });
            s.core_ns.push([i as u64 * 10, 0, 0, 0]);
            s.be_ops.push(i as u64);
            s.completed.push(100 * i as u64);
        }
        s
    }

    #[test]
    fn halving_keeps_the_meaning_of_every_column_at_twice_the_interval() {
        let mut s = series(5);
        s.halve();
        assert_eq!(s.len(), 3, "two pairs and the odd last row");
        assert_eq!(s.cols.t_ms, vec![2.0, 4.0, 5.0]);
        assert_eq!(s.unix_ns, vec![2_000_000, 4_000_000, 5_000_000]);
        // Interval means: the mean over both intervals.
        assert_eq!(s.cols.cores_busy, vec![0.0, 1.0, 1.0]);
        assert_eq!(s.cols.cores_allocated, vec![2.0; 3]);
        // Values at the sample time and cumulative counters: the later row's.
        assert_eq!(s.cols.queue_len, vec![2.0, 4.0, 5.0]);
        assert_eq!(s.completed, vec![200, 400, 500]);
        assert_eq!(s.core_ns.iter().map(|c| c[0]).collect::<Vec<_>>(), vec![20, 40, 50]);
        // A NaN beside a number leaves the number; NaN alone stays NaN.
        assert_eq!(s.be_ops_per_s[..2], [10.0, 10.0]);
        assert!(s.be_ops_per_s[2].is_nan() && s.cols.credit_pool.iter().all(|v| v.is_nan()));
        // The client's columns stay empty.
        assert!(s.cols.arrivals.is_empty() && s.cols.throughput_rps.is_empty());
        // Uneven intervals weigh by length: 1 ms at 0 busy, 3 ms at 1 busy.
        let mut u = series(2);
        u.cols.t_ms = vec![1.0, 4.0];
        u.cols.cores_busy = vec![0.0, 1.0];
        u.halve();
        assert_eq!(u.cols.cores_busy, vec![0.75]);
    }

    #[test]
    fn the_controllers_bound_holds_the_rows_and_the_span() {
        // What control.rs does at each sample: push, and halve at the limit.
        let mut s = ServerSeries::default();
        let mut interval = 1u64;
        let mut t = 0u64;
        let mut cap = 0;
        for _ in 0..200_000 {
            t += interval;
            let one = series(1);
            s.unix_ns.push(t);
            s.cols.t_ms.push(t as f64);
            for (v, w) in [(&mut s.cols.cores_busy, &one.cols.cores_busy), (&mut s.cores_waking, &one.cores_waking)] {
                v.extend_from_slice(w);
            }
            if s.len() >= MAX_SERIES_ROWS {
                s.halve();
                interval *= 2;
            }
            cap = cap.max(s.unix_ns.capacity());
        }
        assert!(s.len() < MAX_SERIES_ROWS && s.len() >= MAX_SERIES_ROWS / 2, "{}", s.len());
        assert!(cap <= MAX_SERIES_ROWS, "memory stays bounded: capacity {cap}");
        // The rows still cover the whole run at one interval.
        assert_eq!(*s.unix_ns.last().unwrap(), t);
        let d: Vec<u64> = s.unix_ns.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(d.iter().all(|&x| x == interval), "uniform interval {interval}");
        assert_eq!(s.cols.cores_busy.len(), s.len());
    }
}
