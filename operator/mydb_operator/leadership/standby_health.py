"""/healthz while standing by: a standby is healthy, and says for whom it waits."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Callable, Iterator


class _StandbyServer(http.server.ThreadingHTTPServer):
    status: Callable[[], str]


class _Healthy(http.server.BaseHTTPRequestHandler):
    server: _StandbyServer

    def do_GET(self) -> None:
        if self.path != "/healthz":
            self.send_response(404)
            self.end_headers()
            return
        body = (self.server.status() + "\n").encode()
        self.send_response(200)  # a standby is healthy: the liveness probe must pass
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:  # probes every few seconds: not worth a log line
        pass


@contextlib.contextmanager
def standby_health(port: int, status: Callable[[], str]) -> Iterator[None]:
    """Answer /healthz with `status()` while waiting to lead, so a standby passes its liveness probe."""
    if not port:
        yield
        return
    server = _StandbyServer(("0.0.0.0", port), _Healthy)
    server.status = status
    thread = threading.Thread(target=server.serve_forever, name="standby-health", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()  # kopf's own liveness endpoint takes the port next
