"""nginx as tests run it: the shipped configuration (deploy/nginx) in a private prefix, with the
upstream's `server` lines pointed at the test's own replicas, listening on a free loopback port."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

NGINX_DIR = Path(__file__).resolve().parents[2] / "deploy" / "nginx"
_SERVER_LINE = re.compile(r"^(\s*)server\s+(\S+)(.*);\s*$", re.M)


def upstream_servers(conf: str) -> list[str]:
    """The addresses of the `upstream polyvox` block's `server` lines."""
    block = re.search(r"upstream polyvox \{(.*?)\n\}", conf, flags=re.S)
    assert block, "no `upstream polyvox { ... }` block"
    return [match.group(2) for match in _SERVER_LINE.finditer(block.group(1))]


def retarget(conf: str, servers: list[str], listen: int) -> str:
    """`conf` with its upstream's server lines replaced by `servers` (each keeping the parameters of
    the first shipped line) and its `listen` port moved to 127.0.0.1:`listen`."""
    block = re.search(r"upstream polyvox \{(.*?)\n\}", conf, flags=re.S)
    first = _SERVER_LINE.search(block.group(1))
    indent, params = first.group(1), first.group(3)
    body = _SERVER_LINE.sub("", block.group(1))
    lines = "".join(f"{indent}server {address}{params};\n" for address in servers)
    body = body.replace("least_conn;", "least_conn;\n" + lines, 1)
    conf = conf[: block.start(1)] + body + conf[block.end(1) :]
    return re.sub(r"listen\s+\d+;", f"listen 127.0.0.1:{listen};", conf)


def prefix_with(site_conf: str) -> Path:
    """A private nginx prefix: nginx.conf including `site_conf`, and the shipped proxy snippet."""
    prefix = Path(tempfile.mkdtemp(prefix="polyvox-nginx-"))
    prefix.chmod(0o755)  # workers may run as another user: they must reach their temp files
    (prefix / "logs").mkdir()
    (prefix / "snippets").mkdir()
    shutil.copy(NGINX_DIR / "polyvox-proxy.conf", prefix / "snippets" / "polyvox-proxy.conf")
    (prefix / "polyvox.conf").write_text(site_conf)
    (prefix / "nginx.conf").write_text(
        "worker_processes 1;\n"
        f"pid {prefix}/nginx.pid;\n"
        f"error_log {prefix}/logs/error.log warn;\n"
        "events { worker_connections 1024; }\n"
        "http {\n"
        f"    access_log {prefix}/logs/access.log;\n"
        "    include polyvox.conf;\n"
        "}\n"
    )
    return prefix


def check(nginx: str, prefix: Path) -> subprocess.CompletedProcess:
    """`nginx -t` on the prefix's configuration."""
    return subprocess.run(
        [
            nginx,
            "-t",
            "-p",
            str(prefix),
            "-c",
            str(prefix / "nginx.conf"),
            "-e",
            str(prefix / "logs/error.log"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )


@contextmanager
def running_nginx(nginx: str, site_conf: str, port: int) -> Iterator[str]:
    """nginx in the foreground on 127.0.0.1:`port` with `site_conf`; yields its URL, stops it after."""
    prefix = prefix_with(site_conf)
    proc = subprocess.Popen(
        [
            nginx,
            "-p",
            str(prefix),
            "-c",
            str(prefix / "nginx.conf"),
            "-e",
            str(prefix / "logs/error.log"),
            "-g",
            "daemon off;",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        while True:
            assert proc.poll() is None, proc.stderr.read()
            try:
                httpx.get(f"{url}/health", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "nginx never answered"
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(prefix, ignore_errors=True)
