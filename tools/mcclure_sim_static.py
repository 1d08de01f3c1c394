"""Runs McClure et al.'s simulator (smcclure20/scheduling-policies-sim) with static cores and
work stealing (configs/ws_static_config.json: probe 100 ns, steal 100 ns, own-queue check every
1 µs) on CORES cores with exponential 1 µs tasks at each load given, and prints one JSON line per
load: mean and p99 latency (completion - arrival, as its `time_in_system`) after a warm-up.

Usage: python3 tools/mcclure_sim_static.py SIM_DIR CORES DURATION_MS LOAD [LOAD ...]
"""
import json
import sys
import time


def main():
    sim_dir, cores, dur_ms = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    sys.path.insert(0, sim_dir)
    from sim_config import SimConfig
    from simulation import Simulation

    with open(f"{sim_dir}/../configs/ws_static_config.json") as f:
        base = json.load(f)
    for load in map(float, sys.argv[4:]):
        cfg = dict(base)
        cfg.update({
            "avg_system_load": load, "num_queues": cores, "num_threads": cores,
            "mapping": list(range(cores)), "load_thread_count": cores,
            "sim_duration": int(dur_ms * 1e6), "name": f"mcc-{cores}-{load}", "progress_bar": False,
        })
        config = json.loads(json.dumps(cfg), object_hook=SimConfig.decode_object)
        config.name = cfg["name"]
        sim = Simulation(config, "/tmp")
        t0 = time.time()
        sim.run()
        wall = time.time() - t0
        warm = config.sim_duration * 0.1
        lat = sorted(t.completion_time - t.arrival_time for t in sim.state.tasks if t.complete and t.arrival_time >= warm)
        n = len(lat)
        print(json.dumps({"cores": cores, "load": load, "duration_ms": dur_ms, "n": n, "wall_s": round(wall, 1),
                          "mean_us": sum(lat) / n / 1e3, "p99_us": lat[int(0.99 * (n - 1))] / 1e3}), flush=True)


if __name__ == "__main__":
    main()
