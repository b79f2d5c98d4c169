"""`WyomingServer`: the `wyoming_port` listener, started and stopped by the app's lifespan, one
`WyomingConnection` per client. Wyoming has no authentication: a warning says so at start when it
listens beyond loopback."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging

from polyvox.server.app_state import AppState
from polyvox.server.wyoming.connection import WyomingConnection
from polyvox.server.wyoming.speech import WyomingSpeech

log = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WyomingServer:
    def __init__(self, speech: WyomingSpeech, host: str, port: int, reuse_port: bool = False):
        """`reuse_port`: several API processes (api_server_count) each listen on the one port."""
        self.speech = speech
        self.host = host
        self.port = port
        self.reuse_port = reuse_port
        self.server: asyncio.Server | None = None
        self.connections: set[asyncio.Task] = set()

    @classmethod
    def for_app(cls, state: AppState) -> WyomingServer | None:
        settings = state.settings
        if settings.wyoming_port is None:
            return None
        speech = WyomingSpeech(state.service, state.tenancy, state.shared or state.directory_watch)
        return cls(speech, settings.wyoming_host, settings.wyoming_port, settings.api_server_count > 1)

    async def start(self) -> None:
        self.server = await asyncio.start_server(
            self._connected, self.host, self.port, reuse_port=self.reuse_port or None
        )
        log.info("Wyoming TTS (Home Assistant) on tcp://%s:%d", self.host, self.port)
        if not is_loopback(self.host):
            key = self.speech.service.settings.wyoming_api_key_name
            whose = f"the key {key!r}'s" if key else "the server's"
            log.warning(
                "the Wyoming port listens on %s, beyond loopback, and Wyoming has no authentication: "
                "anyone who reaches tcp://%s:%d speaks with %s voices and limits",
                self.host,
                self.host,
                self.port,
                whose,
            )

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self.connections):
            task.cancel()
        await asyncio.gather(*self.connections, return_exceptions=True)
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 5)

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        try:
            await WyomingConnection(reader, writer, self.speech).serve()
        except Exception:
            log.exception("wyoming connection failed")
        finally:
            self.connections.discard(task)
