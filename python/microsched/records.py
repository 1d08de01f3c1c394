"""Per-request records of a real run and their replay in the simulator (issue 46).

``microsched real --record FILE`` (and ``loadgen --record FILE``) writes one row per request the
load generator generated to Parquet (pyarrow): ``id`` (generation order), ``created_ns``
(scheduled creation time from the start of the schedule, warm-up included), ``session``,
``type``, ``service_ns`` (the service time asked for), ``replica``, ``tries``, ``outcome``
(``ok`` or how it ended), ``latency_ns``, ``server_queue_ns`` (the server's queueing delay:
admission to first start), ``server_service_ns`` (the server's time from that start to the
response: the run, and waits after a preemption or behind a mutex) and ``measured``. The runtime keeps at most ``limit`` rows (1 000 000);
past that the rest are counted (``cut``) and a warning says so.

A scenario with ``workload.replay = "FILE"`` makes the simulator offer exactly those requests
(same creation times, sessions, types and service times). The simulator reads CSV; a ``.parquet``
record is converted on the fly (:func:`resolve_replay`). :func:`divergence` compares a real run
with its replay request by request.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:  # pandas is imported where a frame is made: `microsched validate` must not pay for it
    import pandas as pd

COLUMNS = ["id", "created_ns", "session", "type", "service_ns", "replica", "tries", "outcome", "latency_ns",
           "server_queue_ns", "server_service_ns", "measured"]
REPLAY_COLUMNS = ["created_ns", "session", "type", "service_ns"]


def records_frame(loadgen_result: dict) -> tuple[pd.DataFrame | None, str | None]:
    """The load generator's records as a DataFrame (None if it kept none), and a warning when
    the bound cut some."""
    import pandas as pd

    rec = loadgen_result.get("records")
    if not rec:
        return None, None
    df = pd.DataFrame({c: rec[c] for c in COLUMNS})
    cut = int(rec.get("cut") or 0)
    warning = None
    if cut:
        warning = (f"per-request records: kept the first {len(df):,} requests to end (the runtime's bound, "
                   f"{int(rec.get('limit') or len(df)):,}); {cut:,} more were not recorded")
    return df, warning


def write_records(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Writes the records to Parquet (pyarrow)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), p)
    return p


def replay_csv(record: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """The simulator's replay file (CSV) of a Parquet record, written in ``out_dir``."""
    import pandas as pd

    src = Path(record)
    try:
        df = pd.read_parquet(src, columns=REPLAY_COLUMNS)
    except FileNotFoundError:
        raise ValueError(f"workload.replay: cannot read `{src}`: no such file") from None
    except (OSError, ValueError, KeyError) as e:
        raise ValueError(f"workload.replay: `{src}` is not a per-request record ({', '.join(REPLAY_COLUMNS)}): "
                         f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    out = Path(out_dir) / (src.stem + ".replay.csv")
    df.sort_values(["created_ns"], kind="stable").to_csv(out, index=False)
    return out


def _replay_value(text: str, fmt: str, overrides: Iterable[str]) -> str | None:
    """The scenario's ``workload.replay`` (the last override wins)."""
    from .scenario import _parse

    value = None
    try:
        tree = _parse(text, fmt)
        workload = tree.get("workload") if isinstance(tree, dict) else None
        value = workload.get("replay") if isinstance(workload, dict) else None
    except ValueError:
        pass  # the simulator's own parser reports syntax errors
    for o in overrides:
        key, _, v = o.partition("=")
        if key.strip() == "workload.replay":
            value = v.strip().strip('"').strip("'")
    return value if isinstance(value, str) else None


def resolve_replay(text: str, fmt: str, base_dir: str, overrides: list[str],
                   tmp: tempfile.TemporaryDirectory | None) -> tuple[list[str], tempfile.TemporaryDirectory | None]:
    """If the scenario replays a ``.parquet`` record: converts it to the simulator's CSV in a
    temporary directory and returns the overrides pointing at it (and the directory, to keep
    until the run ends)."""
    value = _replay_value(text, fmt, overrides)
    if not value or not value.lower().endswith(".parquet"):
        return overrides, tmp
    src = Path(value)
    if not src.is_absolute():
        src = Path(base_dir) / src
    tmp = tmp or tempfile.TemporaryDirectory(prefix="microsched-replay-")
    csv = replay_csv(src, tmp.name)
    return [*overrides, f"workload.replay={str(csv.resolve())!r}".replace("'", '"')], tmp


def divergence(real: pd.DataFrame, sim: pd.DataFrame, top: int = 10) -> dict[str, Any]:
    """How a real run and its replay in the simulator differ, request by request.

    ``real``: the records (:func:`records_frame`); ``sim``: the simulator's per-request rows of
    the replay (``RunResult.requests``). Requests are matched by creation time, session and type
    (the replay offers exactly the recorded ones). Returns the matched count, the distribution of
    ``latency_real − latency_sim`` (µs) over the requests completed in both and measured, and the
    ``top`` requests that differ most, with where their time went on each side (queueing at the
    server, service, the rest)."""
    import pandas as pd

    r = real[real["outcome"] == "ok"].copy()
    r = r[r["measured"]]
    s = sim.copy()
    if "dropped" in s.columns:
        s = s[s["dropped"] == 0]
    s["latency_sim_ns"] = s["response_ns"].astype("int64") - s["created_ns"].astype("int64")
    keys = ["created_ns", "session", "type"]
    r[keys] = r[keys].astype("int64")
    s[keys] = s[keys].astype("int64")
    m = r.merge(s[keys + ["latency_sim_ns", "queued_ns", "service_ns"]].rename(
        columns={"queued_ns": "sim_queue_ns", "service_ns": "sim_service_ns"}), on=keys, how="inner")
    out: dict[str, Any] = {"real_completed": int(len(r)), "sim_completed": int(len(s)), "matched": int(len(m))}
    if m.empty:
        out["diff_us"] = None
        out["top"] = []
        return out
    d = (m["latency_ns"].astype("int64") - m["latency_sim_ns"]) / 1e3
    q = d.quantile([0.01, 0.1, 0.5, 0.9, 0.99]).tolist()
    out["diff_us"] = {"mean": float(d.mean()), "p1": q[0], "p10": q[1], "p50": q[2], "p90": q[3], "p99": q[4],
                      "abs_mean": float(d.abs().mean())}
    m = m.assign(diff_us=d)
    worst = m.reindex(m["diff_us"].abs().sort_values(ascending=False).index).head(top)
    rows = []
    for _, w in worst.iterrows():
        real_lat, sim_lat = w["latency_ns"] / 1e3, w["latency_sim_ns"] / 1e3
        rq, sq = w["server_queue_ns"] / 1e3, w["sim_queue_ns"] / 1e3
        rs, ss = w["server_service_ns"] / 1e3, w["sim_service_ns"] / 1e3
        svc = w["service_ns"] / 1e3
        rows.append({
            "id": int(w["id"]), "created_us": w["created_ns"] / 1e3, "session": int(w["session"]),
            "type": int(w["type"]), "service_us": svc,
            "latency_real_us": real_lat, "latency_sim_us": sim_lat, "diff_us": float(w["diff_us"]),
            # Where the time went: queueing at the server (real: admission to first start, from
            # the response; sim: every runqueue and lock wait), its time at the server from the
            # first start to the response (real: the run and any wait after a preemption or
            # behind a mutex; sim: the service), and the rest (network, client).
            "real_queue_us": rq, "sim_queue_us": sq,
            "real_service_us": rs, "sim_service_us": ss,
            "real_rest_us": real_lat - rq - rs, "sim_rest_us": sim_lat - sq - ss,
        })
    out["top"] = rows
    return out
