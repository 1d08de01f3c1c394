"""Runs the simulation study's own simulator (estuhr1206/scheduling-policies-sim, branch
breakwater) on its Fig. 1 sequence (load 0.2 -> 1.2 -> 0.5 -> 1.2, four equal phases), baseline
and fix (`ramp_alpha`), and prints per-phase throughput, drops and cores as JSON.

Usage: python3 tools/study_sim_fig1.py SIM_DIR DURATION_MS {baseline,fix} [SEED_NAME]

SIM_DIR is the simulator's `sim/` directory (git archive of the branch). The configuration is
the repository's configs/test_config.json with RTT 30 µs (the study's Fig. 1) and the simulated
duration given (the paper runs 100 ms; the phases are each a quarter of it). Pure Python: about
1-2 µs of simulated time per wall second per 32 cores at these loads, so scale the duration.
"""
import json
import sys
import time


def main():
    sim_dir, dur_ms, variant = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    name = sys.argv[4] if len(sys.argv) > 4 else "fig1"
    sys.path.insert(0, sim_dir)
    from sim_config import SimConfig
    from simulation import Simulation

    with open(f"{sim_dir}/../configs/test_config.json") as f:
        cfg = json.load(f)
    cfg.update({
        "RTT": 30000,
        "sim_duration": int(dur_ms * 1e6),
        "ramp_alpha": variant == "fix",
        "progress_bar": False,
        "record_drops": False,
        "record_queue_lens": False,
        "record_core_deallocations": False,
        "breakwater_debug_info": False,
        "name": name,
    })
    config = json.loads(json.dumps(cfg), object_hook=SimConfig.decode_object)
    config.name = name
    sim = Simulation(config, "/tmp")
    t0 = time.time()
    sim.run()
    wall = time.time() - t0
    st = sim.state
    dur = config.sim_duration
    q = dur / 4
    phases = [{"completed": 0, "drops": 0, "timeouts": 0} for _ in range(4)]
    for t in st.tasks:
        if t.complete:
            phases[min(int(t.completion_time // q), 3)]["completed"] += 1
    cores = [[] for _ in range(4)]
    for rec in st.cores_over_time_records:
        cores[min(int(rec[0] // q), 3)].append(rec[2])
    for i, p in enumerate(phases):
        p["throughput_mrps"] = p["completed"] / (q / 1e9) / 1e6
        p["cores_mean"] = sum(cores[i]) / max(len(cores[i]), 1)
    drops = sum(c.dropped_tasks for c in st.all_clients)
    timeouts = sum(c.timed_out_tasks for c in st.all_clients)
    pool = [r[1] for r in st.breakwater_server.credit_pool_records]
    out = {
        "variant": variant, "duration_ms": dur_ms, "wall_s": wall, "tasks": len(st.tasks),
        "completed": sum(p["completed"] for p in phases),
        "throughput_mrps": sum(p["completed"] for p in phases) / (dur / 1e9) / 1e6,
        "aqm_drops": drops, "timeouts": timeouts, "phases": phases,
        "pool_max": max(pool) if pool else None, "pool_last": pool[-1] if pool else None,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
