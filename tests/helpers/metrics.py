"""Reading a polyvox server's /metrics in tests."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families


def parse(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} for every sample in a Prometheus exposition."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    """The sample `name` with exactly `labels` (0.0 when absent, as Prometheus treats it)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def scrape(url: str) -> dict:
    response = httpx.get(f"{url}/metrics")
    response.raise_for_status()
    return parse(response.text)


async def ascrape(client: httpx.AsyncClient, url: str) -> dict:
    response = await client.get(f"{url}/metrics")
    response.raise_for_status()
    return parse(response.text)
