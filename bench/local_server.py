"""A stand-in server of the benchmark's (the proxy workload's destination, webhook_create's
receiver) in a process of its own on 127.0.0.1, as a real one is elsewhere: its CPU is neither
side's. A child of the benchmark's process, it is a tree of its own in `bench/cpu.py`
`snapshot`, so a run names it among the groups it reads (`make bench` reports it apart) and it
is left out of the benchmark process's own figure (the bare client's, the load generator's).

`python -m <module>` prints its port on its first line and serves until stopped."""

from __future__ import annotations

import asyncio
import select
import signal
import subprocess
import sys

from aiohttp import web

from .config import ROOT


class ServerProcess:
    """`python -m <module>` as a child of the benchmark's process; `url` is its address and
    `path`."""

    module = ""
    path = ""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self, within: float = 30.0) -> ServerProcess:
        """Started, its port read (at most `within` seconds: else it is stopped and this
        raises)."""
        self.proc = subprocess.Popen(  # noqa: S603 - fixed argv
            [sys.executable, "-m", self.module], stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL, cwd=ROOT)
        ready, _, _ = select.select([self.proc.stdout], [], [], within)
        line = self.proc.stdout.readline() if ready else b""
        if not line.strip().isdigit():
            self.stop()
            raise RuntimeError(f"{self.module} did not report its port within {within:g}s")
        self.url = f"http://127.0.0.1:{int(line)}{self.path}"
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc = None


async def serve(app: web.Application) -> None:
    """Serve `app` on a free port of 127.0.0.1, print the port, and stop on SIGTERM or SIGINT."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(runner.addresses[0][1], flush=True)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):  # Ctrl-C reaches the whole group
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    await stop.wait()
    await runner.cleanup()
