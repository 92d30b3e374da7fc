"""An echo backend for test pods: it answers every request with what it received, as JSON.

Run inside a pod (``python -m controller.testbed.echo --name NAME --port PORT``), it tells a
test which backend answered and what reached it (method, host, path, headers), the way the
Ingress conformance suite's echo server does. Standard library only, so it starts in tens of
milliseconds in a fresh network namespace.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def handler_for(name: str) -> type[BaseHTTPRequestHandler]:
    class Echo(BaseHTTPRequestHandler):
        server_version = "htc-echo"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(min(length, 1 << 20))
            body = json.dumps(
                {
                    "pod": name,
                    "method": self.command,
                    "host": self.headers.get("Host", ""),
                    "path": self.path,
                    "headers": {k: v for k, v in self.headers.items()},
                },
                sort_keys=True,
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Echo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controller.testbed.echo")
    parser.add_argument("--name", default=os.environ.get("POD_NAME", "echo"))
    parser.add_argument("--bind", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer((args.bind, args.port), handler_for(args.name))
    print(f"echo {args.name} listening on {args.bind}:{args.port}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
