//! The load generator's summary completed with the server's report: core statistics over the
//! load generator's measured window (from the server's time series, aligned on wall-clock time),
//! core time, credit-pool means; plus a `runtime` section with what only the real runtime has
//! (rejection counters, best-effort throughput, the controller's real tick period, the client's
//! accounting). The summary keys are those of `microsched run`.

use microsched_core::summary::{AppSummary, CoreTime, Cores, NodeSummary, Sched, Summary};
use serde_json::{json, Value};

use crate::loadgen::LoadgenResult;
use crate::report::ServerReport;

/// The server's series over the load generator's measured window.
struct Window {
    allocated: f64,
    busy: f64,
    parked: f64,
    waking: f64,
    pool: f64,
    issued: f64,
    drained: f64,
    be_ops_per_s: f64,
    completed_per_s: f64,
}

/// Means of the server's series over the samples inside `[from, to]` (wall-clock ns), or over
/// all samples if none falls inside; rates of its cumulative counters over the same samples.
fn window(rep: &ServerReport, from: u64, to: u64) -> Window {
    let s = &rep.timeseries;
    let idx: Vec<usize> = (0..s.unix_ns.len())
        .filter(|&i| s.unix_ns[i] > from && s.unix_ns[i] <= to)
        .collect();
    let idx = if idx.is_empty() {
        (0..s.unix_ns.len()).collect()
    } else {
        idx
    };
    let mean = |v: &Vec<f64>| {
        let xs: Vec<f64> = idx
            .iter()
            .filter_map(|&i| v.get(i).copied())
            .filter(|x| x.is_finite())
            .collect();
        if xs.is_empty() {
            f64::NAN
        } else {
            xs.iter().sum::<f64>() / xs.len() as f64
        }
    };
    let (first, last) = (
        idx.first().copied().unwrap_or(0),
        idx.last().copied().unwrap_or(0),
    );
    let rate = |cum: &Vec<u64>| {
        (idx.len() >= 2 && cum.len() > last).then(|| {
            let dt = (s.unix_ns[last] - s.unix_ns[first]) as f64 / 1e9;
            (cum[last] - cum[first]) as f64 / dt.max(1e-9)
        })
    };
    Window {
        allocated: mean(&s.cols.cores_allocated),
        busy: mean(&s.cols.cores_busy),
        parked: mean(&s.cols.cores_parked),
        waking: mean(&s.cores_waking),
        pool: mean(&s.cols.credit_pool),
        issued: mean(&s.cols.credits_issued),
        drained: mean(&s.cols.drained_sessions),
        be_ops_per_s: rate(&s.be_ops).unwrap_or(rep.be.ops_per_s),
        completed_per_s: rate(&s.completed)
            .unwrap_or(rep.counter("completed") as f64 / rep.duration_s.max(1e-9)),
    }
}

/// The merged summary (same keys as the simulator's, plus `runtime`).
pub fn merge(lg: &LoadgenResult, rep: &ServerReport) -> Value {
    let mut s: Summary = lg.summary.clone();
    let (from, to) = lg.window_unix_ns;
    let w = window(rep, from, to);
    let or = |v: f64, d: f64| if v.is_finite() { v } else { d };
    // The controller sums each core's time shares read one core after the other, a few hundred
    // ns apart, so a sample can exceed the core count by a hair; a share of the cores above 1
    // would be read as a measurement, not the rounding it is.
    let allocated = or(w.allocated, rep.cores.allocated_mean).min(rep.cores.max as f64);
    s.allocator = rep.allocator.clone();
    s.overload = rep.overload.clone();
    s.cores = Cores {
        max: rep.cores.max,
        allocated_mean: allocated,
        busy_mean: or(w.busy, rep.cores.busy_mean),
        transition_mean: or(w.waking, rep.cores.waking_mean),
    };
    s.cpu_utilization = if rep.cores.max > 0 {
        allocated / rep.cores.max as f64
    } else {
        0.0
    };
    s.be_cores_mean = or(w.parked, rep.cores.parked_mean);
    s.core_time = CoreTime {
        busy_ns: rep.cores.busy_ns,
        search_ns: rep.cores.search_ns,
        parked_ns: rep.cores.parked_ns,
        transition_ns: rep.cores.waking_ns,
        overhead_ns: 0,
        total_ns: rep.cores.total_ns,
    };
    if let Some(c) = s.credits.as_mut() {
        c.pool_mean = or(w.pool, 0.0);
        c.issued_mean = or(w.issued, 0.0);
        c.drained_mean = or(w.drained, 0.0);
        c.credit_messages = rep.counter("credit_messages");
    }
    // The server's counters cover its whole run, warm-up and drain included (it keeps no
    // per-request log to cut them to the measured window as the simulator does).
    let lock_waits = rep.counter("mutex_waits");
    s.sched = Some(Sched {
        queue_policy: rep.queue_policy.clone(),
        preemptions: rep.counter("preemptions"),
        avoided_preemptions: rep.counter("avoided_preemptions"),
        yields: rep.counter("yields"),
        lock_acquisitions: rep.counter("lock_acquisitions"),
        lock_waits,
        lock_wait_us_mean: if lock_waits > 0 {
            rep.counter("mutex_wait_ns") as f64 / lock_waits as f64 / 1e3
        } else {
            0.0
        },
        preempt_send_ns: 0,
        // The dispatcher thread's load, under the simulator's keys (over the whole run).
        dispatcher: rep.dispatcher.as_ref().map(|d| d.load),
        dispatcher_requests: rep.dispatcher.as_ref().map_or(0, |d| d.requests),
        dispatcher_work_ns: rep.dispatcher.as_ref().map_or(0, |d| d.work_ns),
        ..Sched::default()
    });
    // One application on one node: their sections repeat the flat keys, so tooling that reads
    // per-application and per-node results works on real runs too.
    s.applications = vec![AppSummary {
        name: s.scenario.clone(),
        slo_us: s.slo_us,
        offered_rps: s.offered_rps,
        throughput_rps: s.throughput_rps,
        goodput_rps: s.goodput_rps,
        drop_rate: s.drop_rate,
        latency_us: s.latency_us.clone(),
        queueing_delay_us: s.queueing_delay_us.clone(),
        slowdown: s.slowdown.clone(),
        by_type: s.by_type.clone(),
        requests: s.requests.clone(),
        retries: lg.client.measured_retries,
    }];
    s.nodes = vec![NodeSummary {
        node: 0,
        cores: s.cores.clone(),
        cpu_utilization: s.cpu_utilization,
        be_cores_mean: s.be_cores_mean,
        core_time: s.core_time.clone(),
        sched: s.sched.clone().unwrap_or_default(),
        credits: s.credits.clone(),
        harvest: None,
        irq: None,
        parking: s.parking,
    }];
    // Per-lock statistics are the server's, over its whole run (see above).
    if let Some(l) = s.lock_control.as_mut() {
        l.locks = rep.locks.clone();
    }
    // So are the per-condvar ones (the client sees no condvar).
    s.condvars = rep.condvars.clone();
    let mut v = serde_json::to_value(&s).expect("summary serialises");
    let server_requests = rep.counter("requests");
    // The servers count every failure reply they sent, retried ones included; so does
    // `failure_replies` (from a result without it, the outcome counters: no retries then).
    let fr = &lg.client.failure_replies;
    let replies = |all: u64, last: u64| if lg.client.retries > 0 { all } else { all.max(last) };
    let (aqm, rejected) = (replies(fr.aqm_dropped, lg.client.aqm_dropped), replies(fr.rejected, lg.client.rejected));
    let (lock, start) = (replies(fr.lock_dropped, lg.client.lock_dropped), replies(fr.start_dropped, lg.client.start_dropped));
    let harness = crate::harness::Harness::of(&lg.client, rep);
    v["runtime"] = json!({
        "addr": lg.addr,
        "client": lg.client,
        "server": {
            "counters": rep.counters,
            "rejected_total": rep.rejected_total,
            "abandoned": rep.abandoned,
            "duration_s": rep.duration_s,
            // The server's own throughput over the measured window: with no overload control
            // and an offered load above it, the capacity (the client's throughput_rps misses the
            // responses that came after their request timed out).
            "completed_rps": w.completed_per_s,
            "stop_reason": rep.stop_reason,
            "cores": rep.cores,
            "pinned_workers": rep.pinned_workers,
            "controller": rep.controller,
        },
        // The load generator's and the controller's CPU on the workers' machine, and the
        // simulator overrides that replay it (docs/runtime.md, "The simulator against the runtime").
        "harness": {
            "measured": harness,
            "sim_overrides": harness.sim_overrides(),
        },
        "be": {
            "threads": rep.be.threads,
            "sched_idle": rep.be.sched_idle,
            "ops_per_s": w.be_ops_per_s,
            "ops_per_s_whole_run": rep.be.ops_per_s,
        },
        // Requests the client put on the wire vs. those the server received with a valid token.
        "accounting": {
            "client_sent": lg.client.sent,
            "server_requests": server_requests,
            "client_completed": lg.client.completed,
            "server_completed": rep.counter("completed"),
            "client_aqm_dropped": lg.client.aqm_dropped,
            "server_aqm_dropped": rep.counter("aqm_dropped"),
            "client_rejected": lg.client.rejected,
            "client_lock_dropped": lg.client.lock_dropped,
            "server_lock_dropped": rep.counter("lock_dropped"),
            "client_start_dropped": lg.client.start_dropped,
            "server_start_dropped": rep.counter("start_dropped"),
            "server_rejected_no_credit": rep.counter("rejected_no_credit"),
            "server_kernel_drops": rep.kernel_drops,
            "client_kernel_drops": lg.client.kernel_drops,
            "client_conserved": lg.client.conserved(),
            // Failure replies received, retried ones included (the servers' count).
            "client_failure_replies": fr,
            // Every request the client sent reached the server, or the kernel dropped it at
            // the server's full socket buffer (counted, not attributable per request).
            "agree": lg.client.sent >= server_requests
                && lg.client.sent <= server_requests + rep.kernel_drops
                && aqm == rep.counter("aqm_dropped")
                && rejected == rep.counter("rejected_no_credit")
                && lock + lg.client.late_responses + lg.client.in_flight_end + lg.client.kernel_drops
                    >= rep.counter("lock_dropped")
                && start + lg.client.late_responses + lg.client.in_flight_end + lg.client.kernel_drops
                    >= rep.counter("start_dropped")
                && lg.client.completed + lg.client.late_responses + lg.client.in_flight_end + lg.client.kernel_drops
                    >= rep.counter("completed"),
        },
    });
    v
}

/// The merged summary of a run on several replicas (`server.replicas`, `reports` in `--addr`
/// order): [`merge`] with the servers' counters added up (so `runtime.accounting` compares the
/// client with all of them), one `nodes` entry per replica, the flat `cores`, `core_time`,
/// `cpu_utilization` and `be_cores_mean` their totals (as the simulator's), and
/// `runtime.servers` each replica's own server section. One report: [`merge`] itself.
pub fn merge_replicas(lg: &LoadgenResult, reports: &[ServerReport]) -> Value {
    let [first, rest @ ..] = reports else {
        panic!("merge_replicas needs a report");
    };
    if rest.is_empty() {
        return merge(lg, first);
    }
    let per: Vec<Value> = reports.iter().map(|r| merge(lg, r)).collect();
    let mut total = first.clone();
    for r in rest {
        for (k, v) in &r.counters {
            if let (Some(a), Some(b)) = (total.counters.get(k).and_then(Value::as_u64), v.as_u64()) {
                total.counters.insert(k.clone(), json!(a + b));
            }
        }
        total.kernel_drops += r.kernel_drops;
        total.rejected_total += r.rejected_total;
        total.abandoned += r.abandoned;
    }
    let mut v = merge(lg, &total);
    let nodes: Vec<Value> = per
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut n = m["nodes"][0].clone();
            n["node"] = json!(i);
            n
        })
        .collect();
    // The totals are the simulator's merge of its nodes (`NodeSummary::add`).
    let each: Vec<NodeSummary> = nodes
        .iter()
        .map(|n| serde_json::from_value(n.clone()).expect("a replica's node section is a NodeSummary"))
        .collect();
    let mut total = each[0].clone();
    for (k, n) in each[1..].iter().enumerate() {
        total.add(n, k + 1);
    }
    v["cores"] = json!(total.cores);
    v["core_time"] = json!(total.core_time);
    let max = total.cores.max as f64;
    v["cpu_utilization"] = json!(if max > 0.0 { total.cores.allocated_mean / max } else { 0.0 });
    v["be_cores_mean"] = json!(total.be_cores_mean);
    v["nodes"] = Value::Array(nodes);
    v["runtime"]["servers"] = Value::Array(
        per.iter()
            .zip(reports)
            .map(|(m, r)| {
                let mut s = m["runtime"]["server"].clone();
                s["addr"] = json!(r.addr);
                s
            })
            .collect(),
    );
    v
}

/// Server columns resampled onto the load generator's series (nearest earlier server sample),
/// for one merged time series with the simulator's column names.
pub fn merged_series(lg: &LoadgenResult, rep: &ServerReport) -> Vec<(&'static str, Vec<f64>)> {
    let c = &lg.timeseries;
    let s = &rep.timeseries;
    let pick = |col: &Vec<f64>| -> Vec<f64> {
        c.unix_ns
            .iter()
            .map(|&t| {
                let i = s.unix_ns.partition_point(|&u| u <= t);
                if i == 0 {
                    f64::NAN
                } else {
                    col.get(i - 1).copied().unwrap_or(f64::NAN)
                }
            })
            .collect()
    };
    let mut ts = c.cols.clone();
    ts.cores_allocated = pick(&s.cols.cores_allocated);
    ts.cores_busy = pick(&s.cols.cores_busy);
    ts.cores_parked = pick(&s.cols.cores_parked);
    ts.queue_len = pick(&s.cols.queue_len);
    ts.oldest_delay_us = pick(&s.cols.oldest_delay_us);
    ts.alloc_signal = pick(&s.cols.alloc_signal);
    ts.credit_pool = pick(&s.cols.credit_pool);
    ts.credits_issued = pick(&s.cols.credits_issued);
    ts.drained_sessions = pick(&s.cols.drained_sessions);
    // The runtime does not count park attempts per sample: the columns are there, unknown.
    let unknown = vec![f64::NAN; c.unix_ns.len()];
    ts.park_attempts = unknown.clone();
    ts.park_vetoes = unknown.clone();
    ts.parks = unknown.clone();
    ts.wakeups = unknown;
    let mut out = ts.into_columns();
    out.push(("be_ops_per_s", pick(&s.be_ops_per_s)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loadgen::{ClientCounters, ClientSeries};
    use microsched_core::summary::Summary;

    /// With retries a failure reply is not a request's end: the client's outcome counters
    /// miss the retried ones the servers counted, and `agree` once said false on every run
    /// with a retried drop. It compares every failure reply now.
    #[test]
    fn accounting_agrees_with_retried_failures() {
        let mut client = ClientCounters { sent: 10, completed: 8, aqm_dropped: 1, retries: 3, ..Default::default() };
        client.failure_replies.aqm_dropped = 4;
        let lg = LoadgenResult {
            summary: Summary::default(),
            client,
            timeseries: ClientSeries::default(),
            latency_cdf: (vec![], vec![]),
            window_unix_ns: (0, 0),
            addr: String::new(),
            records: None,
        };
        let mut reps = vec![ServerReport::default(), ServerReport::default()];
        for (r, (req, done, aqm)) in reps.iter_mut().zip([(6u64, 5u64, 1u64), (4, 3, 3)]) {
            r.counters.insert("requests".into(), json!(req));
            r.counters.insert("completed".into(), json!(done));
            r.counters.insert("aqm_dropped".into(), json!(aqm));
            r.cores.max = 1;
        }
        let m = merge_replicas(&lg, &reps);
        assert_eq!(m["runtime"]["accounting"]["agree"], json!(true), "{}", m["runtime"]["accounting"]);
        assert_eq!(m["runtime"]["accounting"]["server_aqm_dropped"], json!(4));
        assert_eq!(m["nodes"].as_array().unwrap().len(), 2);
        assert_eq!(m["cores"]["max"], json!(2));
        assert_eq!(m["applications"][0]["retries"], json!(0), "measured_retries is the window's (none here)");
        // A miscount is still caught: one drop the client never saw.
        reps[1].counters.insert("aqm_dropped".into(), json!(4));
        assert_eq!(merge_replicas(&lg, &reps)["runtime"]["accounting"]["agree"], json!(false));
    }

    /// The controller's time shares, summed core by core, can come out a hair above the core
    /// count; `real` printed "CPU utilization (LC share) 100.006 %". The share is at most 1.
    #[test]
    fn cores_allocated_share_never_exceeds_one() {
        let lg = LoadgenResult {
            summary: Summary::default(),
            client: ClientCounters::default(),
            timeseries: ClientSeries::default(),
            latency_cdf: (vec![], vec![]),
            window_unix_ns: (0, 0),
            addr: String::new(),
            records: None,
        };
        let mut rep = ServerReport::default();
        rep.cores.max = 2;
        rep.cores.allocated_mean = 2.000_12;
        let m = merge(&lg, &rep);
        let share = m["cpu_utilization"].as_f64().unwrap();
        assert!(share <= 1.0, "{share}");
        assert!(m["cores"]["allocated_mean"].as_f64().unwrap() <= 2.0, "{}", m["cores"]);
    }
}
