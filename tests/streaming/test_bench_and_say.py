"""`polyvox bench --stream` against the tiny VoxCPM2 server, and the text front end on `polyvox say`."""

from __future__ import annotations

import json

from polyvox.backends.base import Backend
from polyvox.backends.factory import build_backend, build_text_pipeline
from polyvox.backends.text_pipeline import TextPipeline
from polyvox.bench.loadgen import Sample, viable
from polyvox.cli import main
from polyvox.settings import Settings

from .conftest import PATCHES


def test_bench_stream_reports_time_to_first_audio_and_viability(server, capsys):
    url, backend = server
    code = main(
        [
            "bench",
            "--url",
            url,
            "--stream",
            "--concurrency",
            "2",
            "--requests",
            "4",
            "--json",
            "--input",
            "A short line to stream.",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["errors"] == 0 and report["stream"] is True
    assert 0 < report["ttfa_p50_s"] <= report["latency_p50_s"]
    assert 0.0 <= report["streaming_viability"] <= 1.0
    assert report["audio_s_mean"] == PATCHES * 0.16  # pcm: every byte of every stream was counted
    assert len(backend.requests) == 4


def test_a_stream_is_viable_only_if_every_chunk_arrives_before_a_real_time_listener_needs_it():
    # Four equal chunks of a 2 s stream: a listener starting at the first chunk (t=1.0) needs chunk
    # k at 1.0 + 0.5 k seconds.
    on_time = Sample(arrivals=[1.0, 1.4, 1.9, 2.5], sizes=[100] * 4, audio_s=2.0)
    assert viable(on_time)
    one_late = Sample(arrivals=[1.0, 1.4, 2.1, 2.2], sizes=[100] * 4, audio_s=2.0)
    assert not viable(one_late)
    # A big first chunk buys time: the second is needed only after the first's 1.5 s have played.
    front_loaded = Sample(arrivals=[1.0, 2.4], sizes=[300, 100], audio_s=2.0)
    assert viable(front_loaded)
    assert not viable(Sample(arrivals=[1.0], sizes=[0], audio_s=0.0))


def test_the_selected_engine_is_served_with_the_text_step_the_settings_describe(tmp_path):
    path = tmp_path / "lexicon.json"
    path.write_text(json.dumps({"PyPI": "pie pea eye"}), encoding="utf-8")
    settings = Settings(lexicon_path=path, normalize=False, max_piece_chars=40, piece_lookahead=2)
    backend = build_backend(settings)
    assert isinstance(backend, Backend) and backend.info.name == "embedded"
    speech = build_text_pipeline(settings, backend)
    assert isinstance(speech, TextPipeline) and speech.lookahead == 2
    assert speech.frontend.prepare("Get it from PyPI in 2 minutes.") == [
        "Get it from pie pea eye in 2 minutes."
    ]


def test_say_goes_through_the_text_front_end(tmp_path, capsys):
    """Only the front end refuses text with nothing to say in it; VoxCPM2 alone would babble on."""
    output = tmp_path / "out.wav"
    code = main(["say", "?!… ...", "-o", str(output), "--random-weights", "tiny", "--device", "cpu"])
    assert code == 2 and not output.exists()
    assert "no words or numbers to speak" in capsys.readouterr().err
