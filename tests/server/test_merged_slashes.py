"""Repeated slashes in a path read as one, before routing and before auth: Open WebUI joins a base URL
ending in `/` with `/audio/speech` and posts to `/v1//audio/speech`, which speaks; `//admin/keys` is
`/admin/keys` to the key check too, so a doubled slash opens no route to a caller without its scope."""

from __future__ import annotations

import io

import httpx
import pytest
import soundfile

USER = "user-key"
ADMIN = "admin-key"


@pytest.fixture
def url(serve, tmp_path) -> str:
    return serve(api_keys=[USER], admin_api_keys=[ADMIN], voices_dir=tmp_path)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_a_doubled_slash_in_the_speech_path_speaks(url: str) -> None:
    for path in ("/v1//audio/speech", "//v1/audio//speech", "/v1///audio/speech"):
        answer = httpx.post(
            f"{url}{path}", json={"input": "Hello there.", "response_format": "wav"}, headers=bearer(USER)
        )
        assert answer.status_code == 200, path
        samples, rate = soundfile.read(io.BytesIO(answer.content))
        assert samples.size > 0 and rate == 24000


def test_the_merged_path_is_the_one_auth_and_scopes_check(url: str) -> None:
    assert httpx.get(f"{url}//admin/keys").status_code == 401
    refused = httpx.get(f"{url}//admin//keys", headers=bearer(USER))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "admin_key_required"
    assert httpx.get(f"{url}//admin//keys", headers=bearer(ADMIN)).status_code == 200
