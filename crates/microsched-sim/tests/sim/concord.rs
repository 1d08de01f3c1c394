//! Concord against the policy it reduces to: with one mailbox slot per worker (JBSQ(1)) and no
//! work on the dispatcher it is c-FCFS behind the same dispatcher, preemption included, to the
//! bit. The JBSQ bound and the dispatcher's slack work are checked event by event in the
//! server's unit tests (`server::tests`).

use crate::common;

use common::run;

const BASE: &str = r#"
    duration_ms = 40
    warmup_ms = 5
    [server]
    max_cores = 5
    queue = "central"
    [server.dispatcher]
    cost_ns = 150
    [server.preemption]
    quantum_us = 5
    mechanism = "ci"
    [network]
    rtt_us = 10
    [clients]
    sessions = 64
    [load]
    fraction = 0.85
    [[workload.types]]
    name = "short"
    ratio = 0.9
    service = { dist = "constant", value_us = 1 }
    [[workload.types]]
    name = "long"
    ratio = 0.1
    service = { dist = "constant", value_us = 50 }
    [policy.allocator]
    kind = "static"
"#;

fn strip(mut s: microsched_core::summary::Summary) -> microsched_core::summary::Summary {
    s.sim.wall_s = 0.0;
    s.sim.requests_per_wall_s = 0.0;
    for sc in s.sched.iter_mut().chain(s.nodes.iter_mut().map(|n| &mut n.sched)) {
        sc.queue_policy.clear();
    }
    s
}

#[test]
fn concord_with_one_slot_and_an_idle_dispatcher_is_cfcfs_to_the_bit() {
    let cfcfs = run(BASE, &[], 7).summary;
    let concord = run(BASE, &["policy.sched.kind=concord", "policy.sched.jbsq=1", "policy.sched.dispatcher_work=false"], 7).summary;
    assert_eq!(concord.sched.as_ref().unwrap().queue_policy, "concord");
    assert!(cfcfs.sched.as_ref().unwrap().preemptions > 1000);
    assert_eq!(strip(cfcfs), strip(concord));
}

#[test]
fn concord_as_built_runs_requests_on_its_dispatcher_and_conserves_them() {
    let s = run(BASE, &["policy.sched.kind=concord"], 7).summary;
    let sc = s.sched.as_ref().unwrap();
    // The dispatcher runs a few requests itself (only when every mailbox is full and no worker
    // began a request in the last 0.5 µs), each to its end.
    assert!(sc.dispatcher_requests > 0, "{sc:?}");
    assert!(sc.dispatcher_work_ns > 0);
    let r = &s.requests;
    assert_eq!(r.generated, r.completed + r.dropped + r.in_flight);
    let ct = &s.core_time;
    assert_eq!(ct.busy_ns + ct.search_ns + ct.parked_ns + ct.transition_ns + ct.overhead_ns, ct.total_ns);
    // Without the slack work, nothing runs on the dispatcher (and the field is left out).
    let off = run(BASE, &["policy.sched.kind=concord", "policy.sched.dispatcher_work=false"], 7).summary;
    assert_eq!(off.sched.as_ref().unwrap().dispatcher_requests, 0);
}

#[test]
fn concord_needs_a_dispatcher_core() {
    let text = BASE.replace("[server.dispatcher]\n    cost_ns = 150\n", "");
    assert_ne!(text, BASE);
    let o = vec!["policy.sched.kind=concord".to_string()];
    let e = microsched_sim::Scenario::load(&text, microsched_sim::Format::Toml, std::path::Path::new("."), &o).expect_err("rejected");
    assert!(e.to_string().contains("policy.sched.kind") && e.to_string().contains("server.dispatcher"), "{e}");
}
