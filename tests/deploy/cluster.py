"""Several `polyvox serve` replicas sharing one redis-server behind one nginx running the shipped
upstream configuration (deploy/nginx/polyvox.conf), all real processes on loopback."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from deploy.tools import DEPLOY
from helpers import nginx
from helpers.redis_server import RedisServer
from helpers.serve_process import free_port


def binary(name: str, package: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        pytest.skip(f"{name} not installed (Debian package {package}; .ci/run installs it)")
    return found


@dataclass
class Replica:
    port: int
    proc: subprocess.Popen
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class Cluster:
    redis: RedisServer
    replicas: list[Replica]
    url: str  # nginx
    tmp: Path
    procs: list[subprocess.Popen] = field(default_factory=list)


def _start(
    port: int, flags: list[str], tmp: Path, index: int, redis_url: str, sync_interval_s: float
) -> Replica:
    log = tmp / f"replica-{index}.log"
    command = [
        sys.executable, "-m", "polyvox.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
        "--state-url", redis_url, "--state-sync-interval-s", str(sync_interval_s),
        "--voices-dir", str(tmp / f"voices-{index}"),
        "--cache-enabled", "--cache-dir", str(tmp / f"cache-{index}"),
        "--log-level", "warning", *flags,
    ]  # fmt: skip
    with open(log, "w") as out:
        proc = subprocess.Popen(command, env=dict(os.environ), stdout=out, stderr=subprocess.STDOUT)
    return Replica(port, proc, log)


def wait_ready(replicas: list[Replica], timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    pending = list(replicas)
    while pending:
        for replica in list(pending):
            assert replica.proc.poll() is None, replica.output()
            try:
                if httpx.get(f"{replica.url}/ready", timeout=2).status_code == 200:
                    pending.remove(replica)
            except httpx.TransportError:
                pass
        assert time.monotonic() < deadline, "replicas never became ready: " + pending[0].output()
        time.sleep(0.2)


@contextmanager
def cluster(
    tmp: Path, flags: list[str], replicas: int = 3, sync_interval_s: float = 0.2
) -> Iterator[Cluster]:
    """`replicas` polyvox processes started at once with `flags`, one Redis, one nginx in front; each
    replica syncs with Redis in the background every `sync_interval_s`."""
    redis = RedisServer(binary("redis-server", "redis-server"))
    nginx_binary = binary("nginx", "nginx")
    with ExitStack() as stack:
        redis.start()
        stack.callback(redis.close)
        members = [_start(free_port(), flags, tmp, i, redis.url, sync_interval_s) for i in range(replicas)]
        stack.callback(_stop, [member.proc for member in members])
        wait_ready(members)
        port = free_port()
        shipped = (DEPLOY / "nginx" / "polyvox.conf").read_text()
        conf = nginx.retarget(shipped, [f"127.0.0.1:{m.port}" for m in members], port)
        url = stack.enter_context(nginx.running_nginx(nginx_binary, conf, port))
        yield Cluster(redis, members, url, tmp)


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGINT to every replica still running, then wait for each: they shut down side by side."""
    running = [proc for proc in procs if proc.poll() is None]
    for proc in running:
        proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 20
    for proc in running:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def eventually(check, what: str, timeout_s: float = 30.0):
    """Poll `check()` until it returns something truthy; fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.2)
