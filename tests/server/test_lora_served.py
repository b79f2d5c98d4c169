"""LoRA adapters served end to end: `polyvox serve --random-weights tiny --lora alice=DIR` (the command,
as a child process), spoken to through the official `openai` client and decoded with PyAV. An adapter
is a voice of its name, listed with the voices; the `lora` field puts it on another voice; unknown
adapters are refused in OpenAI's error shape; the admin API loads and unloads adapters at run time."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import openai
import pytest

from helpers.audio import decode
from helpers.metrics import parse
from helpers.serve_process import polyvox_serve
from polyvox.models.lora.files import AdapterConfig
from polyvox.models.lora.random_adapter import write_random_adapter
from polyvox.models.voxcpm2.config import VoxCPM2Config
from polyvox.models.voxcpm2.model import VoxCPM2LM

ADMIN = "admin-key"
USER = "user-key"
LORA = AdapterConfig(enable_lm=True, enable_dit=True, r=8, alpha=16)


def adapter(directory, seed: int):
    """A random adapter for the tiny model's shapes, in the official on-disk format."""
    model = VoxCPM2LM(VoxCPM2Config.tiny())
    return write_random_adapter(model, directory, LORA, model.lora_default_proj, seed=seed)


@pytest.fixture(
    scope="module",
    params=[
        ("--no-engine-process",),
        ("--engine-process", "--data-parallel-size", "2"),
    ],
    ids=["in-thread", "two-ranks"],
)
def served(request, tmp_path_factory):
    """The server with its engine in a thread of the server's, and in two data-parallel engine processes
    (an adapter loaded at run time must reach both; one engine process is the two-rank case's subset,
    left out for the suite's time); one adapter slot per rank,
    and long text spoken as one piece (a request holds its adapter for all of it)."""
    root = tmp_path_factory.mktemp("lora")
    flags = (
        "--random-weights", "tiny", "--device", "cpu", "--num-kv-blocks", "512", "--no-cache-enabled",
        "--voices-dir", str(root / "voices"), "--log-level", "warning",
        "--api-keys", USER, "--admin-api-keys", ADMIN,
        "--lora", f"alice={adapter(root / 'alice', seed=1)}", "--lora-max-loaded", "1",
        "--max-piece-chars", "2000", *request.param,
    )  # fmt: skip
    with polyvox_serve(*flags) as (proc, url):
        yield url, root
        assert proc.poll() is None  # still serving after every test


def speak(url: str, voice: str, **extra) -> np.ndarray:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=USER, max_retries=0, timeout=300)
    speech = client.audio.speech.create(
        model="voxcpm2", voice=voice, input="Hello from a fine-tuned voice.", response_format="wav",
        extra_body={"seed": 7, "max_patches": 6, **extra},
    )  # fmt: skip
    samples, rate = decode(speech.content)
    assert rate == 24000 and samples.size > 0 and np.isfinite(samples).all()
    return samples


def routed(url: str) -> list[float]:
    """Requests routed to each engine rank so far (by affinity or load)."""
    answer = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {USER}"})
    counts: dict[str, float] = {}
    for (name, labels), count in parse(answer.text).items():
        if name == "polyvox_engine_routed_requests_total":
            rank = dict(labels)["rank"]
            counts[rank] = counts.get(rank, 0.0) + count
    return [counts[rank] for rank in sorted(counts)]


def wait_until_every_rank_is_up(url: str, timeout: float = 120.0) -> None:
    """/ready answers once one rank serves; an adapter is loaded on every rank, so all must be up."""
    deadline = time.monotonic() + timeout
    while True:
        answer = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {USER}"})
        up = [v for (name, _), v in parse(answer.text).items() if name == "polyvox_engine_up"]
        if up and all(up):
            return
        assert time.monotonic() < deadline, "the engine ranks did not all come up"
        time.sleep(0.2)


def ranks_up(url: str) -> int:
    answer = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {USER}"})
    return sum(1 for (name, _), v in parse(answer.text).items() if name == "polyvox_engine_up" and v)


def differ(a: np.ndarray, b: np.ndarray) -> bool:
    n = min(a.size, b.size)
    return a.size != b.size or float(np.abs(a[:n] - b[:n]).max()) > 1e-3


def test_the_adapter_is_a_voice_that_speaks_differently(served):
    url, _ = served
    base = speak(url, "alloy")
    assert not differ(base, speak(url, "alloy"))  # same seed, same audio: the comparison means something
    assert differ(speak(url, "alice"), base)


def test_the_lora_field_puts_the_adapter_on_another_voice(served):
    url, _ = served
    assert differ(speak(url, "alloy", lora="alice"), speak(url, "alloy"))


def test_the_adapter_is_listed_with_the_voices(served):
    url, _ = served
    auth = {"Authorization": f"Bearer {USER}"}
    webui = httpx.get(f"{url}/v1/audio/voices", headers=auth).json()
    assert {"id": "alice", "name": "alice"} in webui["voices"]
    cards = httpx.get(f"{url}/v1/voices", headers=auth).json()["data"]
    assert [c["source"] for c in cards if c["id"] == "alice"] == ["adapter"]
    one = httpx.get(f"{url}/v1/audio/voices/alice", headers={"Authorization": f"Bearer {USER}"})
    assert one.status_code == 200 and one.json()["description"] == "LoRA adapter, rank 8"


def test_an_unknown_adapter_is_refused_in_openais_shape(served):
    url, _ = served
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=USER, max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.speech.create(model="voxcpm2", voice="alloy", input="Hi.", extra_body={"lora": "bob"})
    error = caught.value.body
    assert error["code"] == "adapter_not_found" and error["param"] == "lora" and "'bob'" in error["message"]


def test_the_admin_api_loads_and_unloads_adapters(served):
    url, root = served
    admin = {"Authorization": f"Bearer {ADMIN}"}
    path = str(adapter(root / "bob", seed=2))
    wait_until_every_rank_is_up(url)
    denied = httpx.post(
        f"{url}/admin/lora", json={"name": "bob", "path": path}, headers={"Authorization": f"Bearer {USER}"}
    )
    assert denied.status_code == 403

    loaded = httpx.post(f"{url}/admin/lora", json={"name": "bob", "path": path}, headers=admin, timeout=60)
    assert loaded.status_code == 201, loaded.text
    assert loaded.json()["rank"] == 8 and loaded.json()["layers"] > 0
    listed = httpx.get(f"{url}/admin/lora", headers=admin).json()
    assert [a["name"] for a in listed["data"]] == ["alice", "bob"]
    bob = speak(url, "bob")
    assert differ(bob, speak(url, "alice"))
    before = routed(url)
    with ThreadPoolExecutor(4) as pool:  # at once, so two ranks both take some: each has the adapter
        assert not any(differ(other, bob) for other in pool.map(lambda _: speak(url, "bob"), range(4)))
    after = routed(url)
    if len(after) == 2:
        assert all(a > b for a, b in zip(after, before, strict=True))  # both ranks spoke with bob

    gone = httpx.delete(f"{url}/admin/lora/bob", headers=admin)
    assert gone.status_code == 200 and gone.json() == {"name": "bob", "deleted": True}
    assert httpx.delete(f"{url}/admin/lora/bob", headers=admin).status_code == 404
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=USER, max_retries=0)
    with pytest.raises(openai.BadRequestError):
        client.audio.speech.create(model="voxcpm2", voice="bob", input="Hi.")


def test_a_malformed_adapter_is_refused_by_the_admin_api(served):
    url, root = served
    broken = adapter(root / "broken", seed=3)
    (broken / "lora_config.json").write_text(
        '{"lora_config": {"enable_lm": true, "enable_dit": true, "r": 4}}'
    )
    answer = httpx.post(
        f"{url}/admin/lora",
        json={"name": "carol", "path": str(broken)},
        headers={"Authorization": f"Bearer {ADMIN}"},
        timeout=60,
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (
        error["code"] == "invalid_adapter"
        and "'carol'" in error["message"]
        and "wrong rank" in error["message"]
    )
    taken = httpx.post(
        f"{url}/admin/lora",
        json={"name": "alloy", "path": str(broken)},
        headers={"Authorization": f"Bearer {ADMIN}"},
    )
    assert taken.status_code == 409 and taken.json()["error"]["code"] == "voice_conflict"


def test_serve_does_not_start_with_an_adapter_that_does_not_fit(tmp_path):
    """With the default engine process; an in-thread engine registers adapters through the same worker."""
    wider = VoxCPM2Config.tiny()
    wider = wider.model_copy(update={"dit_config": wider.dit_config.model_copy(update={"hidden_dim": 48})})
    model = VoxCPM2LM(wider)
    other = write_random_adapter(model, tmp_path / "other", LORA, model.lora_default_proj)
    command = [
        sys.executable, "-m", "polyvox.cli", "serve", "--random-weights", "tiny", "--device", "cpu",
        "--port", "0", "--no-cache-enabled", "--voices-dir", str(tmp_path / "voices"),
        "--lora", f"dave={other}",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "LoRA adapter 'dave'" in done.stdout + done.stderr
    assert "another base model" in done.stdout + done.stderr


def test_a_request_finding_every_adapter_slot_pinned_gets_429_with_retry_after(served):
    """One adapter slot per rank: while alice speaks on every rank, a request for another adapter cannot
    be placed; it is refused as overloaded (429, OpenAI's shape, Retry-After) whether the engine runs in
    a process or in a thread, and speaks once a slot is free again."""
    url, root = served
    admin = {"Authorization": f"Bearer {ADMIN}"}
    wait_until_every_rank_is_up(url)
    path = str(adapter(root / "erin", seed=4))
    loaded = httpx.post(f"{url}/admin/lora", json={"name": "erin", "path": path}, headers=admin, timeout=60)
    assert loaded.status_code == 201, loaded.text
    long_text = "This is a long sentence that goes on for a while, so the model has room to speak. " * 16
    body = {"model": "voxcpm2", "voice": "alice", "input": long_text, "response_format": "pcm", "seed": 7}
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {USER}"}, timeout=300) as http:
        streams = [http.stream("POST", "/v1/audio/speech", json=body) for _ in range(ranks_up(url))]
        try:
            # one per rank (plain requests go to the least loaded); each speaking now, alice's slot pinned
            # (the iterators are kept: one collected would close its stream)
            readers = [stream.__enter__().iter_bytes() for stream in streams]
            for reader in readers:
                next(reader)
            client = openai.OpenAI(base_url=f"{url}/v1", api_key=USER, max_retries=0, timeout=300)
            with pytest.raises(openai.RateLimitError) as caught:
                client.audio.speech.create(model="voxcpm2", voice="erin", input="Hi.", response_format="wav")
        finally:
            for stream in streams:
                stream.__exit__(None, None, None)
    refused = caught.value
    assert refused.status_code == 429 and int(refused.response.headers["Retry-After"]) >= 1
    error = refused.body
    assert error["code"] == "rate_limit_exceeded" and "'erin'" in error["message"]
    assert "adapter slots" in error["message"]
    deadline = time.monotonic() + 60
    while True:  # the closed streams are aborted between steps: their slots come free
        try:
            speak(url, "erin")
            break
        except openai.RateLimitError:
            assert time.monotonic() < deadline, "the adapter slots never came free"
            time.sleep(0.2)
    assert httpx.delete(f"{url}/admin/lora/erin", headers=admin).status_code == 200
