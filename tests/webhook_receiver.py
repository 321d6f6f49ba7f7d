"""A real HTTP receiver for webhook tests, on 127.0.0.1: it keeps every JSON body it got and
answers the status the test sets."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    """``start()``, then ``url``, ``bodies`` and ``status`` (what it answers); ``stop()``."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.status = 200
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                receiver.bodies.append(json.loads(self.rfile.read(length) or b"{}"))
                self.send_response(receiver.status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/governance"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> Receiver:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
