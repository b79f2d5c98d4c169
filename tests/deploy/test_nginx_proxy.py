"""Every shipped nginx site, run for real in front of a polyvox server (the embedded voice): speech
passes through to the official OpenAI client, the probes answer, /metrics does not. The TLS sites
serve HTTPS with a certificate made here by `openssl` and redirect plain HTTP to HTTPS."""

from __future__ import annotations

import re
import ssl
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import openai
import pytest
import yaml

from deploy.tools import DEPLOY, system_tool
from helpers import nginx
from helpers.audio import decode
from helpers.serve_process import free_port, polyvox_serve

PLAIN_SITES = ("polyvox.conf", "compose.conf")
TLS_SITES = ("polyvox-tls.conf", "compose-tls.conf")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> Path:
    """A directory with tls.crt (self-signed for 127.0.0.1 and localhost: its own CA) and tls.key."""
    openssl = system_tool("openssl", "openssl")
    folder = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout", str(folder / "tls.key"), "-out", str(folder / "tls.crt"),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    folder.chmod(0o755)
    (folder / "tls.key").chmod(0o644)  # nginx workers may run as another user
    return folder


@contextmanager
def proxy(site: str, upstream: str, tls: Path | None = None) -> Iterator[tuple[str, str | None]]:
    """The shipped `site` with its upstream pointed at `upstream`, on free loopback ports; yields
    (http URL, https URL or None)."""
    binary = system_tool("nginx", "nginx")
    http_port = free_port()
    conf = nginx.retarget((DEPLOY / "nginx" / site).read_text(), [upstream], http_port)
    https_url = None
    if tls is not None:
        https_port = free_port()
        conf, listens = re.subn(r"listen\s+443 ssl;", f"listen 127.0.0.1:{https_port} ssl;", conf)
        assert listens == 1
        conf = conf.replace("/etc/nginx/tls/", f"{tls}/")
        https_url = f"https://127.0.0.1:{https_port}"
    with nginx.running_nginx(binary, conf, http_port) as http_url:
        yield http_url, https_url


def upstream_of(url: str) -> str:
    return url.removeprefix("http://")


def speak_through(base_url: str, **client: object) -> bytes:
    speech = openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, **client)
    response = speech.audio.speech.create(model="tts-1", voice="alloy", input="Through the proxy.")
    return response.content


def assert_metrics_withheld(url: str, **options: object) -> None:
    for path in ("/metrics", "/metrics/", "/metrics?name[]=polyvox_requests_total", "/%6detrics"):
        answer = httpx.get(f"{url}{path}", **options)
        assert answer.status_code in (403, 404), f"{path}: {answer.status_code}"
        assert "polyvox_" not in answer.text


@pytest.mark.parametrize("site", PLAIN_SITES)
def test_the_site_proxies_speech_and_probes_but_not_metrics(site, embedded_url):
    assert httpx.get(f"{embedded_url}/metrics").status_code == 200  # the server itself does serve it
    with proxy(site, upstream_of(embedded_url)) as (url, _):
        samples, rate = decode(speak_through(url))
        assert rate > 0 and samples.size / rate > 0.3
        assert httpx.get(f"{url}/health").status_code == 200
        assert httpx.get(f"{url}/ready").json()["status"] == "ready"
        assert_metrics_withheld(url)


@pytest.mark.parametrize("site", TLS_SITES)
def test_the_tls_site_serves_https_to_the_openai_client(site, embedded_url, certificate):
    with proxy(site, upstream_of(embedded_url), certificate) as (_, https):
        authority = ssl.create_default_context(cafile=certificate / "tls.crt")
        trusted = httpx.Client(verify=authority)
        samples, rate = decode(speak_through(https, http_client=trusted))
        assert rate > 0 and samples.size / rate > 0.3
        ready = trusted.get(f"{https}/ready")
        assert ready.status_code == 200
        assert ready.headers["strict-transport-security"].startswith("max-age=")
        assert_metrics_withheld(https, verify=authority)
        with pytest.raises(openai.APIConnectionError):  # a client that checks certificates refuses it
            speak_through(https)


@pytest.mark.parametrize("site", TLS_SITES)
def test_the_tls_site_redirects_plain_http_to_https(site, embedded_url, certificate):
    with proxy(site, upstream_of(embedded_url), certificate) as (http, _):
        for path in ("/v1/audio/speech", "/ui?tab=clone", "/metrics"):
            answer = httpx.post(f"{http}{path}", json={"input": "x"})
            assert answer.status_code == 301
            assert answer.headers["location"] == f"https://127.0.0.1{path}"
            assert not answer.content.startswith(b"RIFF")  # nothing was spoken over plain HTTP


def compose_replica_env() -> dict[str, str]:
    """The environment the shipped Compose file gives its replicas (the `x-polyvox` anchor's)."""
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return {name: str(value) for name, value in compose["services"]["polyvox-1"]["environment"].items()}


def test_the_clients_address_reaches_the_access_log_through_the_compose_proxy(tmp_path):
    """nginx reaches a Compose replica from its own container address, never the replica's loopback:
    here from 127.0.0.2 (`proxy_bind`), the client from 127.0.0.3. The replica's access line names the
    client, not nginx, and not an address the client wrote into X-Forwarded-For itself."""
    binary = system_tool("nginx", "nginx")
    trusted = {"FORWARDED_ALLOW_IPS": compose_replica_env()["FORWARDED_ALLOW_IPS"]}
    flags = ("--voices-dir", str(tmp_path / "voices"), "--log-level", "info")
    with polyvox_serve(*flags, env=trusted) as (server, url):
        port = free_port()
        conf = nginx.retarget((DEPLOY / "nginx" / "compose.conf").read_text(), [upstream_of(url)], port)
        listen = f"listen 127.0.0.1:{port};"
        conf = conf.replace(listen, f"{listen}\n    proxy_bind 127.0.0.2;", 1)
        with nginx.running_nginx(binary, conf, port) as proxied:
            client = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.3"))
            body = {"model": "tts-1", "voice": "alloy", "input": "Who is asking?", "response_format": "wav"}
            forged = {"X-Forwarded-For": "203.0.113.9"}
            answer = client.post(f"{proxied}/v1/audio/speech", json=body, headers=forged, timeout=60)
            assert answer.status_code == 200
        server.terminate()
        log = server.communicate(timeout=60)[0]
    access = [line for line in log.splitlines() if '"POST /v1/audio/speech' in line]
    assert len(access) == 1, log
    assert " 127.0.0.3:" in access[0] and "127.0.0.2" not in access[0] and "203.0.113.9" not in access[0]
