"""Soak test: many concurrent clients against `polyvox serve` on loopback for a fixed time, or for a
fixed number of requests each (`--requests`: the same work however fast the machine is).

Starts its own server (the embedded voice unless `--serve-args` choose otherwise; the audio cache on,
in a temporary directory) or uses `--url`. Every client loops: a random sentence (a quarter of them
repeats, so cache hits are exercised too), a random format, streamed or not; every answer is decoded
with PyAV. It counts lost requests (transport errors, 5xx, anything but 200 and 429), corrupted ones
(200 but not decodable, or too short) and refusals (429), and samples the server's RSS once a second.
Prints one JSON object.

`--mix full` adds, in equal shares, the other things clients do: one-off cloning from a reference
clip (JSON `ref_audio`, with and without `ref_text`), SSE streams (every event parsed, the audio
decoded), streams cut by the client after their first bytes, and bad requests, which must come
back as 4xx in OpenAI's error shape (`rejected`; any other answer is lost). Afterwards the server's
engine gauges must be idle (nothing running, no KV blocks held) when it has them.

    python bench/soak.py --clients 64 --duration 300
    python bench/soak.py --mix full --serve-args "--random-weights tiny --device cpu --no-cache-enabled"
    python bench/soak.py --clients 8 --requests 4 --mix full
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import os
import random
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import av
import httpx
import numpy as np

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Please call Stella and ask her to bring these things with her from the store.",
    "A rainbow is a division of white light into many beautiful colors.",
    "Six spoons of fresh snow peas, five thick slabs of blue cheese, and maybe a snack.",
    "We also need a small plastic snake and a big toy frog for the kids.",
    "She can scoop these things into three red bags, and we will go meet her at the train station.",
)
FORMATS = ("mp3", "wav", "opus", "flac", "aac", "pcm")
KINDS = {"basic": ("plain",), "full": ("plain", "clone", "sse", "cut", "bad")}
BAD_FIELDS = (
    {"input": ""},
    {"speed": 99},
    {"voice": "no-such-voice"},
    {"response_format": "xyz"},
    {"ref_audio": "bm90IGF1ZGlv"},  # base64 of "not audio"
    {"input": "x" * 200_000},
    {"model": "no-such-model"},
)


def reference_clip(seconds: float, rate: int, freq: float) -> bytes:
    """A WAV clip (a modulated tone) to clone from."""
    t = np.arange(int(seconds * rate)) / rate
    wave = 0.3 * np.sin(2 * np.pi * freq * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    buf = io.BytesIO()
    with av.open(buf, "w", format="wav") as container:
        stream = container.add_stream("pcm_s16le", rate=rate, layout="mono")
        frame = av.AudioFrame.from_ndarray(
            (wave * 32767).astype(np.int16)[None, :], format="s16", layout="mono"
        )
        frame.sample_rate = rate
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return buf.getvalue()


CLIPS = [
    base64.b64encode(reference_clip(s, r, f)).decode() for s, r, f in ((1.5, 22050, 200), (3, 44100, 310))
]


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def decoded_seconds(body: bytes, fmt: str) -> float:
    """Seconds of audio in the body; raises if it cannot be decoded."""
    if fmt == "pcm":
        if len(body) % 2:
            raise ValueError("odd pcm length")
        return len(body) / 2 / 24000
    with av.open(io.BytesIO(body)) as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return samples / stream.codec_context.sample_rate


class Tally:
    def __init__(self) -> None:
        self.ok = self.lost = self.corrupted = self.refused = self.hits = self.rejected = self.cut = 0
        self.audio_s = 0.0
        self.latencies: list[float] = []
        self.failures: list[str] = []

    def fail(self, kind: str, detail: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.failures) < 20:
            self.failures.append(f"{kind}: {detail}")


async def client(
    url: str, stop_at: float, tally: Tally, rng: random.Random, kinds: tuple[str, ...], requests: int | None
) -> None:
    """Requests until `stop_at`, or `requests` of them first when given (each client's requests, drawn
    from its own `rng`, are then the same in every run whatever their answers)."""
    sent = 0
    async with httpx.AsyncClient(timeout=300) as http:
        while time.monotonic() < stop_at and (requests is None or sent < requests):
            sent += 1
            kind = rng.choice(kinds)
            text = rng.choice(SENTENCES)
            if rng.random() > 0.25:
                text = f"{text} Take {rng.randrange(1000)}."
            fmt = rng.choice(FORMATS)
            body = {"model": "tts-1", "voice": "alloy", "input": text, "response_format": fmt}
            if kind == "plain":  # half streamed, half one whole file (both ways a client asks)
                body |= {"stream_format": "audio"} if rng.random() < 0.5 else {"stream": False}
            elif kind == "clone":
                body["ref_audio"] = rng.choice(CLIPS)
                if rng.random() < 0.5:
                    body["ref_text"] = "A short sentence spoken in the clip."
            elif kind == "sse":
                body["stream_format"] = "sse"
            elif kind == "bad":
                body.update(rng.choice(BAD_FIELDS))
            started = time.monotonic()
            try:
                if kind == "cut":
                    await cut_stream(http, url, body, tally)
                    continue
                response = await http.post(f"{url}/v1/audio/speech", json=body)
            except httpx.HTTPError as exc:
                tally.fail("lost", f"{kind} {type(exc).__name__}: {exc}")
                continue
            if response.status_code == 429:
                tally.refused += 1
                await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
                continue
            if kind == "bad" or (kind == "clone" and "cloning_unsupported" in response.text):
                check_rejection(response, tally)  # (the embedded voice refuses to clone, rightly)
                continue
            if response.status_code != 200:
                tally.fail("lost", f"{kind} HTTP {response.status_code}: {response.text[:200]}")
                continue
            content = response.content
            try:
                if kind == "sse":
                    content = await asyncio.to_thread(sse_audio, response.text)
                seconds = await asyncio.to_thread(decoded_seconds, content, fmt)
            except Exception as exc:  # noqa: BLE001 - any decode failure is a corrupted answer
                tally.fail("corrupted", f"{kind} {fmt}: {exc}")
                continue
            if seconds < 0.5:
                tally.fail("corrupted", f"{kind} {fmt}: only {seconds:.2f} s of audio")
                continue
            tally.ok += 1
            tally.hits += response.headers.get("X-Cache") == "HIT"
            tally.audio_s += seconds
            tally.latencies.append(time.monotonic() - started)


async def cut_stream(http: httpx.AsyncClient, url: str, body: dict, tally: Tally) -> None:
    """A client that goes away after the first bytes of a streamed answer."""
    body["stream_format"] = "audio"
    async with http.stream("POST", f"{url}/v1/audio/speech", json=body) as response:
        if response.status_code == 429:
            tally.refused += 1
            return
        if response.status_code != 200:
            tally.fail("lost", f"cut HTTP {response.status_code}")
            return
        async for chunk in response.aiter_bytes():
            if chunk:
                tally.cut += 1
                return
    tally.fail("corrupted", "cut: the stream ended without any bytes")


def check_rejection(response: httpx.Response, tally: Tally) -> None:
    """A bad request must come back as a 4xx with OpenAI's error shape."""
    try:
        error = response.json()["error"]
        shaped = isinstance(error["message"], str) and "type" in error and "code" in error
    except (ValueError, KeyError, TypeError):
        shaped = False
    if 400 <= response.status_code < 500 and shaped:
        tally.rejected += 1
    else:
        tally.fail("lost", f"bad request answered {response.status_code}: {response.text[:200]}")


def sse_audio(text: str) -> bytes:
    """The audio bytes of an SSE answer; raises unless it ends with exactly one done event."""
    audio, done = bytearray(), 0
    for line in text.splitlines():
        if not line.startswith("data: "):
            continue
        event = json.loads(line[len("data: ") :])
        if event["type"] == "speech.audio.delta":
            audio += base64.b64decode(event["audio"])
        elif event["type"] == "speech.audio.done":
            done += 1
        else:
            raise ValueError(f"unexpected SSE event {event['type']}")
    if done != 1:
        raise ValueError("the SSE stream did not end with one done event")
    return bytes(audio)


async def engine_idle(http: httpx.AsyncClient, url: str) -> bool | None:
    """Whether the server's engine holds nothing (None when it has no engine gauges)."""
    values: dict[str, float] = {}
    for line in (await http.get(f"{url}/metrics")).text.splitlines():
        series, _, value = line.rpartition(" ")
        name = series.partition("{")[0]  # engine series are labelled by data-parallel rank: summed
        if name in (
            "polyvox_engine_running_requests",
            "polyvox_engine_kv_blocks_used",
            "polyvox_requests_in_flight",
        ):
            values[name] = values.get(name, 0.0) + float(value)
    if "polyvox_engine_kv_blocks_used" not in values:
        return None
    return all(v == 0 for v in values.values())


async def sample_rss(pid: int | None, stop_at: float, samples: list[float]) -> None:
    while pid is not None and time.monotonic() < stop_at:
        value = rss_mb(pid)
        if value is not None:
            samples.append(value)
        await asyncio.sleep(1.0)


async def soak(
    url: str,
    pid: int | None,
    clients: int,
    duration_s: float,
    seed: int,
    mix: str = "basic",
    requests: int | None = None,
) -> dict:
    tally = Tally()
    rss: list[float] = []
    start_rss = rss_mb(pid) if pid else None
    started = time.monotonic()
    stop_at = started + duration_s
    rng = random.Random(seed)
    sampler = asyncio.ensure_future(sample_rss(pid, stop_at, rss))
    await asyncio.gather(
        *(
            client(url, stop_at, tally, random.Random(rng.random()), KINDS[mix], requests)
            for _ in range(clients)
        ),
    )
    sampler.cancel()  # the clients are done: at `stop_at`, or sooner when each sent its `requests`
    await asyncio.gather(sampler, return_exceptions=True)
    if pid is not None and (value := rss_mb(pid)) is not None:
        rss.append(value)  # the last reading, after the load
    wall = time.monotonic() - started
    async with httpx.AsyncClient(timeout=30) as http:
        idle = None
        for _ in range(20):  # cut streams are cancelled asynchronously: give them a moment
            idle = await engine_idle(http, url)
            if idle is not False:
                break
            await asyncio.sleep(0.5)
    latencies = sorted(tally.latencies) or [0.0]
    return {
        "clients": clients,
        "duration_s": round(wall, 1),
        "mix": mix,
        "requests": tally.ok + tally.lost + tally.corrupted + tally.refused + tally.rejected + tally.cut,
        "ok": tally.ok,
        "rejected_4xx": tally.rejected,
        "cut_by_client": tally.cut,
        "lost": tally.lost,
        "corrupted": tally.corrupted,
        "refused_429": tally.refused,
        "cache_hits": tally.hits,
        "audio_s": round(tally.audio_s, 1),
        "audio_s_per_s": round(tally.audio_s / wall, 2),
        "latency_p50_s": round(latencies[len(latencies) // 2], 3),
        "latency_p99_s": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 3),
        "rss_mb_start": round(start_rss, 1) if start_rss else None,
        "rss_mb_peak": round(max(rss), 1) if rss else None,
        "rss_mb_end": round(rss[-1], 1) if rss else None,
        "engine_idle_after": idle,
        "failures": tally.failures,
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(extra: list[str], cache_dir: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    command = [sys.executable, "-m", "polyvox.cli", "serve", "--port", str(port), "--log-level", "warning"]
    command += ["--cache-enabled", "--cache-dir", cache_dir, *extra]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/ready").status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("the server never became ready")
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--duration", type=float, default=300.0, help="Seconds of load.")
    parser.add_argument(
        "--requests", type=int, help="Requests each client sends, then stops (within --duration)."
    )
    parser.add_argument("--url", help="Use a running server instead of starting one (no RSS then).")
    parser.add_argument("--serve-args", default="", help="Extra `polyvox serve` flags, one string.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--mix", choices=sorted(KINDS), default="basic", help="What clients send (see above)."
    )
    args = parser.parse_args(argv)
    if args.url:
        report = asyncio.run(
            soak(args.url, None, args.clients, args.duration, args.seed, args.mix, args.requests)
        )
    else:
        with tempfile.TemporaryDirectory() as cache_dir:
            proc, url = start_server(shlex.split(args.serve_args), cache_dir)
            try:
                report = asyncio.run(
                    soak(url, proc.pid, args.clients, args.duration, args.seed, args.mix, args.requests)
                )
                report["server_alive"] = proc.poll() is None and httpx.get(f"{url}/ready").status_code == 200
            finally:
                proc.terminate()
                report["server_exit_code"] = proc.wait(timeout=60)
    report["cpus"] = os.cpu_count()
    print(json.dumps(report, indent=2))
    healthy = report["lost"] == 0 and report["corrupted"] == 0 and report["engine_idle_after"] is not False
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
