"""What one more layer between aiohttp and the handler costs a request: `python -m
bench.layers`. A request's coroutine chain is resumed at each suspension (a socket read, a
commit waited for) through every frame on it, so a middleware costs its call, its coroutine
and one resumption a suspension. This times a chain of LAYERS_SUSPENSIONS suspensions (default
4, about what a get makes) under 0, 1, 4 and 6 pass-through layers (each `return await
handler(request)` in a try/finally, called through `functools.partial` as aiohttp calls a
middleware), on the loop the service serves on, by the thread's CPU clock over LAYERS_CALLS
calls (default 100,000): microseconds a call, and what each layer adds."""

from __future__ import annotations

import functools
import os
import time

from .run import on_service_loop


class _Suspend:
    def __await__(self):
        yield None


async def _leaf(request, suspensions: int):
    for _ in range(suspensions):
        await _Suspend()
    return request


async def _layer(request, handler):
    try:
        return await handler(request)
    finally:
        pass


def chain(layers: int, suspensions: int):
    """The handler as aiohttp builds it under `layers` middlewares."""
    handler = functools.partial(_leaf, suspensions=suspensions)
    for _ in range(layers):
        handler = functools.partial(_layer, handler=handler)
    return handler


def drive(handler, request=None):
    """One call of `handler` run to its end, each suspension resumed at once: its result."""
    coro = handler(request)
    try:
        while True:
            coro.send(None)
    except StopIteration as done:
        return done.value


def microseconds(layers: int, suspensions: int, calls: int) -> float:
    handler = chain(layers, suspensions)
    started = time.thread_time()
    for _ in range(calls):
        drive(handler)
    return (time.thread_time() - started) / calls * 1e6


async def main() -> None:
    calls = int(os.environ.get("LAYERS_CALLS", "100000"))
    suspensions = int(os.environ.get("LAYERS_SUSPENSIONS", "4"))
    base = microseconds(0, suspensions, calls)
    print(f"layers  µs a call  added a layer  ({calls:,} calls, {suspensions} suspensions each)")
    print(f"{0:>6} {base:>10.2f}")
    for layers in (1, 4, 6):
        us = microseconds(layers, suspensions, calls)
        print(f"{layers:>6} {us:>10.2f} {(us - base) / layers:>14.2f}")


if __name__ == "__main__":
    on_service_loop(main())
