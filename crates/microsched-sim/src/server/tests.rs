//! Unit tests of the server mechanism that need its private state (core fields, queues, the
//! tick view's observations); end-to-end checks are the crate's `tests/`.

use super::*;
use microsched_core::alloc::{AllocView, CoreObs};
use microsched_core::sched::cfcfs::CentralFcfs;

fn one_core() -> Server {
    let preemption = Preemption { quantum: Nanos::MAX, ..Preemption::default() };
    let cfg = ServerCfg { max_cores: 1, dispatcher: None, steal_cost: 0, packet_cost: 0, alloc_delay: 0, preemption };
    Server::new(0, cfg, 1, Box::new(CentralFcfs), vec![])
}

#[test]
fn a_cancelled_slice_end_never_acts_on_the_next_request() {
    let (mut s, mut slab, mut evq) = (one_core(), Slab::default(), EventQueue::with_capacity(8));
    let a = slab.insert(Req { service: 1000, ..Req::default() }, 0);
    let b = slab.insert(Req { service: 300, ..Req::default() }, 1);
    s.arrive(a, 0, &mut slab, &mut evq);
    s.arrive(b, 100, &mut slab, &mut evq);
    // A is preempted at 400 with 600 ns left; B (queued since 100) runs next.
    assert_eq!(s.preempt_now(0, 400, &mut slab, &mut evq), SliceEnd::Freed);
    assert_eq!(s.find_work(0, 400, &mut slab, &mut evq), Idle::Working);
    assert_eq!(s.core(0).current, b);
    let mut finished = vec![];
    while let Some((t, ev)) = evq.pop() {
        let Event::CoreDone { core, gen, .. } = ev else { panic!("{ev:?}") };
        match s.slice_end(core, gen, t, &mut slab, &mut evq) {
            SliceEnd::Finished(r) => {
                finished.push((r, t));
                s.find_work(core, t, &mut slab, &mut evq);
            }
            SliceEnd::Stale => assert_eq!(t, 1000, "only A's cancelled slice end is stale"),
            other => panic!("{other:?} at {t}"),
        }
    }
    assert_eq!(finished, vec![(b, 700), (a, 1300)]);
    // A queued from 400 to 700 after its preemption; B from 100 to 400.
    assert_eq!((slab[a].queued_ns, slab[b].queued_ns), (300, 300));
    assert_eq!(s.counters.preemptions, 1);
}

/// The view's aggregates and tick snapshots against a full pass over the cores, through
/// arrivals, steals, grants, wake-ups, yields and parks at random.
#[test]
fn the_tick_view_agrees_with_a_scan_of_every_core() {
    use microsched_core::alloc::SliceView;
    use microsched_core::rng::stream;
    use microsched_core::sched::dfcfs::DistributedFcfs;
    use rand::Rng;

    let n = 6;
    let preemption = Preemption { quantum: Nanos::MAX, ..Preemption::default() };
    let cfg = ServerCfg { max_cores: n, dispatcher: None, steal_cost: 50, packet_cost: 0, alloc_delay: 300, preemption };
    let mut s = Server::new(0, cfg, 2, Box::new(DistributedFcfs::new(true, stream(1, "steal"))), vec![]);
    let (mut slab, mut evq, mut rng) = (Slab::default(), EventQueue::with_capacity(64), stream(1, "test"));
    let mut prev: Vec<CoreObs> = (0..n as u16).map(|i| s.alloc_view(0, &slab).obs(i)).collect();
    evq.push(0, Event::Generate { app: 0 });
    evq.push(1_000, Event::AllocTick { node: 0 });
    let (mut ticks, mut saw_queued) = (0, false);
    while let Some((t, ev)) = evq.pop() {
        match ev {
            Event::Generate { .. } if t < 400_000 => {
                let req = slab.insert(Req { service: rng.gen_range(100..3_000), flow: rng.gen(), ..Req::default() }, 0);
                s.arrive(req, t, &mut slab, &mut evq);
                evq.push(t + rng.gen_range(0..700), Event::Generate { app: 0 });
            }
            Event::CoreDone { core, gen, .. } => {
                if let SliceEnd::Finished(r) = s.slice_end(core, gen, t, &mut slab, &mut evq) {
                    slab.remove(r);
                    s.find_work(core, t, &mut slab, &mut evq);
                }
            }
            Event::StealDone { core, .. } => {
                s.steal_done(core, t, &mut slab, &mut evq);
            }
            Event::WakeDone { core, .. } => {
                s.wake_done(core, t, &mut slab, &mut evq);
            }
            Event::AllocTick { .. } if t < 400_000 => {
                let view = s.alloc_view(t, &slab);
                let cores: Vec<CoreObs> = (0..n as u16).map(|i| view.obs(i)).collect();
                let scan = SliceView { now: t, cores: &cores, prev: &prev };
                let state = |v: &dyn AllocView| {
                    let (mut queued, mut active, mut loads) = (vec![], vec![], vec![]);
                    v.for_each_queued(&mut |i, c| queued.push((i, *c)));
                    v.for_each_active(&mut |i, c| active.push((i, *c)));
                    v.for_each_active_load(&mut |i, l| loads.push((i, l)));
                    queued.sort_by_key(|e| e.0);
                    active.sort_by_key(|e| e.0);
                    loads.sort_by_key(|e| e.0);
                    let prev: Vec<_> = (0..n as u16)
                        .map(|i| v.prev(i))
                        .map(|p| (p.state, p.enqueued_total, p.busy_ns, p.search_ns))
                        .collect();
                    let counts = (v.active(), v.waking(), v.parked(), v.busy_search_totals());
                    (counts, v.max_delay(), v.parked_with_work(), queued, active, loads, prev)
                };
                assert_eq!(state(&view), state(&scan), "at {t}");
                assert_eq!(s.max_delay(t, &slab), scan.max_delay());
                let times = (0..n).fold([0; 5], |acc, i| {
                    let c = s.core(i as u16).times_at(t);
                    std::array::from_fn(|m| acc[m] + c[m])
                });
                assert_eq!(s.core_times(t), times);
                saw_queued |= !state(&scan).3.is_empty();
                s.mark_tick(t);
                prev = cores;
                ticks += 1;
                s.withdraw_yield_requests();
                match rng.gen_range(0..4) {
                    0 => {
                        s.grant(t, &mut evq);
                    }
                    1 if s.active_count() > 1 => s.request_yield(s.q.active.items[0], t),
                    2 if s.active_count() > 1 => {
                        if let Some(c) = s.first_spinner() {
                            s.park(c, t);
                        }
                    }
                    _ => {}
                }
                evq.push(t + rng.gen_range(500..1_500), Event::AllocTick { node: 0 });
            }
            _ => {}
        }
    }
    assert!(ticks > 200 && saw_queued, "{ticks} ticks");
}

/// A server of `workers` worker cores and a 100 ns dispatcher with the scenario's
/// `[policy.sched]` (2 µs quantum, costless preemption), fed random arrivals of 0.3–8 µs
/// (a share `long` of 40 µs) at `load` (of the workers); `check` runs after every event.
/// Returns how many requests finished on workers and on the dispatcher, and the latter's
/// service.
fn drive(workers: usize, load: f64, long: f64, sched: &str, mut check: impl FnMut(&Server, &Slab)) -> (u64, u64, Nanos) {
    use microsched_core::rng::stream;
    use microsched_core::scenario::{Format, Scenario};
    use rand::Rng;

    let toml = format!(
        "duration_ms = 10\n[load]\nfraction = 0.5\n[server]\nmax_cores = {}\n[server.dispatcher]\ncost_ns = 100\n[server.preemption]\nquantum_us = 2\n\
         [[workload.types]]\nname = \"t\"\nservice = {{ dist = \"constant\", value_us = 1 }}\n\
         [policy.allocator]\nkind = \"static\"\n[policy.sched]\n{sched}\n",
        workers + 1
    );
    let sc = Scenario::load(&toml, Format::Toml, std::path::Path::new("."), &[]).expect("valid").scenario;
    let cfg = ServerCfg {
        max_cores: workers,
        dispatcher: microsched_core::sched::dispatcher_costs(&sc),
        steal_cost: 0,
        packet_cost: 0,
        alloc_delay: 0,
        preemption: sc.server.preemption.build(),
    };
    let mut s = Server::new(0, cfg, workers, microsched_core::sched::build(&sc, 1).unwrap(), vec![]);
    let (mut slab, mut evq, mut rng) = (Slab::default(), EventQueue::with_capacity(64), stream(1, "test"));
    evq.push(0, Event::Generate { app: 0 });
    let (mut on_workers, mut on_dispatcher, mut generated, mut dispatcher_ns) = (0, 0, 0, 0);
    let mean = (1.0 - long) * 4_150.0 + long * 40_000.0;
    let gap = (mean / workers as f64 / load) as u64;
    while let Some((t, ev)) = evq.pop() {
        match ev {
            Event::Generate { .. } if t < 2_000_000 => {
                let service = if rng.gen_bool(long) { 40_000 } else { rng.gen_range(300..8_000) };
                let req = slab.insert(Req { service, ..Req::default() }, generated);
                generated += 1;
                s.arrive(req, t, &mut slab, &mut evq);
                evq.push(t + rng.gen_range(0..2 * gap), Event::Generate { app: 0 });
            }
            Event::DispatchDone { .. } => s.dispatch_done(t, &mut slab, &mut evq),
            Event::DispatcherWork { gen, .. } => {
                if let Some(r) = s.dispatcher_work(gen, t, &mut slab, &mut evq) {
                    dispatcher_ns += slab.remove(r).service;
                    on_dispatcher += 1;
                }
            }
            Event::CoreDone { core, gen, .. } | Event::OverheadDone { core, gen, .. } => {
                let end = if matches!(ev, Event::CoreDone { .. }) {
                    s.slice_end(core, gen, t, &mut slab, &mut evq)
                } else {
                    s.overhead_done(core, gen, t, &mut slab, &mut evq)
                };
                match end {
                    SliceEnd::Finished(r) => {
                        slab.remove(r);
                        on_workers += 1;
                        s.find_work(core, t, &mut slab, &mut evq);
                    }
                    SliceEnd::Freed => {
                        s.find_work(core, t, &mut slab, &mut evq);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        check(&s, &slab);
    }
    assert_eq!(on_workers + on_dispatcher, generated, "every request finishes once");
    assert_eq!(slab.live(), 0);
    assert_eq!((s.counters.dispatcher_requests, s.counters.dispatcher_work_ns), (on_dispatcher, dispatcher_ns));
    (on_workers, on_dispatcher, dispatcher_ns)
}

#[test]
fn concord_never_exceeds_its_jbsq_bound_and_its_dispatcher_works_in_its_slack() {
    for k in [1usize, 2, 3] {
        let mut full_seen = false;
        let (workers, dispatcher, _) = drive(4, 0.95, 0.05, &format!("kind = \"concord\"\njbsq = {k}"), |s, _| {
            let occupancy = |c: &Core| c.queue.len() + (c.current != NONE) as usize;
            for c in &s.q.cores {
                assert!(occupancy(c) <= k, "core {} holds {} > JBSQ({k})", c.id, occupancy(c));
            }
            // Central work waits only while every mailbox is full (the dispatcher pushes
            // as soon as a slot frees).
            if !s.q.shared.is_empty() {
                full_seen = true;
                for c in &s.q.cores {
                    assert_eq!(occupancy(c), k, "core {} has a free slot while {} wait centrally", c.id, s.q.shared.len());
                }
            }
        });
        assert!(full_seen, "JBSQ({k}): the central queue never held work");
        assert!(dispatcher > 0 && workers > 1000, "JBSQ({k}): {dispatcher} on the dispatcher, {workers} on workers");
    }
    // Without its slack work the dispatcher runs nothing.
    let (_, dispatcher, _) = drive(4, 0.95, 0.05, "kind = \"concord\"\ndispatcher_work = false", |_, _| {});
    assert_eq!(dispatcher, 0);
}

#[test]
fn tiny_quanta_never_serves_more_than_its_coroutines_on_a_worker() {
    for cap in [8, 3] {
        let mut most = 0;
        drive(3, 1.05, 0.5, &format!("kind = \"tiny_quanta\"\ncoroutines = {cap}"), |s, slab| {
            for c in &s.q.cores {
                // Requests on this worker that hold a coroutine and have run: its busy list
                // and the one it runs (none migrates).
                let busy = s.q.classes.get(c.id as usize).map_or(0, |q| q.len()) + (c.current != NONE) as usize;
                assert!(busy <= cap, "worker {} time-slices {busy} requests", c.id);
                assert!(c.queue.iter().all(|&r| !slab[r].started), "a started request back in the ring");
                most = most.max(busy);
            }
        });
        assert_eq!(most, cap, "the cap never bound");
    }
}

fn with_handlers(work: microsched_core::sched::irq::RequestWork) -> Server {
    use microsched_core::sched::irq::{Config, IrqSteering};
    let mut s = one_core();
    let cfg = Config { rate_per_s: 1000.0, cost_us: 0.5, steering: IrqSteering::IdleFirst, request_work: work, ..Config::default() };
    s.irq = Some(Box::new(cfg.build(1, microsched_core::rng::stream(1, "irq"))));
    s
}

/// Runs the queue's slice ends; returns (request, time) of each finished request.
fn drain(s: &mut Server, slab: &mut Slab, evq: &mut EventQueue) -> Vec<(u32, Nanos)> {
    let mut finished = vec![];
    while let Some((t, ev)) = evq.pop() {
        let Event::CoreDone { core, gen, .. } = ev else { panic!("{ev:?}") };
        if let SliceEnd::Finished(r) = s.slice_end(core, gen, t, slab, evq) {
            finished.push((r, t));
            s.find_work(core, t, slab, evq);
        }
    }
    finished
}

#[test]
fn an_idle_first_handler_takes_an_idle_core_and_a_request_starting_there_waits_for_it() {
    use microsched_core::sched::irq::RequestWork;
    let (mut s, mut slab, mut evq) = (with_handlers(RequestWork::Cpu), Slab::default(), EventQueue::with_capacity(8));
    s.handler_lands(0, &mut slab, &mut evq);
    let a = slab.insert(Req { service: 1000, ..Req::default() }, 0);
    s.arrive(a, 100, &mut slab, &mut evq);
    // The handler holds the core until 500: A waits 400 of it, then runs its 1000.
    assert_eq!(drain(&mut s, &mut slab, &mut evq), vec![(a, 1500)]);
    let irq = s.irq.as_ref().unwrap();
    assert_eq!((irq.in_service_ns, irq.idle_ns), (400, 100));
}

#[test]
fn on_a_busy_core_a_handler_stretches_cpu_work_but_a_clock_spin_only_past_its_end() {
    use microsched_core::sched::irq::RequestWork;
    // (work, handler arrivals, end of the 1000 ns request started at 0)
    for (work, at, end) in [
        (RequestWork::Cpu, vec![200], 1500),
        (RequestWork::Cpu, vec![200, 300], 2000),
        (RequestWork::WallClock, vec![200], 1000),
        (RequestWork::WallClock, vec![800], 1300),
        // The second handler queues behind the first: it ends at 200 + 500 + 500.
        (RequestWork::WallClock, vec![200, 300], 1200),
    ] {
        let (mut s, mut slab, mut evq) = (with_handlers(work), Slab::default(), EventQueue::with_capacity(8));
        let a = slab.insert(Req { service: 1000, ..Req::default() }, 0);
        s.arrive(a, 0, &mut slab, &mut evq);
        for &t in &at {
            s.handler_lands(t, &mut slab, &mut evq);
        }
        assert_eq!(drain(&mut s, &mut slab, &mut evq), vec![(a, end)], "{work:?} {at:?}");
        assert_eq!(s.irq.as_ref().unwrap().in_service_ns, end - 1000, "{work:?} {at:?}");
    }
}
