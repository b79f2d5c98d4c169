"""The playground's routes without a browser: the page and its assets are open when keys are on,
`/ui/config` is an API route (key needed) that reports the server's limits, `--no-ui` removes the
page, and the WebSocket route takes its key as a browser can send it (a subprotocol)."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

KEY = "a/b+c="  # '/', '+' and '=' may not appear in a subprotocol: the key travels base64url-encoded


def key_subprotocol(key: str) -> str:
    return "polyvox.key." + base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def test_page_and_assets_are_open_while_the_api_needs_a_key(serve):
    url = serve(api_keys=[KEY], max_input_chars=1234, instructions_mode="ignore")
    for path in ("/", "/ui"):
        page = httpx.get(url + path)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert 'src="ui/assets/js/main.js"' in page.text
    script = httpx.get(url + "/ui/assets/js/main.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert httpx.get(url + "/ui/assets/style.css").headers["content-type"].startswith("text/css")
    assert httpx.get(url + "/ui/assets/js/missing.js").status_code == 404

    refused = httpx.get(url + "/ui/config")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
    config = httpx.get(url + "/ui/config", headers={"Authorization": f"Bearer {KEY}"}).json()
    assert config["max_input_chars"] == 1234
    assert config["engine"] == "fake" and config["can_clone"] is False
    assert config["instructions_mode"] == "ignore" and config["default_sample_rate"] == 24000


def test_no_ui_serves_no_page(serve):
    url = serve(ui=False)
    assert httpx.get(url + "/").status_code == 404
    assert httpx.get(url + "/ui/assets/js/main.js").status_code == 404
    assert httpx.get(url + "/v1/models").status_code == 200


def test_websocket_takes_the_key_as_a_subprotocol_and_never_echoes_it(serve):
    url = serve(api_keys=[KEY]).replace("http://", "ws://") + "/v1/audio/speech/ws"
    with connect(url, subprotocols=["polyvox", key_subprotocol(KEY)]) as socket:
        assert socket.subprotocol == "polyvox"
        socket.send(json.dumps({"type": "config", "voice": "alloy"}))
        assert json.loads(socket.recv(timeout=30))["type"] == "ready"
    with pytest.raises(InvalidStatus) as refused:
        connect(url, subprotocols=["polyvox", key_subprotocol("wrong")])
    assert refused.value.response.status_code == 401


def test_ui_voices_gives_every_voices_details_in_one_answer_and_only_with_a_key(serve):
    url = serve(api_keys=[KEY], public_model_list=True)
    listed = httpx.get(url + "/v1/audio/voices")  # the open list names voices, nothing more
    assert listed.status_code == 200
    assert all(set(voice) == {"id", "name"} for voice in listed.json()["voices"])
    refused = httpx.get(url + "/ui/voices")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"

    auth = {"Authorization": f"Bearer {KEY}"}
    answer = httpx.get(url + "/ui/voices", headers=auth).json()
    assert [voice["id"] for voice in answer["data"]] == [voice["id"] for voice in listed.json()["voices"]]
    one_by_one = [
        httpx.get(f"{url}/v1/audio/voices/{voice['id']}", headers=auth).json() for voice in answer["data"]
    ]
    assert answer["data"] == one_by_one
    assert answer["default"] == "alloy"


def test_ui_voices_needs_the_voices_scope_as_the_voice_routes_do(serve, tmp_path):
    url = serve(admin_api_keys=["admin-key"], voices_dir=tmp_path)  # its named keys stay its own
    admin = {"Authorization": "Bearer admin-key"}

    def named(scopes: list[str]) -> dict[str, str]:
        made = httpx.post(
            url + "/admin/keys", json={"name": "-".join(scopes), "scopes": scopes}, headers=admin
        )
        return {"Authorization": f"Bearer {made.json()['key']}"}

    speech_only, voices = named(["speech"]), named(["voices"])
    for path in ("/v1/audio/voices/alloy", "/ui/voices"):
        refused = httpx.get(url + path, headers=speech_only)
        assert refused.status_code == 403, path
        assert refused.json()["error"]["code"] == "insufficient_scope"
        assert httpx.get(url + path, headers=voices).status_code == 200
    assert (
        httpx.get(url + "/ui/config", headers=speech_only).status_code == 200
    )  # what the page needs to speak
