"""Prometheus view of the voices layer, read at scrape time: voices by source, whether `voices.json`
cannot be read now, builtin voices frozen, and the engine's voice prompt encodes and prompt-cache hits
(a clip is encoded once, then reused).
With several API processes on one port, the view of the process that answers the scrape, but for the
freezes, which each process counts into the shared metric files (`BuiltinFreezer`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from polyvox.backends.base import Backend
from polyvox.runtime.metrics_files import shared_metrics_dir
from polyvox.voices.builtin import FREEZES, FREEZES_HELP
from polyvox.voices.registry import VoiceRegistry


class VoiceCollector(Collector):
    def __init__(self, registry: VoiceRegistry, backend: Backend):
        self.registry = registry
        self.backend = backend

    def collect(self) -> Iterator[Metric]:
        voices = GaugeMetricFamily("polyvox_voices", "Voices available, by source.", labels=["source"])
        for source, count in sorted(Counter(info.source for info in self.registry.infos()).items()):
            voices.add_metric([source], count)
        yield voices
        yield GaugeMetricFamily(
            "polyvox_voices_registry_unreadable",
            "1 while voices.json cannot be read (the voices read before keep serving; GET /ready says why).",
            value=int(self.registry.problem is not None),
        )
        if shared_metrics_dir() is None:  # else the shared files hold every process's count
            yield CounterMetricFamily(FREEZES, FREEZES_HELP, value=self.registry.freezes)
        prompts = self.backend.prompt_cache_stats()
        yield CounterMetricFamily(
            "polyvox_voice_prompt_encodes",
            "Voice prompt clips encoded by the engine (VAE), a miss of its prompt cache.",
            value=prompts.encodes,
        )
        yield CounterMetricFamily(
            "polyvox_voice_prompt_cache_hits",
            "Voice prompts taken from the engine's prompt cache instead of being encoded again.",
            value=prompts.hits,
        )
