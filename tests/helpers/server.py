"""A real uvicorn server in a background thread on a free loopback port, for tests."""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn
from fastapi import FastAPI


class _Server(uvicorn.Server):
    """uvicorn's server, which stops as soon as it is told to (`exit_now`) where uvicorn's own looks
    every 100 ms, and as soon as its connections have closed (`shutdown`): hundreds of tests start and
    stop one."""

    _loop: asyncio.AbstractEventLoop | None = None

    async def main_loop(self) -> None:
        self._told = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        counter = 0
        while not await self.on_tick(counter):  # its housekeeping (the Date header), then should_exit
            counter += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._told.wait(), 0.1)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown in its order (stop listening, end the connections, wait for them and their
        requests within `timeout_graceful_shutdown`, then the lifespan's shutdown), waiting on the
        connections themselves where uvicorn pauses 100 ms and then looks every 100 ms: by the time a
        test stops its server, its clients have usually closed theirs."""
        for server in self.servers:
            server.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        loop = asyncio.get_running_loop()
        limit = self.config.timeout_graceful_shutdown  # None: wait as long as they take, as uvicorn does
        deadline = math.inf if limit is None else loop.time() + limit
        state = self.server_state
        while (state.connections or state.tasks) and not self.force_exit and loop.time() < deadline:
            await asyncio.sleep(0.002)
        if loop.time() >= deadline:
            for task in state.tasks:
                task.cancel(msg="the test server's graceful shutdown timed out")
        for server in self.servers:
            await server.wait_closed()
        if not self.force_exit:
            await self.lifespan.shutdown()

    def exit_now(self) -> None:
        self.should_exit = True
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # its loop already closed
                self._loop.call_soon_threadsafe(self._told.set)


@contextmanager
def running_server(app: FastAPI, wait_ready: bool = True, timeout_s: float = 120.0) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 (free port) until the block exits; yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    server = _Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    try:
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("test server did not start")
            time.sleep(0.01)
        if wait_ready:
            while httpx.get(f"{url}/ready").status_code != 200:
                if time.monotonic() > deadline:
                    raise RuntimeError("test server's engine did not become ready")
                time.sleep(0.05)
        yield url
    finally:
        server.exit_now()
        thread.join(timeout=15)
        sock.close()
