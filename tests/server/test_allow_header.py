"""A 405's `Allow` header lists every method the path is served with, whichever route pattern matched
first: `/admin/lexicon/reload` (also matched by `DELETE /admin/lexicon/{term}`) and `/health` (a GET and
a HEAD route)."""

from __future__ import annotations

import httpx
import pytest

ADMIN = {"Authorization": "Bearer admin-key"}


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("OPTIONS", "/admin/lexicon/reload", {"POST", "DELETE"}),
        ("PUT", "/admin/lexicon/reload", {"POST", "DELETE"}),
        ("POST", "/health", {"GET", "HEAD"}),
        ("DELETE", "/v1/audio/speech", {"POST"}),
        ("PUT", "/v1/audio/voices/alloy", {"GET", "POST", "DELETE"}),
    ],
)
def test_allow_lists_the_methods_the_path_is_served_with(serve, method: str, path: str, allowed: set) -> None:
    url = serve(admin_api_keys=["admin-key"])
    answer = httpx.request(method, url + path, headers=ADMIN)
    assert answer.status_code == 405, answer.text
    assert answer.json()["error"]["code"] == "method_not_allowed"
    assert set(answer.headers["allow"].split(", ")) == allowed
