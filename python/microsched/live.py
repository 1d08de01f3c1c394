"""Live counters of a running server (`microsched serve --stats-every S --metrics-port P`): the
latest snapshot as a JSON line and as Prometheus text on a loopback HTTP endpoint."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def prometheus_text(snapshot: dict[str, Any]) -> str:
    """The snapshot in Prometheus' text exposition format: the counters as
    ``microsched_server_<name>_total``, the gauges (connected sessions, uptime) as they are."""
    gauges = {"connected_sessions", "uptime_s"}
    lines = []
    for k, v in sorted(snapshot.items()):
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            continue
        name = f"microsched_server_{k}" + ("" if k in gauges else "_total")
        lines.append(f"# TYPE {name} {'gauge' if k in gauges else 'counter'}")
        lines.append(f"{name} {v}")
    return "\n".join(lines) + "\n"


class MetricsEndpoint:
    """An HTTP server on 127.0.0.1 serving the latest snapshot at ``/metrics`` (Prometheus
    text) and ``/metrics.json``, in a daemon thread. Loopback only: counters are nobody
    else's business."""

    def __init__(self, port: int = 0) -> None:
        self.snapshot: dict[str, Any] = {}
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                with lock:
                    snap = dict(outer.snapshot)
                if self.path == "/metrics":
                    body, ctype = prometheus_text(snap).encode(), "text/plain; version=0.0.4"
                elif self.path == "/metrics.json":
                    body, ctype = json.dumps(snap).encode(), "application/json"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._lock = lock
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True, name="microsched-metrics").start()

    def update(self, snapshot: dict[str, Any]) -> None:
        with self._lock:
            self.snapshot = snapshot

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
