"""The Dockerfiles pass hadolint (no image can be built here: there is no Docker engine), and the
build context that .dockerignore leaves holds everything they copy."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import tomllib

import pytest

from deploy.tools import ROOT, venv_tool

DOCKERFILES = ("Dockerfile", "Dockerfile.cpu")


@pytest.mark.parametrize("name", DOCKERFILES)
def test_hadolint_finds_nothing(name):
    result = subprocess.run(
        [venv_tool("hadolint"), "--no-color", str(ROOT / name)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def in_context(path: str) -> bool:
    """Whether .dockerignore (its `*` then `!path` form) leaves `path` in the build context."""
    keep = False
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
            keep = negated
    return keep


@pytest.mark.parametrize("name", DOCKERFILES)
def test_everything_copied_is_in_the_build_context(name):
    copies = re.findall(r"^COPY (?!--from)(.+)$", (ROOT / name).read_text(), flags=re.M)
    sources = [source for line in copies for source in line.split()[:-1]]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert in_context(source.rstrip("/")), f"{source} is excluded by .dockerignore"


@pytest.mark.parametrize("name", DOCKERFILES)
def test_runs_unprivileged_with_a_health_check_and_volumes(name):
    text = (ROOT / name).read_text()
    assert re.search(r"^USER 10001:10001$", text, flags=re.M)
    assert "HEALTHCHECK" in text and '"healthcheck"' in text
    assert 'VOLUME ["/data/models", "/data/voices", "/data/cache"]' in text


@pytest.mark.parametrize("name", DOCKERFILES)
def test_the_image_knows_the_commit_it_was_built_from(name):
    """polyvox_build_info reads POLYVOX_COMMIT: the build argument must reach the final stage's
    environment (an ARG before the last FROM would not)."""
    final_stage = (ROOT / name).read_text().rsplit("\nFROM ", 1)[1]
    assert re.search(r"^ARG POLYVOX_COMMIT=", final_stage, re.M)
    assert "POLYVOX_COMMIT=${POLYVOX_COMMIT}" in final_stage


@pytest.mark.parametrize(("name", "flavour"), [("Dockerfile", "cuda"), ("Dockerfile.cpu", "cpu")])
def test_the_header_tags_the_image_as_compose_and_the_docs_do(name, flavour):
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    header = [line for line in (ROOT / name).read_text().splitlines() if line.startswith("#")]
    tags = set(re.findall(r"polyvox:(\S+)", "\n".join(header)))
    assert tags == {f"{version}-{flavour}"}
    assert f"polyvox:{version}-{flavour}" in (ROOT / "docs" / "deployment.md").read_text()
