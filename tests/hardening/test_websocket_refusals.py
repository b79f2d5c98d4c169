"""A refused WebSocket handshake on `polyvox serve` is answered, and logged as an answer, never as an
error: without a key or with a wrong one the client reads 401 in OpenAI's shape, on a path with no
WebSocket route 403, and the server's log holds no ERROR line (uvicorn's own protocol logged each
refusal as "ERROR ... ASGI callable returned without completing handshake")."""

from __future__ import annotations

import json
import signal

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from helpers.serve_process import polyvox_serve

pytest.importorskip("piper")

KEY = "refusals-key"


def refused(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    with pytest.raises(InvalidStatus) as refusal:
        connect(url, additional_headers=headers, open_timeout=30)
    response = refusal.value.response
    return response.status_code, response.body or b""


def test_refused_handshakes_are_answered_and_log_no_error() -> None:
    with polyvox_serve("--no-cache-enabled", "--log-level", "info", "--api-keys", KEY) as (proc, url):
        ws = url.replace("http://", "ws://")
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            status, body = refused(f"{ws}/v1/audio/speech/ws", headers)
            assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key", body
        assert refused(f"{ws}/v1/nowhere", {"Authorization": f"Bearer {KEY}"})[0] == 403
        with connect(
            f"{ws}/v1/audio/speech/ws", additional_headers={"Authorization": f"Bearer {KEY}"}
        ) as open_:
            open_.send(json.dumps({"type": "config"}))
            assert json.loads(open_.recv(timeout=30))["type"] == "ready"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        log = proc.stdout.read()
    assert '"WebSocket /v1/audio/speech/ws" 401' in log  # the refusals are logged, as answers
    assert "ERROR" not in log and "Traceback" not in log, log
