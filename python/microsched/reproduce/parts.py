"""A reproduction's finished runs, saved as they finish so that ``--resume`` runs only the rest.

Rows are written in batches, not one Parquet file per run: the driver wrote a file for every
point while its workers competed with it for the CPUs (3.5–7 % of a coresync reproduction's
CPU on two cores). A batch is flushed every :data:`FLUSH_ROWS` rows or :data:`FLUSH_S` seconds,
at the end and on any interruption (Ctrl-C, a failing point): a driver killed outright loses at
most the last few seconds of runs, which ``--resume`` runs again.

``OUT/parts/batches/NNNNN.parquet`` holds ``point_id`` and ``row``, the run's row as JSON text:
a row's values read back exactly as they were written (ints stay ints, a key absent from one
variant stays absent), so that a resumed reproduction equals an uninterrupted one. The
single-row ``OUT/parts/<point_id>.parquet`` of earlier versions are still read.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterable

BATCH_DIR = "batches"
FLUSH_ROWS = 64
FLUSH_S = 2.0


class RowStore:
    """The finished rows of one reproduction in ``parts`` (its ``OUT/parts``)."""

    def __init__(self, parts: Path):
        self.dir = parts / BATCH_DIR
        self.pending: list[dict[str, str]] = []
        self.last_flush = time.monotonic()
        self.n_files = len(list(self.dir.glob("*.parquet"))) if self.dir.is_dir() else 0

    def load(self, wanted: Iterable[str], single_row_parts: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
        """The saved rows of the point ids ``wanted``: from the batches, and from the single-row
        parts named in ``single_row_parts`` (the ids :func:`~microsched.sweep.engine.finished_ids`
        found)."""
        import pyarrow.parquet as pq

        wanted = set(wanted)
        rows: dict[str, dict[str, Any]] = {}
        for pid in set(single_row_parts) & wanted:
            row = pq.read_table(self.dir.parent / f"{pid}.parquet").to_pylist()[0]
            row.pop("point_id", None)
            rows[pid] = row
        if self.dir.is_dir():
            for tmp in self.dir.glob(".*.tmp"):  # a batch cut short: its runs run again
                tmp.unlink(missing_ok=True)
            for f in sorted(self.dir.glob("*.parquet")):
                try:
                    table = pq.read_table(f).to_pydict()
                except Exception:  # noqa: BLE001 - an unreadable batch is as good as absent
                    f.unlink(missing_ok=True)
                    continue
                for pid, text in zip(table["point_id"], table["row"]):
                    if pid in wanted:
                        rows[pid] = json.loads(text)
        return rows

    def add(self, pid: str, row: dict[str, Any]) -> None:
        self.pending.append({"point_id": pid, "row": json.dumps(row, default=str)})
        if len(self.pending) >= FLUSH_ROWS or time.monotonic() - self.last_flush >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        self.last_flush = time.monotonic()
        if not self.pending:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"{self.n_files:05d}.parquet"
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp")
        pq.write_table(pa.Table.from_pylist(self.pending), tmp)
        os.replace(tmp, path)
        self.n_files += 1
        self.pending = []
