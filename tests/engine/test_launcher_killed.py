"""A launcher killed with -9 (`polyvox serve --api-server-count 2 --data-parallel-size 2`, CPU, tiny random
weights) leaves a drain behind it, as SIGTERM would: a stream in flight finishes whole, new requests get
503 while it does, and then every process the launcher had started is gone (the API processes exit once
drained, the idle one at once; the engine ranks, their parent gone, once the last API process has closed
its connection), and the last of them removes the launcher's working directory.

The tiny model makes the stream's 20 s of audio in about 2 s, and the kernel buffers all of it for a client
that stops reading: the engine ranks are stopped (SIGSTOP) the moment the stream's first audio arrives and
let go (SIGCONT) once the drain has been seen, so the stream is in flight while it is, on any machine."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import httpx

from engine.processes import alive, descendants, engine_pid_of_rank, engine_pids, kill9
from engine.serving import FLAGS, LONG, LONG_SEED, SPEECH, speak
from helpers.serve_process import polyvox_serve
from helpers.waiting import wait_until


class Stream:
    """One streamed pcm answer read to its end: the bytes, and whether its chunked transfer ended
    properly (the server sends the last chunk only once the whole answer is made) or broke off."""

    def __init__(self, url: str, on_first_audio: Callable[[], None]) -> None:
        self.on_first_audio = on_first_audio
        self.first_audio = threading.Event()
        self.audio = bytearray()
        self.status = 0
        self.whole = False
        self.thread = threading.Thread(target=self._run, args=(url,))
        self.thread.start()

    def _run(self, url: str) -> None:
        body = {"input": LONG, "voice": "alloy", "response_format": "pcm", "seed": LONG_SEED}
        try:
            with httpx.stream("POST", f"{url}{SPEECH}", json=body, timeout=300) as response:
                self.status = response.status_code
                for piece in response.iter_bytes():
                    self.audio += piece
                    if not self.first_audio.is_set():
                        self.on_first_audio()
                        self.first_audio.set()
                self.whole = True
        except httpx.RemoteProtocolError:
            pass


def test_a_launcher_killed_with_9_lets_its_stream_finish_whole_and_leaves_no_process(tmp_path):
    voices = str(tmp_path / "voices")
    flags = (*FLAGS, "--api-server-count", "2", "--voices-dir", voices, "--shutdown-grace-s", "120")
    with polyvox_serve(*flags) as (proc, url):
        wait_until(lambda: httpx.get(f"{url}/ready").json().get("status") == "ready", "both ranks serve")
        assert speak(url, "Warm up.").status_code == 200  # alloy is frozen on first use
        started = descendants(proc.pid)  # API processes, engine ranks and multiprocessing's helper
        ranks = {engine_pid_of_rank(proc.pid, rank) for rank in range(2)}
        api = [pid for pid in engine_pids(proc.pid) if pid not in ranks]
        assert len(api) == 2 and ranks <= started
        workdir = Path(tempfile.gettempdir()) / f"polyvox-launcher-{proc.pid}"  # engine sockets, metrics
        assert (workdir / "engines").is_dir() and (workdir / "metrics").is_dir()

        def hold_ranks(sig: signal.Signals) -> None:
            for rank in ranks:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(rank, sig)

        stream = Stream(url, on_first_audio=lambda: hold_ranks(signal.SIGSTOP))
        try:
            assert stream.first_audio.wait(timeout=120), "the stream sent no audio"
            kill9(proc.pid)
            proc.wait()
            # the API process with nothing in flight has drained at once and gone, with its socket
            wait_until(lambda: sum(alive(pid) for pid in api) == 1, "one API process is left", timeout=30)
            wait_until(lambda: httpx.get(f"{url}/ready").status_code == 503, "the other drains", timeout=10)
            refused = speak(url, "Too late.")
            assert refused.status_code == 503 and refused.json()["error"]["code"] == "shutting_down"
        finally:
            hold_ranks(signal.SIGCONT)  # a stopped process would outlive the test, its parent's kill too
        stream.thread.join(timeout=300)
    assert stream.status == 200 and stream.whole
    assert len(stream.audio) > 24000 * 2 * 4  # seconds of speech
    wait_until(lambda: not any(alive(pid) for pid in started), "every process the launcher started exited")
    assert not workdir.exists(), sorted(str(path) for path in workdir.rglob("*"))
