"""The Server tab in headless Chromium on the embedded voice: behind a proxy that answers /metrics 404
(the shipped nginx keeps it internal) it says the figures are not available there and stops asking;
where /metrics is served it draws the last minutes of throughput, first-audio time, queue depth and
running requests from the scrapes it makes."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import nginx
from helpers.serve_process import free_port
from web.playground import open_playground, wait_for_text

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


@pytest.fixture(scope="module")
def behind_nginx(embedded_server) -> Iterator[str]:
    """The shipped site (deploy/nginx/polyvox.conf) in front of the embedded server."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(binary).exists():
        pytest.skip("no nginx: install the Debian package nginx")
    port = free_port()
    upstream = embedded_server.removeprefix("http://")
    conf = nginx.retarget((DEPLOY / "nginx" / "polyvox.conf").read_text(), [upstream], port)
    with nginx.running_nginx(binary, conf, port) as url:
        yield url


def test_behind_the_shipped_nginx_it_says_the_figures_are_not_there_and_stops_asking(page, behind_nginx):
    scrapes = []
    page.on("response", lambda r: scrapes.append(r.status) if r.url.endswith("/metrics") else None)
    open_playground(page, behind_nginx)
    page.click("#tab-server")
    note = wait_for_text(page, "#server-unavailable", "not available here")
    assert "/metrics answered 404" in note
    assert page.inner_text("#server-ready") == "ready"  # readiness still comes from /ready
    for reading in ("#server-errors", "#server-audio", "#server-queue", "#server-requests"):
        assert not page.is_visible(reading), reading  # no "Errors 0" or "– s" passed off as readings
    assert not page.is_visible("#server-charts")
    assert page.is_disabled("#server-live") and not page.is_checked("#server-live")
    assert page.is_hidden("#server-error")
    page.wait_for_timeout(4500)  # two refresh periods
    assert scrapes == [404]


def metrics(audio_s: float, ttfa_sum: float, ttfa_count: int, queue: int, running: int) -> str:
    return (
        f"polyvox_audio_seconds_total {audio_s}\n"
        f'polyvox_time_to_first_audio_seconds_sum{{stream="true"}} {ttfa_sum}\n'
        f'polyvox_time_to_first_audio_seconds_count{{stream="true"}} {ttfa_count}\n'
        f"polyvox_queue_depth {queue}\n"
        f"polyvox_requests_in_flight {running}\n"
        "polyvox_requests_total 7\n"
    )


# What three successive scrapes find: 4 more answers with 0.3 s to first audio each between the first
# and the second, none between the second and the third; the queue and the running requests move.
SCRAPES = [metrics(10.0, 1.0, 4, 0, 1), metrics(30.0, 2.2, 8, 5, 3), metrics(30.0, 2.2, 8, 2, 2)]


def test_the_charts_draw_the_last_scrapes(page, embedded_server, artifacts):
    answered = []

    def scrape(route):
        body = SCRAPES[min(len(answered), len(SCRAPES) - 1)]
        answered.append(body)
        route.fulfill(status=200, content_type="text/plain", body=body)

    page.route("**/metrics", scrape)
    open_playground(page, embedded_server)
    page.click("#tab-server")
    page.wait_for_function("document.querySelector('[data-series=queue] svg').dataset.points >= 3")
    charts = page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#server-charts figure')].map((figure) => [
          figure.dataset.series,
          {
            now: figure.querySelector('.now').textContent,
            points: Number(figure.querySelector('svg').dataset.points),
            lines: figure.querySelectorAll('polyline').length,
            scale: figure.querySelector('.scale').textContent,
          },
        ]))"""
    )
    assert charts["queue"]["scale"] == "5" and charts["queue"]["lines"] == 1
    assert charts["running"]["now"] == "2"
    assert charts["ttfa"]["now"] == "0.30 s"  # (2.2 - 1.0) / (8 - 4); the idle interval is a gap
    assert charts["throughput"]["points"] >= 2 and charts["throughput"]["lines"] == 1
    assert float(charts["throughput"]["now"].split()[0]) == 0.0  # nothing made between the last two
    page.locator("#panel-server").screenshot(path=str(artifacts / "server-tab-charts.png"))
