"""The systemd template unit passes `systemd-analyze verify` and stops more slowly than polyvox drains."""

from __future__ import annotations

import configparser
import subprocess
import sys
from pathlib import Path

from deploy.tools import DEPLOY, system_tool
from polyvox.settings import Settings

UNIT = DEPLOY / "systemd" / "polyvox@.service"


def service_section() -> dict[str, str]:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string(UNIT.read_text())
    return dict(parser["Service"])


def test_systemd_analyze_verifies_an_instance(tmp_path):
    analyze = system_tool("systemd-analyze", "systemd")
    # verify checks that ExecStart exists: point it at this checkout's polyvox
    polyvox = Path(sys.executable).parent / "polyvox"
    instance = tmp_path / "polyvox@8001.service"
    instance.write_text(UNIT.read_text().replace("/opt/polyvox/.venv/bin/polyvox", str(polyvox)))
    result = subprocess.run(
        [analyze, "verify", "--man=no", str(instance)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr


def test_stop_waits_for_the_drain():
    service = service_section()
    assert service["KillSignal"] == "SIGTERM"
    assert service["KillMode"] == "mixed"  # the engine's child processes are not signalled mid-drain
    assert service["Restart"] == "on-failure"
    grace = Settings.model_fields["shutdown_grace_s"].default
    assert float(service["TimeoutStopSec"]) > grace


def test_the_client_address_is_taken_from_nginx_on_this_host():
    lines = UNIT.read_text().splitlines()
    assert "Environment=FORWARDED_ALLOW_IPS=127.0.0.1,::1" in lines
    assert "Environment=POLYVOX_HOST=127.0.0.1" in lines  # so only nginx on this host reaches it
