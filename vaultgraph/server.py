"""The HTTP server around the app: listening, hostile clients, workers and a graceful drain.

- It listens at once: start-up work that needs Neo4j (schema, key check, pool warm-up) runs in
  the background, `/health` answers 200 and `/ready` 503 until it is done.
- A request's head must arrive within `VAULTGRAPH_HEADER_READ_TIMEOUT` seconds of its first
  byte (408, then the connection closes), its body within `VAULTGRAPH_BODY_READ_TIMEOUT`
  (in `api/http.read_json`); idle keep-alive connections close after
  `VAULTGRAPH_KEEPALIVE_TIMEOUT`.
- HTTP the parser refuses (a bad chunk size, an oversized request line or header) is answered
  as problem+json with fixed text: never aiohttp's text/plain that quotes the offending bytes.
- SIGTERM (or SIGINT) drains: the listening socket closes, `/ready` turns 503, every answer
  from then on carries `Connection: close`, in-flight requests finish within
  `VAULTGRAPH_SHUTDOWN_GRACE` seconds, connections left idle are closed, then the background
  tasks stop, the audit batch is flushed and the driver is closed; exit status 0.
- `--workers N` runs N such processes on one port (SO_REUSEPORT): the kernel spreads new
  connections over them, and one that drains leaves the others taking new connections. They
  share an access generation (`access_generation`): a key revoked, an application deleted or
  its rules replaced through one worker is refused by all of them from the answer on.
- "serving on …" is printed once the start-up check of the key-encryption key passed (by the
  supervisor, once every worker passed it); a refusal or a worker's failure is printed once,
  however many workers met it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Coroutine, Mapping
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler, RequestPayloadError

from . import access_generation
from .access_generation import AccessGeneration
from .api import metrics as metrics_api
from .api import problems
from .api.endpoints import PROBLEM_JSON
from .api.middleware import TRACE_HEADER
from .api.request_io import problem_body
from .api.typedefs import SERVER, SERVER_NAME, services_key
from .app import create_app
from .errors import WrongKey
from .settings import PREFIX, Settings

log = logging.getLogger("vaultgraph.server")
IDLE_CLOSE = 0.5  # while draining, a keep-alive connection idle this long is closed
LINGER = 2.0  # after an answer to a body not read whole, its rest is read (and dropped) this long
SUPERVISOR_FD = "_VAULTGRAPH_SUPERVISOR_FD"  # a worker's pipe to its supervisor
MESSAGE_MAX = 2048  # a message is one write of at most this (under PIPE_BUF: never interleaved)


def _problem_bytes(problem: problems.Problem) -> tuple[bytes, str]:
    trace_id = uuid.uuid4().hex
    return problem_body(problem, trace_id), trace_id


class _Protocol(RequestHandler):
    """aiohttp's connection handler, with a deadline on request heads and parser errors
    answered as problem+json."""

    def __init__(self, manager, *, header_timeout: float, **kwargs) -> None:
        super().__init__(manager, **kwargs)
        self._header_timeout = header_timeout
        self._head_timer: asyncio.TimerHandle | None = None

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        current = self._current_request
        if current is not None and self._messages:
            # The parser refused what followed a head it accepted (a bad chunk size in the
            # body being read): the handler reading that body gets the error, as a 400.
            refused = next((msg.exc for msg, _ in self._messages
                            if isinstance(getattr(msg, "exc", None), HttpProcessingError)), None)
            if refused is not None:
                current._cancel(refused)
        if self._messages or self._request_in_progress or self._force_close or self._close:
            self._cancel_head_timer()
        elif data and self._head_timer is None and self._header_timeout > 0:
            # The first bytes of a request head: the rest must follow in time (slowloris).
            self._head_timer = self._loop.call_later(self._header_timeout, self._head_expired)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_expired(self) -> None:
        self._head_timer = None
        if self._messages or self._request_in_progress or self.transport is None:
            return
        log.info("request head not received in time", extra={"status": 408})
        body, trace_id = _problem_bytes(problems.RequestTimeout(
            "The request head was not received in time."))
        head = (f"HTTP/1.1 408 Request Timeout\r\nContent-Type: {PROBLEM_JSON}\r\n"
                f"Content-Length: {len(body)}\r\n{TRACE_HEADER}: {trace_id}\r\n"
                f"{SERVER}: {SERVER_NAME}\r\nConnection: close\r\n\r\n").encode()
        self.transport.write(head + body)
        self.force_close()
        self.transport.close()

    def log_exception(self, *args, **kwargs) -> None:
        # A body the parser failed on (a `Content-Encoding` its bytes are not in) fails again
        # when aiohttp reads what a handler left of it after the answer: that ends the
        # connection, as it should, and is the client's error, not an unhandled one.
        exc = kwargs.get("exc_info")
        if isinstance(exc, RequestPayloadError):
            log.warning("malformed request body", extra={
                "error": type(exc.__cause__ or exc).__name__})
            return
        super().log_exception(*args, **kwargs)

    def handle_error(self, request, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        # aiohttp's version answers text/plain quoting `message` (the offending bytes: an API
        # key, a card number in a chunked body) and logs the exception with it.
        if isinstance(exc, ConnectionError):
            log.info("client disconnected")
        else:
            log.warning("malformed request" if status < 500 else "unhandled error",
                        extra={"status": status, "error": type(exc).__name__ if exc else None})
        if request.writer.output_size > 0:
            raise ConnectionError("the response was already started")
        if status >= 500:
            problem = problems.InternalError("An internal error occurred.")
        else:
            problem = problems.BadRequest("The request is not valid HTTP.")
            problem.status = status
            problem.title = HTTPStatus(status).phrase
        body, trace_id = _problem_bytes(problem)
        response = web.Response(status=problem.status, body=body, content_type=PROBLEM_JSON,
                                headers={TRACE_HEADER: trace_id, SERVER: SERVER_NAME})
        response.force_close()
        return response


class _Server(web.Server):
    def __call__(self) -> RequestHandler:
        return _Protocol(self, loop=self._loop, **self._kwargs)


class _Runner(web.AppRunner):
    async def _make_server(self) -> web.Server:
        await super()._make_server()  # starts the app (its cleanup contexts open)
        return _Server(self._app._handle, request_factory=self._app._make_request,
                       loop=asyncio.get_running_loop(), **self._kwargs)


@dataclasses.dataclass
class Served:
    """One listening process's server, for `serve` and for tests."""

    app: web.Application
    runner: _Runner
    site: web.TCPSite
    settings: Settings
    port: int
    startup: asyncio.Task | None = None
    stopped: bool = False

    async def drain(self) -> None:
        """Stop as SIGTERM does (see the module's doc)."""
        if self.stopped:
            return
        self.stopped = True
        loop = asyncio.get_running_loop()
        until = loop.time() + self.settings.shutdown_grace
        # No new connections (the sockets already open keep going), before anything else and
        # before any answer says `Connection: close`: a client told so connects again at once,
        # and under `--workers` (SO_REUSEPORT) a connection the kernel queued on this socket is
        # reset when it closes, where after the close the kernel gives it to another worker.
        await self.site.stop()
        services = self.app.get(services_key)
        if services is not None:
            services.readiness.drain()
        if self.startup is not None:
            # Cancelled and awaited: start-up work caught opening connections must be unwound
            # before the driver closes, or a socket it was opening is left behind.
            self.startup.cancel()
            await asyncio.wait({self.startup})  # its outcome stays on the task (serve reads it)
        log.info("draining", extra={"grace": self.settings.shutdown_grace})
        server = self.runner.server
        idle_since: dict[RequestHandler, tuple[float, int]] = {}
        while server is not None and server.connections and loop.time() < until:
            now = loop.time()
            for conn in server.connections:
                if conn._request_in_progress or conn._messages:
                    idle_since.pop(conn, None)
                    continue
                seen = idle_since.get(conn)
                if seen is None or seen[1] != conn._request_count:
                    idle_since[conn] = (now, conn._request_count)
                elif now - seen[0] >= IDLE_CLOSE:
                    conn.close()  # idle: no request is racing this close
            await asyncio.sleep(0.05)
        self.runner._shutdown_timeout = max(until - loop.time(), 0.1)
        await self.runner.cleanup()  # in-flight leftovers, then the app: tasks, audit, driver
        log.info("stopped")


async def start(settings: Settings, *, reuse_port: bool = False,
                access: AccessGeneration | None = None) -> Served:
    """Listen on `settings.host:port` (0: any free port) and begin the start-up work."""
    app = create_app(settings, background_start=True, access_generation=access)
    runner = _Runner(app, handle_signals=False, access_log=None,
                     keepalive_timeout=settings.keepalive_timeout, lingering_time=LINGER,
                     header_timeout=settings.header_read_timeout,
                     shutdown_timeout=settings.shutdown_grace)
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port, reuse_port=reuse_port or None)
    await site.start()
    served = Served(app, runner, site, settings, site._server.sockets[0].getsockname()[1])
    served.startup = asyncio.create_task(app[services_key].startup.run())
    return served


async def serve(settings: Settings, *, reuse_port: bool = False, banner: str | None = None,
                supervisor: ToSupervisor | None = None,
                access: AccessGeneration | None = None) -> int:
    """One process: serve until SIGTERM/SIGINT, then drain; 1 if the key check refuses.
    `banner` is printed once start-up passed (a worker tells its `supervisor` instead)."""
    served = await start(settings, reuse_port=reuse_port, access=access)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({stopping, served.startup}, return_when=asyncio.FIRST_COMPLETED)
    status = 0
    failed = (served.startup.done() and not served.startup.cancelled()
              and served.startup.exception())
    if isinstance(failed, WrongKey):
        (supervisor.say if supervisor else say)(f"vaultgraph: {failed.detail}")
        status = 1
    elif not failed:
        if served.startup.done():
            settle_heap()
            if supervisor:
                supervisor.ready()
            elif banner:
                say(banner)
        await stopping  # started (or still starting): serve until SIGTERM
    stopping.cancel()
    await served.drain()  # a failed start-up too: the listener, the app and its driver close
    if failed and not isinstance(failed, WrongKey):
        raise failed  # the caller explains it (failures.explain): one line, never a traceback
    return status


def _settings_env(settings: Settings) -> dict[str, str]:
    return {PREFIX + f.name.upper(): str(getattr(settings, f.name))
            for f in dataclasses.fields(settings)}


def worker_env(settings: Settings, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of each of several workers: the supervisor's settings, resolved here
    where the worker count is known (a worker is one process, and its audit lanes are those
    chosen for one of several)."""
    env = {**environ, **_settings_env(settings), PREFIX + "WORKERS": "1",
           PREFIX + "AUDIT_LANES": str(settings.audit_lane_count)}
    if settings.metrics_dir:  # prometheus-client's own variable would win over ours
        env["PROMETHEUS_MULTIPROC_DIR"] = settings.metrics_dir
    return env


def run_loop(settings: Settings, main: Coroutine[Any, Any, int]) -> int:
    """Run the server's coroutine on uvloop (libuv: less CPU per request than asyncio's own
    loop, measured in docs/adr/0012-uvloop.md) or, when asked or when uvloop is not installed
    (it has no Windows build), on asyncio's."""
    if settings.event_loop == "uvloop":
        try:
            import uvloop
        except ImportError:
            log.warning("uvloop is not installed: serving on asyncio's event loop")
        else:
            return uvloop.run(main)
    return asyncio.run(main)


def tune_gc(settings: Settings) -> None:
    """A serving process's cyclic garbage collector: its youngest generation is collected
    every `VAULTGRAPH_GC_YOUNG_THRESHOLD` allocations instead of Python's 700
    (docs/adr/0004-gc-threshold.md). Every statement leaves the driver's session and
    result objects in reference cycles; collected every 700 allocations, those of requests
    still in flight were promoted again and again until only full collections freed them —
    dozens a minute per worker, each stopping the process for tens of milliseconds."""
    if settings.gc_young_threshold > 0:
        gc.set_threshold(settings.gc_young_threshold, *gc.get_threshold()[1:])


def settle_heap() -> None:
    """Once a serving process is ready, before its traffic: what start-up left — imports, the
    catalog, compiled schemas and templates, the driver and its pool, some 70,000 objects or
    more — leaves the collector's reach (`gc.freeze`). A full collection then walks only what
    serving made since: in a benchmark window each of a worker's full collections had stopped
    it for 54-76 ms with all its requests in flight (docs/adr/0004-gc-threshold.md). What is
    frozen is still freed by reference counting; only a cycle among start-up's objects that
    turns to garbage later would stay (start-up's own garbage is collected first)."""
    from . import metrics

    gc.collect()
    gc.freeze()
    metrics.GC_FROZEN.set(gc.get_freeze_count())


def run(settings: Settings, banner: str | None = None) -> int:
    """`vaultgraph serve`: one process, or `settings.worker_count` of them on one port;
    `banner` ("serving on …") is printed once start-up passed."""
    workers = settings.worker_count
    if workers <= 1:
        tune_gc(settings)
        return run_loop(settings, serve(settings, banner=banner))
    from . import metrics

    private = None
    if settings.metrics_port and not settings.metrics_dir:
        # Workers on one metrics port: without a shared directory each scrape would read
        # whichever worker answered it. A private one (mkdtemp: new, empty, mode 0700),
        # removed when the workers are gone (not after a SIGKILL of this process).
        private = tempfile.mkdtemp(prefix="vaultgraph-metrics-")
        settings = dataclasses.replace(settings, metrics_dir=private)
    elif settings.metrics_dir:  # one fresh multiprocess directory the workers share
        metrics.prepare_dir(settings.metrics_dir)
    listener = None
    try:
        if settings.metrics_port:
            # Opened here, once, and inherited by the workers, which all accept on it: a port
            # another process holds is refused, never shared with it (no SO_REUSEPORT).
            listener = metrics_api.listen(settings.metrics_host, settings.metrics_port)
        return _supervise(settings, workers, listener, banner)
    finally:
        if listener is not None:
            listener.close()
        if private is not None:
            shutil.rmtree(private, ignore_errors=True)


def _supervise(settings: Settings, workers: int, metrics_listener=None,
               banner: str | None = None) -> int:
    env = worker_env(settings, os.environ)
    fds: tuple[int, ...] = ()
    if metrics_listener is not None:
        fds = (metrics_listener.fileno(),)
        env[metrics_api.INHERITED_FD] = str(fds[0])
    children: list[subprocess.Popen] = []
    shared = access_generation.create(workers)
    from_workers, to_supervisor = os.pipe()
    env[SUPERVISOR_FD] = str(to_supervisor)
    fds += (shared, to_supervisor)
    sent: set[int] = set()  # signals this supervisor passed on to its workers

    def forward(sig, _frame) -> None:
        sent.add(sig)
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(sig)

    # Before the workers start: a SIGTERM arriving meanwhile reaches the ones started so far.
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    try:
        try:
            children.extend(subprocess.Popen(
                [sys.executable, "-m", "vaultgraph.server"], pass_fds=fds,
                env={**env, **access_generation.worker_env(shared, workers, slot)})
                for slot in range(workers))
        finally:
            os.close(shared)  # the workers hold it now
            os.close(to_supervisor)  # and their ends of the pipe: it ends when they are gone
        messages = _FromWorkers(from_workers, workers, banner)
        stopping = False
        # Every child polled each round (`any` over poll() would stop at the first one alive,
        # and a later worker's failure would go unseen while the first one serves).
        while [child.poll() for child in children].count(None):
            if not stopping and any(child.returncode for child in children):
                stopping = True  # one refused to serve (a wrong key): stop the others too
                messages.banner = None
                forward(signal.SIGTERM, None)
            messages.receive(timeout=0.2)
        messages.receive(timeout=0)  # what the last ones wrote before they exited
    finally:
        os.close(from_workers)
    return max(exit_status(child.returncode, sent) for child in children)


class ToSupervisor:
    """A worker's messages to its supervisor: ready, or a line to print (once, whichever
    workers send it)."""

    def __init__(self, fd: int):
        self._fd = fd

    @classmethod
    def inherited(cls) -> ToSupervisor | None:
        fd = os.environ.get(SUPERVISOR_FD)
        return cls(int(fd)) if fd else None

    def ready(self) -> None:
        self._send(b"ready")

    def say(self, line: str) -> None:
        self._send(b"say " + line.replace("\n", " ").encode()[:MESSAGE_MAX - 8])

    def _send(self, message: bytes) -> None:
        with contextlib.suppress(OSError):  # the supervisor is gone: nobody to tell
            os.write(self._fd, message + b"\n")


class _FromWorkers:
    """The supervisor's end: prints `banner` when every worker is ready, each line once."""

    def __init__(self, fd: int, workers: int, banner: str | None):
        self._fd = fd
        self._workers = workers
        self.banner = banner
        self._ready = 0
        self._said: set[bytes] = set()
        self._partial = b""

    def receive(self, timeout: float) -> None:
        while select.select([self._fd], [], [], timeout)[0]:
            data = os.read(self._fd, 65536)
            if not data:
                return  # every worker closed its end
            *lines, self._partial = (self._partial + data).split(b"\n")
            for line in lines:
                self._handle(line)
            timeout = 0

    def _handle(self, message: bytes) -> None:
        if message == b"ready":
            self._ready += 1
            if self._ready == self._workers and self.banner:
                say(self.banner)
        elif message.startswith(b"say ") and message[4:] not in self._said:
            self._said.add(message[4:])
            say(message[4:].decode(errors="replace"))


def exit_status(returncode: int, sent: set[int] = frozenset()) -> int:
    """A worker's exit status as a shell reports it: one killed by a signal (a negative
    returncode: the OOM killer, kill -9) is 128 + the signal, worse than any clean exit; one
    the supervisor's own SIGTERM/SIGINT ended before it could drain (still starting) is 0."""
    if returncode >= 0:
        return returncode
    return 0 if -returncode in sent else 128 - returncode


def _worker() -> int:
    """One of `--workers N`: a failure is the one line the single-process command prints
    (`failures.explain`), never a traceback; its status reaches the supervisor."""
    from .failures import explain
    from .logging_setup import configure

    settings = None
    supervisor = ToSupervisor.inherited()
    try:
        settings = Settings.from_env()
        configure(settings.log_level, settings.log_format, settings.log_coalesce_interval)
        tune_gc(settings)
        return run_loop(settings, serve(settings, reuse_port=True, supervisor=supervisor,
                                        access=AccessGeneration.inherited()))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        cause, fix, status = explain(exc, settings)
        (supervisor.say if supervisor else say)(f"vaultgraph: {cause}: {fix}")
        return status


def say(line: str) -> None:
    """One line on stderr in one write: the workers of `--workers N` share it, and a line
    printed in two writes (text, then newline) interleaves with another worker's."""
    sys.stderr.flush()
    os.write(sys.stderr.fileno(), (line + "\n").encode())


if __name__ == "__main__":
    sys.exit(_worker())
