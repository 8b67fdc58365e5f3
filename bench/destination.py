"""The proxy workload's destination: a stand-in processor on 127.0.0.1, answering every request
at once with a small JSON body. It serves from a thread of the benchmark's process with an event
loop of its own, so the benchmark's blocking calls (the route probe) never stall it; its CPU is
counted with the client's, as the load generator's is."""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web

ANSWER = b'{"status": "captured"}'


async def _answer(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(body=ANSWER, content_type="application/json")


class Destination:
    def __init__(self) -> None:
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Destination:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        async def serve() -> None:
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", _answer)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", 0).start()
            self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(serve())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="bench-destination", daemon=True)
        self._thread.start()
        ready.wait(30)
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        runner = self._runner
        if runner is not None:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()
        self._loop = self._thread = None
