"""The `polyvox` command: settings flags, `say` without a server, `bench` against a real server,
and `serve` starting a server that answers."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import soundfile

from helpers.audio import decode, pcm_samples
from helpers.serve_process import free_port
from polyvox.backends.fake import FakeBackend
from polyvox.bench.loadgen import DEFAULT_INPUT
from polyvox.cli import build_parser, main, settings_from_args
from polyvox.settings import Settings

POLYVOX = [sys.executable, "-m", "polyvox.cli"]
BENCH_FIELDS = {
    "throughput_audio_s_per_s",
    "ttfa_p50_s",
    "ttfa_p95_s",
    "latency_p50_s",
    "latency_p95_s",
    "rtf_p50",
    "requests",
    "errors",
}


def run(*args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*POLYVOX, *args], capture_output=True, timeout=timeout, **kwargs)


# --- settings as flags ------------------------------------------------------------------------------


def test_every_setting_has_a_serve_flag() -> None:
    flags = {action.dest: action.option_strings for action in _serve_parser()._actions}
    for name in Settings.model_fields:
        assert "--" + name.replace("_", "-") in flags[name]


def _serve_parser():
    parser = build_parser()
    subparsers = next(action for action in parser._actions if action.dest == "command")
    return subparsers.choices["serve"]


def test_flags_become_settings() -> None:
    args = build_parser().parse_args(
        ["serve", "--port", "9123", "--max-num-seqs", "12", "--random-weights", "tiny", "--cfg-value", "1.5"]
    )
    settings = settings_from_args(args)
    assert (settings.port, settings.max_num_seqs, settings.random_weights, settings.cfg_value) == (
        9123,
        12,
        "tiny",
        1.5,
    )
    assert settings.host == "127.0.0.1"  # untouched fields keep their defaults


def test_invalid_choice_is_refused() -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["serve", "--dtype", "int3"])
    assert exit_info.value.code == 2


def test_config_file_is_read_and_flags_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POLYVOX_CONFIG", raising=False)
    config = tmp_path / "polyvox.toml"
    config.write_text('max_queue = 3\nport = 9001\nlog_level = "debug"\n')
    args = build_parser().parse_args(["serve", "--config", str(config), "--port", "9002"])
    monkeypatch.setenv("POLYVOX_CONFIG", str(config))  # restored after the test
    settings = settings_from_args(args)
    assert (settings.max_queue, settings.port, settings.log_level) == (3, 9002, "debug")


# --- say --------------------------------------------------------------------------------------------


def test_say_writes_a_decodable_file(tmp_path: Path) -> None:
    result = run("say", "Hello from the command line.", "-f", "mp3", "-v", "nova", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    samples, rate = decode((tmp_path / "speech.mp3").read_bytes())
    assert rate == 22050  # the embedded voice's own rate: say keeps the engine's rate
    assert 1.0 < samples.size / rate < 5.0


def test_say_writes_a_whole_flac_file_that_soundfile_reads(tmp_path: Path) -> None:
    """A FLAC file whose STREAMINFO counts its samples: libsndfile cannot read one that says 0."""
    result = run("say", "A file, not a stream.", "-f", "flac", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    data = (tmp_path / "speech.flac").read_bytes()
    samples, rate = soundfile.read(io.BytesIO(data))
    assert rate == 22050
    assert soundfile.info(io.BytesIO(data)).frames == samples.size == decode(data)[0].size


def test_say_writes_stdout_with_dash(capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    assert main(["say", "Short and sweet.", "-f", "pcm", "-o", "-", "--speed", "2"]) == 0
    samples = pcm_samples(capfdbinary.readouterr().out)
    assert 0.3 < samples.size / 24000 < 2.0
    assert float(abs(samples).max()) > 0.1


def test_say_refuses_what_the_engine_cannot_speak(tmp_path: Path) -> None:
    result = run("say", "你好", "-o", str(tmp_path / "x.wav"))
    assert result.returncode == 2
    assert not (tmp_path / "x.wav").exists()
    assert result.stderr


# --- bench ------------------------------------------------------------------------------------------


def test_bench_json_against_the_embedded_server(embedded_url: str) -> None:
    args = ["--concurrency", "2", "--requests", "4", "--json", "--input", "A short benchmark sentence."]
    result = run("bench", "--url", embedded_url, *args)
    assert result.returncode == 0, result.stderr.decode()
    report = json.loads(result.stdout)
    assert set(report) >= BENCH_FIELDS
    assert (report["requests"], report["errors"]) == (4, 0)
    assert report["throughput_audio_s_per_s"] > 0
    assert 0 < report["ttfa_p50_s"] <= report["latency_p50_s"]


def test_bench_stream_reports_viability(serve) -> None:
    url = serve(FakeBackend(chunk_delay_s=0.005))
    args = ["--concurrency", "3", "--requests", "6", "--stream", "--format", "mp3", "--json"]
    result = run("bench", "--url", url, *args)
    assert result.returncode == 0, result.stderr.decode()
    report = json.loads(result.stdout)
    assert report["errors"] == 0
    assert 0.0 <= report["streaming_viability"] <= 1.0
    # the tone engine speaks 20 ms per character; the bench measured it by decoding the mp3 streams
    assert report["audio_s_mean"] == pytest.approx(len(DEFAULT_INPUT) * 0.02, abs=0.1)


def test_bench_synthesises_every_request_instead_of_replaying_the_cache(serve, tmp_path) -> None:
    backend = FakeBackend()
    url = serve(backend, cache_enabled=True, cache_dir=str(tmp_path / "cache"))
    args = ["--concurrency", "1", "--requests", "3", "--json", "--input", "The same words every time."]
    assert run("bench", "--url", url, *args).returncode == 0
    assert backend.started_requests == 3
    assert run("bench", "--url", url, *args, "--cache").returncode == 0
    assert backend.started_requests == 4  # one miss stores the answer, the other two are hits


def test_bench_counts_errors(serve) -> None:
    url = serve()
    result = run(
        "bench", "--url", url, "--concurrency", "2", "--requests", "3", "--voice", "nobody", "--json"
    )
    report = json.loads(result.stdout)
    assert (report["requests"], report["errors"]) == (3, 3)
    assert result.returncode == 1


# --- serve ------------------------------------------------------------------------------------------


def test_serve_starts_a_server_and_warns_beyond_loopback(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        command = [*POLYVOX, "serve", "--host", "0.0.0.0", "--port", str(port)]
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/ready").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "server never became ready"
            time.sleep(0.1)
        speech = httpx.post(
            f"http://127.0.0.1:{port}/v1/audio/speech", json={"input": "Served.", "response_format": "wav"}
        )
        assert speech.status_code == 200
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    text = log.read_text()
    assert "embedded" in text and f"0.0.0.0:{port}" in text
    assert "WARNING" in text and "beyond loopback" in text


def test_environment_beats_the_config_file_and_flags_beat_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "polyvox.json"
    config.write_text(json.dumps({"port": 9001, "max_queue": 3, "max_num_seqs": 5}))
    monkeypatch.setenv("POLYVOX_CONFIG", str(config))
    monkeypatch.setenv("POLYVOX_PORT", "9002")
    monkeypatch.setenv("POLYVOX_MAX_QUEUE", "4")
    args = build_parser().parse_args(["serve", "--max-queue", "6"])
    settings = settings_from_args(args)
    assert (settings.port, settings.max_queue, settings.max_num_seqs) == (9002, 6, 5)


def test_uttera_tts_vllms_variables_are_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    legacy = {
        "AUDIO_CACHE_DIR": str(tmp_path),
        "CACHE_TTL_MINUTES": "15",
        "VOXCPM_INFERENCE_TIMESTEPS": "7",
        "VLLM_GPU_MEM_UTIL": "0.5",
        "VLLM_MAX_NUM_SEQS": "32",
        "VLLM_MAX_NUM_BATCHED_TOKENS": "1024",
    }
    for name, text in legacy.items():
        monkeypatch.setenv(name, text)
    settings = Settings()
    assert settings.cache_dir == tmp_path and settings.cache_ttl_minutes == 15
    assert (settings.inference_timesteps, settings.gpu_memory_utilization) == (7, 0.5)
    assert (settings.max_num_seqs, settings.max_num_batched_tokens) == (32, 1024)
    monkeypatch.setenv("POLYVOX_MAX_NUM_SEQS", "64")  # polyvox's own name wins
    assert Settings().max_num_seqs == 64
