"""FFmpeg filter chains over one stream of mono float32 audio (PyAV's `av.filter.Graph`), run on the
calling thread. A graph's default is a pool of one FFmpeg thread per core, made for every stream (so
every response), and no audio filter here uses it: the encode pool already runs streams side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import av
import av.filter


def filter_chain(sample_rate: int, filters: Sequence[tuple[str, dict[str, str]]]) -> av.filter.Graph:
    """abuffer (mono float32 at `sample_rate`) → each `(name, options)` filter in turn → abuffersink."""
    graph = av.filter.Graph()
    graph.threads = 1
    node = graph.add_abuffer(
        format="flt", sample_rate=sample_rate, layout="mono", time_base=Fraction(1, sample_rate)
    )
    for name, options in filters:
        stage = graph.add(name, **options)
        node.link_to(stage)
        node = stage
    sink = graph.add("abuffersink")
    node.link_to(sink)
    graph.configure()
    return graph


def pull_ready(graph: av.filter.Graph) -> list[av.AudioFrame]:
    """Every frame the graph has ready now (all it holds, once it was pushed None)."""
    frames: list[av.AudioFrame] = []
    while True:
        try:
            frame = graph.pull()
        except (av.error.BlockingIOError, av.error.EOFError):
            return frames
        assert isinstance(frame, av.AudioFrame)  # an audio graph gives audio frames
        frames.append(frame)
