"""The baseline of the serve benchmark: one trivial Starlette JSON endpoint under uvicorn.

    python benchmarks/trivial_app.py --port 0      # prints "Serving http://127.0.0.1:PORT"

It is served through ``metrics_kit.server.http.run`` -- the same ``bind`` and the same uvicorn
settings as ``metrics-kit serve`` (httptools, uvloop, one worker, access log off, lifespan off,
no server/date headers) -- so the only difference from ``/metrics`` is the application itself.
The endpoint is ``async``: a plain function would run in Starlette's thread pool and make the
baseline slower than it needs to be.
"""

from __future__ import annotations

import argparse
import sys

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


async def ok(request: Request) -> JSONResponse:
    return JSONResponse({"ok": 1})


app = Starlette(routes=[Route("/", ok)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="serve the trivial Starlette endpoint GET /")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    from metrics_kit.server.http import run

    sock = run.bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    print(f"Serving http://{host}:{port} (trivial Starlette app)", flush=True)
    run.serve(app, sock, access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
