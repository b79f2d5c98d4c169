"""Run by `.ci/serve_smoke.sh` with the python of a fresh `make serve` environment: waits for the server
at URL to be ready (failing at once if process PID, `make serve`, exits first), asks it for one
utterance and decodes the answer with PyAV, then checks the serving process (`polyvox serve`, in make's
process group) maps no PyTorch library. Only core dependencies are used (httpx, av, numpy): this
environment has no test extras."""

from __future__ import annotations

import io
import os
import sys
import time
from pathlib import Path

import av
import httpx
import numpy as np

READY_WITHIN_S = 180  # the embedded voice is ready in seconds; this only bounds a hung start


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_ready(url: str, pid: int) -> None:
    deadline = time.monotonic() + READY_WITHIN_S
    while time.monotonic() < deadline:
        if not alive(pid):
            sys.exit("`make serve` exited before the server was ready")
        try:
            if httpx.get(f"{url}/ready", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    sys.exit(f"the server was not ready within {READY_WITHIN_S} s")


def spoken_seconds(url: str) -> float:
    body = {"model": "tts-1", "voice": "alloy", "input": "The first command works.", "response_format": "mp3"}
    response = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=120)
    if response.status_code != 200:
        sys.exit(f"/v1/audio/speech answered {response.status_code}: {response.text[:500]}")
    with av.open(io.BytesIO(response.content)) as container:
        frames = list(container.decode(audio=0))
    if not frames or not max(np.abs(frame.to_ndarray()).max() for frame in frames) > 0.01:
        sys.exit("/v1/audio/speech answered silence")
    return sum(frame.samples for frame in frames) / frames[0].sample_rate


def server_pid(group: int) -> int:
    """The `polyvox serve` process in process group `group` (`make serve`, started by setsid)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        pgid = int(stat.rsplit(")", 1)[1].split()[2])
        if pgid == group and b"serve" in command and any(part.endswith(b"polyvox") for part in command):
            return int(entry)
    sys.exit(f"no polyvox serve process in make's process group {group}")


def torch_mapped(pid: int) -> list[str]:
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return sorted({line.split()[-1] for line in maps if "/torch/" in line})


def main() -> None:
    url, pid = sys.argv[1], int(sys.argv[2])
    wait_ready(url, pid)
    seconds = spoken_seconds(url)
    if seconds < 0.5:
        sys.exit(f"/v1/audio/speech answered only {seconds:.2f} s of audio")
    served_by = server_pid(pid)
    if mapped := torch_mapped(served_by):
        sys.exit(f"the embedded server (pid {served_by}) loaded PyTorch: {', '.join(mapped[:3])}")
    print(f"serve smoke: /ready 200, /v1/audio/speech gave {seconds:.2f} s of decoded mp3, no PyTorch loaded")


if __name__ == "__main__":
    main()
