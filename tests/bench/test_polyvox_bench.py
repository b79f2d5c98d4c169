"""`polyvox bench` in each of its modes against a real server: the request as an OpenAI client sends
it (streamed by polyvox), `--stream` (stream_format=audio) and `--whole` (stream=false), and the
definitions of its figures (RTF is latency / audio seconds in every mode)."""

from __future__ import annotations

import json

import pytest

from helpers.metrics import scrape, value
from polyvox.backends.fake import FakeBackend
from polyvox.bench.loadgen import BenchConfig, Sample, summarize
from polyvox.cli import main

TEXT = "A short line for the load generator."  # 36 characters: 0.72 s of the fake engine's tone


def bench(url: str, capsys, *flags: str) -> dict:
    args = ["bench", "--url", url, "--concurrency", "2", "--requests", "4", "--json", "--input", TEXT]
    assert main([*args, *flags]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("flags", "mode", "streamed"),
    [((), "default", True), (("--stream",), "stream", True), (("--whole",), "whole", False)],
)
def test_each_mode_asks_for_what_it_says_and_reports_its_figures(serve, capsys, flags, mode, streamed):
    url = serve(FakeBackend(chunk_delay_s=0.01))
    report = bench(url, capsys, *flags)
    assert (report["mode"], report["stream"], report["errors"]) == (mode, streamed, 0)
    assert report["audio_s_mean"] == pytest.approx(0.72, abs=0.01)
    assert 0 < report["ttfa_p50_s"] <= report["latency_p50_s"]
    assert report["rtf_p50"] > 0 and report["rtf_p95"] >= report["rtf_p50"]
    # The server saw streamed or whole requests, as the mode asked.
    first_audio = scrape(url)
    counted = value(first_audio, "polyvox_time_to_first_audio_seconds_count", stream=str(streamed).lower())
    assert counted == 4
    if streamed:
        assert 0.0 <= report["streaming_viability"] <= 1.0
    else:
        assert report["streaming_viability"] is None


def test_stream_and_whole_cannot_be_asked_together(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["bench", "--stream", "--whole"])
    assert exited.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["default", "stream", "whole"])
def test_rtf_is_latency_over_audio_seconds_in_every_mode(mode):
    # Two requests, each 2 s of audio: received in full after 1 s and after 3 s.
    samples = [
        Sample(arrivals=[0.2, 1.0], sizes=[100, 100], audio_s=2.0),
        Sample(arrivals=[0.5, 3.0], sizes=[100, 100], audio_s=2.0),
    ]
    report = summarize(samples, wall_s=3.0, config=BenchConfig(url="", concurrency=2, requests=2, mode=mode))
    assert report["rtf_p50"] == pytest.approx((0.5 + 1.5) / 2)
    assert report["rtf_p95"] == pytest.approx(0.5 + 0.95 * (1.5 - 0.5))
    assert report["ttfa_p50_s"] == pytest.approx(0.35) and report["latency_p50_s"] == pytest.approx(2.0)
    assert report["throughput_audio_s_per_s"] == pytest.approx(4.0 / 3.0)
