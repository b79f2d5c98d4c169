"""The lexicon admin API on a real server: entries change what the engine is asked to say, persist to
the lexicon file, reload from it, never serve stale cached audio, and need an admin key."""

from __future__ import annotations

import json

import httpx
import pytest


def speak(url: str, text: str) -> httpx.Response:
    """Speak `text` without normalisation, so the engine gets exactly what the lexicon made of it."""
    payload = {"input": text, "response_format": "pcm", "normalize": False}
    response = httpx.post(f"{url}/v1/audio/speech", json=payload, timeout=60)
    assert response.status_code == 200, response.text
    return response


def test_entries_take_effect_persist_and_can_be_removed(tiny_server, tmp_path):
    path = tmp_path / "lexicon.json"
    url, backend = tiny_server(lexicon_path=path)
    assert httpx.get(f"{url}/admin/lexicon").json() == {"object": "list", "data": [], "path": str(path)}

    added = httpx.post(f"{url}/admin/lexicon", json={"term": "SQL", "say": "sequel"})
    assert added.status_code == 201 and added.json() == {
        "term": "SQL",
        "say": "sequel",
        "case_sensitive": False,
    }
    speak(url, "We store it in SQL, not in MySQL.")
    assert backend.texts[-1] == "We store it in sequel, not in MySQL."
    assert json.loads(path.read_text()) == {"SQL": "sequel"}
    assert [entry["term"] for entry in httpx.get(f"{url}/admin/lexicon").json()["data"]] == ["SQL"]

    assert httpx.delete(f"{url}/admin/lexicon/SQL").json() == {"term": "SQL", "deleted": True}
    speak(url, "We store it in SQL.")
    assert backend.texts[-1] == "We store it in SQL."
    assert json.loads(path.read_text()) == {}
    missing = httpx.delete(f"{url}/admin/lexicon/SQL")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_reload_reads_a_hand_edited_file_and_bad_input_is_a_400(tiny_server, tmp_path):
    path = tmp_path / "lexicon.json"
    path.write_text(json.dumps({"Xi'an": "shee ahn"}), encoding="utf-8")
    url, backend = tiny_server(lexicon_path=path)
    speak(url, "Xi'an is old.")
    assert backend.texts[-1] == "shee ahn is old."

    path.write_text(json.dumps({"Xi'an": "she-an", "nginx": {"say": "engine x", "case_sensitive": True}}))
    reloaded = httpx.post(f"{url}/admin/lexicon/reload")
    assert [entry["say"] for entry in reloaded.json()["data"]] == ["she-an", "engine x"]
    speak(url, "Xi'an runs nginx, not NGINX.")
    assert backend.texts[-1] == "she-an runs engine x, not NGINX."

    path.write_text("[1, 2]")
    broken = httpx.post(f"{url}/admin/lexicon/reload")
    assert broken.status_code == 400 and broken.json()["error"]["code"] == "invalid_lexicon"
    speak(url, "Xi'an again.")
    assert backend.texts[-1] == "she-an again."  # the entries in use stay

    for bad in ({"term": " padded ", "say": "x"}, {"term": "ok", "say": "   "}, {"term": "ok"}):
        answer = httpx.post(f"{url}/admin/lexicon", json=bad)
        assert answer.status_code == 400, bad
        assert set(answer.json()["error"]) == {"message", "type", "param", "code"}


def test_a_lexicon_edit_is_not_answered_from_the_audio_cache(tiny_server, tmp_path):
    url, backend = tiny_server(cache_enabled=True, cache_dir=tmp_path / "cache")
    assert speak(url, "Deploy to GKE.").headers["x-cache"] == "MISS"
    assert speak(url, "Deploy to GKE.").headers["x-cache"] == "HIT"
    httpx.post(f"{url}/admin/lexicon", json={"term": "GKE", "say": "G K E"})
    assert speak(url, "Deploy to GKE.").headers["x-cache"] == "MISS"
    assert backend.texts[-1] == "Deploy to G K E."


@pytest.mark.parametrize(("key", "status"), [(None, 401), ("user", 403), ("boss", 201)])
def test_editing_the_lexicon_needs_an_admin_key(tiny_server, key, status):
    url, _ = tiny_server(api_keys=["user"], admin_api_keys=["boss"])
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    answer = httpx.post(f"{url}/admin/lexicon", json={"term": "k8s", "say": "kubernetes"}, headers=headers)
    assert answer.status_code == status
