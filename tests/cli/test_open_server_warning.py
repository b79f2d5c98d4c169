"""`polyvox serve` without an API key warns at start, in one WARNING line naming the address and
port, when it listens beyond loopback, and stays quiet on any loopback address. Real servers."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import httpx

from helpers.serve_process import free_port, polyvox_serve


def warnings_of(log: str) -> list[str]:
    return [line for line in log.splitlines() if "WARNING" in line and "no API key" in line]


def test_every_interface_without_a_key_is_warned_of():
    with polyvox_serve("--no-cache-enabled", host="0.0.0.0") as (proc, url):
        port = url.rsplit(":", 1)[1]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        log = proc.stdout.read()
    (line,) = warnings_of(log)
    assert f"0.0.0.0:{port}, beyond loopback" in line and "api_keys" in line


def test_another_loopback_address_is_not_warned_of():
    port = free_port()
    command = [sys.executable, "-m", "polyvox.cli", "serve", "--host", "127.0.0.2", "--port", str(port)]
    proc = subprocess.Popen(
        [*command, "--no-cache-enabled"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                if httpx.get(f"http://127.0.0.2:{port}/ready").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "polyvox serve never became ready"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = proc.stdout.read()
    assert "127.0.0.2" in log  # it did say where it listens
    assert warnings_of(log) == []
