"""`polyvox serve --api-server-count 2 --data-parallel-size 2` on the CPU (tiny random weights): a launcher,
two API server processes sharing its port, two engine ranks it owns. Speech through the official client
from either API process, `/metrics` from either counting all of them, bursts of keep-alive connections
spread over both processes, a LoRA adapter named at start
(fixed: /admin/lora cannot change it); kill -9 of an API process (the
other serves on and it is replaced) and of an engine rank (the requests it held with no audio yet are
sent to the other rank by whichever API process held them; both follow its restart); SIGTERM drains
both API processes (the idle one answering 503 until the other is done) and both ranks and leaves no
process. The tests share one server and run in file order: the last one stops it.

With the embedded voice (no engine ranks) each API process runs its own; an API process that cannot
start (a malformed lexicon file) stops the launcher with a message."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import httpx
import openai
import pytest

from engine.processes import alive, engine_pid_of_rank, engine_pids, freeze, frozen, kill9
from engine.serving import (
    FLAGS,
    LONG,
    LONG_SEED,
    SPEECH,
    Stream,
    rerouted,
    routed_per_rank,
    speak,
)
from helpers.audio import decode
from helpers.connection_owners import connection_counts, owner_of
from helpers.metrics import scrape, value
from helpers.raw_http import address
from helpers.serve_process import free_port, polyvox_serve
from helpers.waiting import wait_until
from polyvox.models.lora.files import AdapterConfig
from polyvox.models.lora.random_adapter import write_random_adapter
from polyvox.models.voxcpm2.config import VoxCPM2Config
from polyvox.models.voxcpm2.model import VoxCPM2LM
from polyvox.server.multi_api.launcher import Launcher
from polyvox.settings import Settings

SPEECH_OK = {"route": SPEECH, "method": "POST", "status": "200"}


def routed(samples: dict) -> float:
    return sum(
        value(samples, "polyvox_engine_routed_requests_total", rank=str(rank), reason=reason)
        for rank in range(2)
        for reason in ("affinity", "load")
    )


def api_pids(launcher: int) -> list[int]:
    engines = {engine_pid_of_rank(launcher, rank) for rank in range(2)}
    return [pid for pid in engine_pids(launcher) if pid not in engines]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[subprocess.Popen, str]]:
    voices = tmp_path_factory.mktemp("voices")
    model = VoxCPM2LM(VoxCPM2Config.tiny())
    lora = AdapterConfig(enable_lm=True, enable_dit=True, r=8, alpha=16)
    adapter = write_random_adapter(
        model, tmp_path_factory.mktemp("lora") / "carol", lora, model.lora_default_proj
    )
    flags = (
        *FLAGS, "--api-server-count", "2", "--voices-dir", str(voices), "--shutdown-grace-s", "120",
        "--lora", f"carol={adapter}",
    )  # fmt: skip
    with polyvox_serve(*flags) as (proc, url):
        wait_until(lambda: httpx.get(f"{url}/ready").json().get("status") == "ready", "both ranks serve")
        for voice in ("alloy", "echo"):  # frozen on first use: done here, before the tests count anything
            assert speak(url, "Warm up.", voice).status_code == 200
        yield proc, url


def test_two_api_processes_share_the_port_and_metrics_count_them_all(server):
    proc, url = server
    assert len(api_pids(proc.pid)) == 2
    before = scrape(url)
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)

    def say(n: int) -> bytes:
        voice = ("alloy", "echo")[n % 2]
        return client.audio.speech.create(
            model="voxcpm2", voice=voice, input=f"Request number {n}.", response_format="wav"
        ).content

    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(say, range(12)))
    for audio in answers:
        samples, rate = decode(audio)
        assert rate == 24000 and samples.size > 0
    for _ in range(4):  # whichever process answers the scrape counts both processes' requests
        after = scrape(url)
        assert (
            value(after, "polyvox_requests_total", **SPEECH_OK)
            - value(before, "polyvox_requests_total", **SPEECH_OK)
            == 12
        )
        assert routed(after) - routed(before) == 12  # one piece each, routed by one process or the other
        assert value(after, "polyvox_requests_in_flight") == 0
        assert value(after, "polyvox_voice_builtin_freezes_total") == 2  # alloy and echo, once between them


BURST = 192  # keep-alive connections opened at once, as a proxy's pool fills
BURSTS = 16
HEALTH = b"GET /health HTTP/1.1\r\nHost: polyvox\r\n\r\n"


def test_keep_alive_connections_opened_in_a_burst_spread_over_both_api_processes(server):
    """Each connection is counted by the process that accepted it, as the kernel's socket table says.
    The kernel deals connections to the processes' sockets at random, evenly: one process holding more
    than two thirds of a burst of 192 has probability 2.2e-6 (binomial), so 16 bursts fail falsely with
    probability 3.5e-5. One socket shared by both processes gave most of a burst to whichever process
    woke first (16 of 16 in the issue; here, 4 bursts of 20 within two thirds, and 3 with every
    connection on one process: all 16 within two thirds, about 1e-11)."""
    proc, url = server
    pids = api_pids(proc.pid)
    for _ in range(BURSTS):
        held = burst(url, pids)
        assert sum(held.values()) == BURST and max(held.values()) <= BURST * 2 // 3, held


def burst(url: str, pids: list[int]) -> dict[int, int]:
    """Open BURST connections at once; once every one is accepted, how many each of `pids` holds. Each
    then answers a keep-alive GET /health (a live HTTP connection of its process) before it is closed."""
    host, port = address(url)
    connections = [socket.create_connection((host, port)) for _ in range(BURST)]
    ours = {connection.getsockname()[1] for connection in connections}
    held: dict[int, int] = {}

    def all_accepted() -> bool:
        held.update(connection_counts(pids, port, ours))
        return sum(held.values()) == BURST

    try:
        wait_until(all_accepted, "every connection is accepted")
        for connection in connections:
            connection.sendall(HEALTH)
        for connection in connections:
            assert connection.makefile("rb").readline().startswith(b"HTTP/1.1 200 ")
    finally:
        for connection in connections:
            connection.close()
    return held


def statuses_by_process(url: str, pids: list[int], path: str = "/ready") -> dict[int, int]:
    """GET `path` on fresh connections until each of `pids` has answered one: the status each gave (a
    connection goes to one process or the other at random, so asking N times may never reach one)."""
    statuses: dict[int, int] = {}
    while set(statuses) != set(pids):
        with socket.create_connection(address(url)) as connection:
            owner = owner_of(connection, pids)
            connection.sendall(f"GET {path} HTTP/1.1\r\nHost: polyvox\r\nConnection: close\r\n\r\n".encode())
            statuses[owner] = int(connection.makefile("rb").readline().split()[1])
    return statuses


def every_process_ready(url: str, pids: list[int]) -> bool:
    return set(statuses_by_process(url, pids).values()) == {200}


def test_adapters_named_at_start_speak_through_every_api_process_and_cannot_change_at_run_time(server):
    _, url = server
    for _ in range(4):  # whichever process takes it knows the adapter
        answer = httpx.post(f"{url}{SPEECH}", json={"input": "Fine-tuned.", "voice": "carol"}, timeout=120)
        assert answer.status_code == 200, answer.text
        assert decode(answer.content)[0].size > 0
    for attempt in (
        httpx.post(f"{url}/admin/lora", json={"name": "dave", "path": "/nowhere"}),
        httpx.delete(f"{url}/admin/lora/carol"),
    ):
        assert attempt.status_code == 409
        error = attempt.json()["error"]
        assert error["code"] == "adapters_fixed_at_start" and "--lora" in error["message"]


def test_each_api_process_gets_its_share_of_the_limits():
    settings = Settings(api_server_count=3, max_concurrent_requests=64, max_queue=256, cache_max_bytes=3000)
    share = Launcher(settings)._child_settings()
    assert (share.max_concurrent_requests, share.max_queue, share.cache_max_bytes) == (22, 86, 1000)
    shared_cache = settings.model_copy(update={"state_url": "redis://127.0.0.1:1/0"})
    assert Launcher(shared_cache)._child_settings().cache_max_bytes == 3000  # Redis keeps one cap


def test_kill_9_of_an_api_process_is_replaced_while_the_other_serves_on(server):
    proc, url = server
    victim, survivor = api_pids(proc.pid)
    served = value(scrape(url), "polyvox_requests_total", **SPEECH_OK)
    kill9(victim)
    for n in range(4):  # one the kernel deals the dead process's socket waits for its replacement's engine
        assert speak(url, f"Still here {n}.").status_code == 200
    wait_until(lambda: len(api_pids(proc.pid)) == 2, "the launcher starts a new API process")
    assert survivor in api_pids(proc.pid) and victim not in api_pids(proc.pid)
    wait_until(lambda: every_process_ready(url, api_pids(proc.pid)), "both ready")
    assert speak(url, "And again.").status_code == 200
    # the dead process's requests still count; its in-flight gauge no longer does
    samples = scrape(url)
    assert value(samples, "polyvox_requests_total", **SPEECH_OK) >= served + 5
    assert value(samples, "polyvox_requests_in_flight") == 0


FROZEN_S = 6.0


def test_a_restarted_api_process_accepts_only_once_its_engine_is_ready(server):
    """A connection the kernel deals a dead API process's socket waits for its replacement, which takes
    it only once its engine links are up: it is served, not answered 503 engine_not_ready. Both ranks
    are frozen (SIGSTOP) through the restart, so the replacement's engine cannot be ready before they
    go on: for FROZEN_S the request gets no answer at all (the replacement, started in about 1.5 s here,
    would have answered 503 in that time), then it is served."""
    proc, url = server
    victim, survivor = api_pids(proc.pid)
    ranks = [engine_pid_of_rank(proc.pid, rank) for rank in range(2)]
    for pid in ranks:
        freeze(pid)
    try:
        kill9(victim)
        # read in one look: a process just forked is the launcher's copy until it runs Python's spawn
        found: list[int] = []

        def replaced() -> bool:
            found[:] = [pid for pid in api_pids(proc.pid) if pid not in (victim, survivor)]
            return len(found) == 1

        wait_until(replaced, "the launcher starts a new API process")
        replacement = found[0]
        waiting = connection_to_socket_of(url, replacement, survivor)
        body = b'{"input": "Waited for.", "voice": "alloy", "response_format": "pcm"}'
        waiting.sendall(
            b"POST /v1/audio/speech HTTP/1.1\r\nHost: polyvox\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        waiting.settimeout(FROZEN_S)
        with pytest.raises(TimeoutError):
            waiting.recv(1)
    finally:
        for pid in ranks:
            os.kill(pid, signal.SIGCONT)
    waiting.settimeout(120)
    with waiting:
        assert waiting.makefile("rb").readline().startswith(b"HTTP/1.1 200 ")
    wait_until(lambda: every_process_ready(url, api_pids(proc.pid)), "both ready")


def connection_to_socket_of(url: str, process: int, other: int) -> socket.socket:
    """A connection the kernel dealt to `process`'s socket (of two): one `other` has not taken within a
    second, or one `process` took."""
    while True:
        connection = socket.create_connection(address(url))
        try:
            if owner_of(connection, [process, other], timeout_s=1.0) == process:
                return connection
        except TimeoutError:
            return connection
        connection.close()


def test_kill_9_of_an_engine_rank_sends_its_requests_with_no_audio_to_the_other_from_either_api_process(
    server,
):
    """Rank 0 frozen (SIGSTOP: it takes what it is sent and answers nothing), requests sent through the
    port one after another until two are routed to it (each API process routes on the loads it sees);
    kill -9 of it: every request is served whole, those on rank 0 sent again to rank 1 by the API
    process that held them; a scrape of either process counts each of them once, and both follow the
    restart."""
    proc, url = server
    before = scrape(url)
    victim = engine_pid_of_rank(proc.pid, 0)
    freeze(victim)
    streams: list[Stream] = []
    threads: list[threading.Thread] = []

    def routed(samples: dict) -> list[float]:
        now, then = routed_per_rank(samples), routed_per_rank(before)
        return [now[rank] - then[rank] for rank in range(2)]

    while sum(routed(scrape(url))) < 16 and routed(scrape(url))[0] < 2:
        streams.append(Stream(f"Sent while rank 0 sleeps, {len(streams)}.", seed=400 + len(streams)))
        threads.append(threading.Thread(target=streams[-1].run, args=(url,)))
        threads[-1].start()
        wait_until(lambda: sum(routed(scrape(url))) == len(streams), f"request {len(streams)} is routed")
    on_rank_0 = routed(scrape(url))[0]
    assert on_rank_0 >= 2, "no two requests were sent to rank 0"
    kill9(victim)
    for thread in threads:
        thread.join(timeout=120)
    for stream in streams:
        assert stream.ended == "done", (stream.text, stream.ended, stream.code)
        assert decode(bytes(stream.audio))[0].size > 0
    for _ in range(4):  # whichever process answers counts those both processes sent again
        samples = scrape(url)
        assert rerouted(samples, 0) - rerouted(before, 0) == on_rank_0
        assert rerouted(samples, 1) == rerouted(before, 1)

    wait_until(lambda: all(httpx.get(f"{url}/ready").status_code == 200 for _ in range(4)), "back", 90)
    wait_until(lambda: all(httpx.get(f"{url}/ready").json()["status"] == "ready" for _ in range(4)), "both")
    for n in range(4):  # both ranks, from both API processes
        assert speak(url, f"After the restart {n}.", ("alloy", "echo")[n % 2]).status_code == 200
    assert value(scrape(url), "polyvox_engine_rank_restarts_total", rank="0") == 1


def test_sigterm_drains_both_api_processes_and_both_ranks_then_nothing_is_left(server):
    """The API process with nothing in flight keeps its socket and answers 503 until the other has
    drained too (had it gone at once, the connections the kernel had just dealt it would be reset). The
    engine ranks are stopped while the drain is looked at, so the request is in flight on any machine."""
    proc, url = server
    children, api = engine_pids(proc.pid), api_pids(proc.pid)
    assert len(children) == 4
    routed_before = sum(routed_per_rank(scrape(url)))
    answer: dict[str, httpx.Response] = {}
    thread = threading.Thread(target=lambda: answer.setdefault("long", speak(url, LONG, seed=LONG_SEED)))
    with frozen([engine_pid_of_rank(proc.pid, rank) for rank in range(2)]):
        thread.start()
        wait_until(lambda: value(scrape(url), "polyvox_requests_in_flight") == 1, "it is in flight")
        wait_until(lambda: sum(routed_per_rank(scrape(url))) == routed_before + 1, "it is sent to a rank")
        proc.send_signal(signal.SIGTERM)
        wait_until(lambda: set(statuses_by_process(url, api).values()) == {503}, "both drain", 10)
        refused = speak(url, "Too late.")
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "shutting_down"
        assert thread.is_alive() and all(alive(pid) for pid in api)
    thread.join(timeout=120)
    assert answer["long"].status_code == 200 and len(answer["long"].content) > 24000 * 2 * 2
    assert proc.wait(timeout=60) == 0
    wait_until(lambda: not any(alive(pid) for pid in children), "every child exited", timeout=10)


def test_the_embedded_voice_runs_in_each_api_process_and_a_process_that_cannot_start_stops_the_launcher(
    tmp_path,
):
    flags = ("--api-server-count", "2", "--voices-dir", str(tmp_path / "voices"), "--log-level", "warning")
    with polyvox_serve(*flags) as (proc, url):
        processes = engine_pids(proc.pid)
        assert len(processes) == 2  # two API processes, no engine
        wait_until(lambda: every_process_ready(url, processes), "each has its voice ready")
        audio, _ = decode(httpx.post(f"{url}{SPEECH}", json={"input": "Hello.", "voice": "alloy"}).content)
        assert audio.size > 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0

    bad = tmp_path / "lexicon.json"
    bad.write_text("{not json")
    command = [sys.executable, "-m", "polyvox.cli", "serve", "--port", str(free_port()), *flags]
    done = subprocess.run([*command, "--lexicon-path", str(bad)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "lexicon_path" in done.stderr and "could not start" in done.stderr, done.stderr
