"""The lexicon's bounds through `/admin/lexicon` on a real server: a term over 200 characters, a spoken
form over 1,000, or either holding a control character is a 400 naming the field, and nothing is
saved; any term can be deleted by a JSON body, a term of the longest kind by its URL too."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from helpers.server import running_server
from polyvox.backends.factory import build_text_pipeline
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings
from polyvox.text.lexicon import Lexicon, LexiconError


@pytest.fixture
def lexicon_server(tmp_path):
    """A server with the fake engine behind the text front end, its lexicon saved to `lexicon.json`."""
    settings = Settings(lexicon_path=tmp_path / "lexicon.json")
    backend = FakeBackend()
    with running_server(create_app(settings, backend, build_text_pipeline(settings, backend))) as url:
        yield url, backend, settings.lexicon_path


def saved(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


@pytest.mark.parametrize(
    ("entry", "param", "says"),
    [
        ({"term": "x" * 1_000_000, "say": "long"}, "term", "the limit is 200"),
        ({"term": "x" * 201, "say": "long"}, "term", "the limit is 200"),
        ({"term": "NUL\x00here", "say": "nul"}, "term", "U+0000"),
        ({"term": "ESC\x1b[31m", "say": "escape"}, "term", "U+001B"),
        ({"term": "fine", "say": "y" * 1001}, "say", "the limit is 1000"),
        ({"term": "fine", "say": "two\nlines"}, "say", "U+000A"),
    ],
    ids=["a million characters", "201 characters", "NUL", "ESC", "long spoken form", "newline"],
)
def test_an_entry_past_the_bounds_is_refused_naming_its_field(lexicon_server, entry, param, says):
    url, _, path = lexicon_server
    answer = httpx.post(f"{url}/admin/lexicon", json=entry, timeout=60)
    assert answer.status_code == 400, answer.text[:300]
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == (param, "invalid_lexicon_entry")
    assert says in error["message"] and len(error["message"]) < 300  # a huge term is not echoed back
    assert httpx.get(f"{url}/admin/lexicon").json()["data"] == [] and saved(path) == {}


def test_terms_within_the_bounds_are_spoken_and_deleted_by_body_or_url(lexicon_server):
    url, backend, path = lexicon_server
    longest = "张" * 200  # 1,800 characters of URL once percent-encoded
    odd = "C/C++ #1?"  # a slash, a hash and a question mark: awkward in a URL
    for term, say in ((longest, "zhang"), (odd, "see plus plus"), ("SQL", "sequel")):
        assert httpx.post(f"{url}/admin/lexicon", json={"term": term, "say": say}).status_code == 201
    assert set(saved(path)) == {longest, odd, "SQL"}

    spoken = httpx.post(
        f"{url}/v1/audio/speech",
        json={"input": "Use SQL here.", "normalize": False, "response_format": "pcm"},
    )
    assert spoken.status_code == 200 and backend.last_request.text == "Use sequel here."

    by_body = httpx.request("DELETE", f"{url}/admin/lexicon", json={"term": odd})
    assert by_body.status_code == 200 and by_body.json() == {"term": odd, "deleted": True}
    by_url = httpx.delete(f"{url}/admin/lexicon/{longest}")
    assert by_url.status_code == 200 and by_url.json()["term"] == longest
    assert set(saved(path)) == {"SQL"}

    missing = httpx.request("DELETE", f"{url}/admin/lexicon", json={"term": odd})
    assert missing.status_code == 404 and missing.json()["error"]["param"] == "term"
    no_term = httpx.request("DELETE", f"{url}/admin/lexicon", json={})
    assert no_term.status_code == 400 and no_term.json()["error"]["param"] == "term"


def test_a_lexicon_file_with_a_term_past_the_bound_is_refused_naming_it(tmp_path):
    path = tmp_path / "lexicon.json"
    path.write_text(json.dumps({"ok": "fine", "x" * 500: "long"}), encoding="utf-8")
    with pytest.raises(LexiconError, match="the limit is 200"):
        Lexicon.load(path)
