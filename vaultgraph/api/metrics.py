"""Request metrics, and `GET /metrics` on its own listener (docs/observability.md).

`count_request` (called by the `observe` middleware, outermost in `app.MIDDLEWARES`) counts every
request by route template, method and status and times it; the concrete path is never a label
(paths carry token ids). `/metrics` is served by a second, tiny application on
`VAULTGRAPH_METRICS_HOST:VAULTGRAPH_METRICS_PORT`, off unless a port is set: the figures are
the whole service's, across tenants, so no tenant's API key may read them, and Prometheus
scrapes them on an address API clients never reach.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import AsyncIterator

from aiohttp import web

from .. import metrics
from ..auth.permissions import PUBLIC
from ..settings import ConfigError
from ..stall_monitor import StallMonitor
from .endpoints import Endpoints, Reply
from .typedefs import SERVER, SERVER_NAME, settings_key

endpoints = Endpoints()
TAG = "Operations"
CLIENT_CLOSED = 499  # the status nginx logs for the same case
# The listening socket `serve --workers N` opened for its workers' metrics (a file descriptor
# they inherit): not a setting, the supervisor sets it for its own workers only.
INHERITED_FD = "_VAULTGRAPH_METRICS_LISTENER_FD"


# (route, method, status) → the request counter's and the latency histogram's children: a
# `labels()` look-up takes the metric's lock and builds its key on every call. Bounded: route
# templates and methods are fixed sets, statuses a few dozen.
_children: dict[tuple[str, str, int], tuple] = {}


def count_request(route: str, method: str, status: int, seconds: float) -> None:
    """One answered request, by route template, method and status, and its time (the
    `observe` middleware, api/middleware.py, calls it for every request)."""
    children = _children.get((route, method, status))
    if children is None:
        children = _children[(route, method, status)] = (
            metrics.REQUESTS.labels(route, method, str(status)),
            metrics.LATENCY.labels(route, method))
    children[0].inc()
    children[1].observe(seconds)


@endpoints.get("/metrics", operation_id="metrics", summary="Prometheus metrics", tag=TAG,
               access=PUBLIC, raw=True,
               description="Served on the metrics listener only (VAULTGRAPH_METRICS_PORT).",
               replies=(Reply(200, "The metrics, in the Prometheus text format (OpenMetrics "
                                   "when the scraper asks for it).", media_type="text/plain",
                              file_schema={"type": "string"}),))
async def scrape(request: web.Request) -> web.Response:
    body, content_type = metrics.exposition(request.headers.get("Accept", ""))
    response = web.Response(body=body)
    response.headers["Content-Type"] = content_type
    return response


async def _named(request: web.Request, response: web.StreamResponse) -> None:
    response.headers[SERVER] = SERVER_NAME


def metrics_app() -> web.Application:
    """The metrics listener's application: `GET /metrics`, nothing else. Every answer, its
    404s and 405s too, names its server without versions."""
    app = web.Application()
    app.router.add_routes(endpoints.routes())
    app.on_response_prepare.append(_named)
    return app


def install(app: web.Application) -> None:
    """Count the app's requests and time its process's stalls (`vaultgraph/stall_monitor.py`); serve
    /metrics on its own listener when a port is set."""
    if app[settings_key].metrics_dir and not metrics.multiprocess_mode():
        raise ValueError("VAULTGRAPH_METRICS_DIR must be in the environment when the process "
                         "starts (prometheus-client reads it once, when first imported)")
    metrics.record_build(app[settings_key].replica)
    app.cleanup_ctx.append(_listener)


def in_use(host: str, port: int) -> ConfigError:
    return ConfigError(f"the metrics port {port} on {host} is in use by another process",
                       "stop that process or set VAULTGRAPH_METRICS_PORT to a free port (0: "
                       "no metrics listener)")


def listen(host: str, port: int) -> socket.socket:
    """The metrics port's listening socket, for `serve --workers N` to hand to its workers
    (inheritable; without SO_REUSEPORT, so no other process can share the port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise in_use(host, port) from None
        raise
    sock.set_inheritable(True)
    return sock


async def _listener(app: web.Application) -> AsyncIterator[None]:
    settings = app[settings_key]
    metrics.NEO4J_POOL_SIZE.set(settings.neo4j_pool_size)
    stalls = StallMonitor()
    stalls.start()
    runner = None
    if settings.metrics_port:
        runner = web.AppRunner(metrics_app(), access_log=None)
        await runner.setup()
        inherited = os.environ.get(INHERITED_FD)
        try:
            if inherited:
                # A worker of `--workers N`: all accept on the socket the supervisor opened;
                # whichever answers a scrape sums all of them (multiprocess mode).
                await web.SockSite(runner, socket.socket(fileno=int(inherited))).start()
            else:
                # No SO_REUSEPORT: another process on this port is an error, never a silent
                # share that would answer scrapes in turn with different figures.
                await web.TCPSite(runner, settings.metrics_host, settings.metrics_port).start()
        except BaseException as exc:
            await runner.cleanup()
            await stalls.stop()
            if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
                raise in_use(settings.metrics_host, settings.metrics_port) from None
            raise
    try:
        yield
    finally:
        if runner is not None:
            await runner.cleanup()
        await stalls.stop()
        metrics.process_exiting()
