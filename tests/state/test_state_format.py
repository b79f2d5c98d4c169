"""The format version of the shared state in Redis (`polyvox:format`), with a real redis-server: a
server writes format 1 where there is none; `polyvox serve` refuses, in one line, a Redis holding a
newer format; a Redis found later (after an outage) in a newer format is taken as down (changes refused
saying why) until its format is one this polyvox reads."""

from __future__ import annotations

import json
import subprocess
import sys

import redis

from helpers.serve_process import free_port, polyvox_serve
from polyvox import __version__
from polyvox.state.connection import StateConnection

NEWER = json.dumps({"format": 99, "written_by": "polyvox 9.9.9"})


def test_serve_writes_the_format_and_refuses_a_newer_one(redis_server, tmp_path):
    client = redis.Redis.from_url(redis_server.url)
    voices = str(tmp_path / "voices")
    flags = ("--state-url", redis_server.url, "--voices-dir", voices, "--log-level", "warning")
    with polyvox_serve(*flags):
        written = json.loads(client.get("polyvox:format"))
    assert written == {"format": 1, "written_by": f"polyvox {__version__}"}

    client.set("polyvox:format", NEWER)
    command = [sys.executable, "-m", "polyvox.cli", "serve", "--port", str(free_port()), *flags]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    line = next(line for line in done.stderr.splitlines() if "format 99" in line)
    assert "written by polyvox 9.9.9" in line and "upgrade polyvox" in line, line
    assert json.loads(client.get("polyvox:format"))["format"] == 99  # left as it was


def test_a_redis_found_again_in_a_newer_format_is_taken_as_down(redis_server):
    client = redis.Redis.from_url(redis_server.url)
    redis_server.stop()
    connection = StateConnection(redis_server.url)
    assert not connection.check()  # unreachable: nothing to check yet
    redis_server.start()  # empty (no persistence): as another polyvox left it, say
    client.set("polyvox:format", NEWER)
    assert not connection.check()
    assert not connection.available
    assert "format 99" in connection.describe() and "cannot be used" in connection.describe()

    client.delete("polyvox:format")  # state from before format versions: this polyvox reads it
    assert connection.check()
    assert connection.available and connection.format_error is None
    assert json.loads(client.get("polyvox:format"))["format"] == 1
    connection.close()
