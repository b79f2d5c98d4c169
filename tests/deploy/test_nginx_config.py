"""The shipped nginx configuration passes `nginx -t` and keeps its streaming-safe proxy settings."""

from __future__ import annotations

import re
import shutil

import pytest

from deploy.tools import DEPLOY, system_tool
from helpers import nginx

SITES = ("polyvox.conf", "compose.conf")


@pytest.mark.parametrize("site", SITES)
def test_nginx_accepts_the_configuration(site):
    binary = system_tool("nginx", "nginx")
    conf = (DEPLOY / "nginx" / site).read_text()
    # Compose's service names resolve only inside Compose's network: check them as loopback here.
    conf = re.sub(r"server polyvox-\d+:8000", "server 127.0.0.1:8000", conf)
    prefix = nginx.prefix_with(conf)
    try:
        result = nginx.check(binary, prefix)
    finally:
        shutil.rmtree(prefix, ignore_errors=True)
    assert result.returncode == 0, result.stderr
    assert "test is successful" in result.stderr


def directives(text: str) -> set[str]:
    return {
        " ".join(line.split())
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    }


def test_streaming_safe_proxy_settings():
    proxy = directives((DEPLOY / "nginx" / "polyvox-proxy.conf").read_text())
    assert "proxy_buffering off;" in proxy
    assert "proxy_read_timeout 600s;" in proxy
    assert not any(d.startswith("proxy_ignore_headers") for d in proxy), "X-Accel-Buffering must be honoured"
    assert "proxy_next_upstream error timeout http_502 http_503 non_idempotent;" in proxy
    for site in SITES:
        assert "least_conn;" in directives((DEPLOY / "nginx" / site).read_text())
