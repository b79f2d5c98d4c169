"""The names the docs give are names polyvox has: every `POLYVOX_*` variable is a setting's or one the
shipped files read, every `--flag` one `polyvox` takes, every setting written as `name = value` or
called "the `name` setting" a setting, every error code after a status (`400 `input_too_long``) one
the server sends, and every `polyvox_*` series one it exports."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from polyvox.server.protocol import SpeechRequest
from polyvox.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
IDS = [p.relative_to(ROOT).as_posix() for p in PAGES]
SETTINGS = set(Settings.model_fields)
# flags of other programs the docs' commands use, and the program each belongs to
FOREIGN_FLAGS = {"--build-arg": "docker build", "--env-file": "docker compose"}


def shipped_text() -> str:
    """The source, the deployment files and the images: where a variable polyvox reads is named."""
    files = [*(ROOT / "src").rglob("*.py"), *(ROOT / "deploy").rglob("*"), *ROOT.glob("Dockerfile*")]
    return "\n".join(f.read_text(encoding="utf-8", errors="replace") for f in files if f.is_file())


SHIPPED = shipped_text()
SOURCE = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "src").rglob("*.py"))


def quoted(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text)


def unknown_variables(text: str) -> list[str]:
    names = set(re.findall(r"\bPOLYVOX_[A-Z0-9_]*[A-Z0-9]", text))
    settings = {f"POLYVOX_{name.upper()}" for name in SETTINGS}
    return sorted(n for n in names - settings if n not in SHIPPED)


def polyvox_flags() -> set[str]:
    """The settings' flags (`--no-` for a switch) and those the subcommands declare in cli/."""
    cli = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "src/polyvox/cli").rglob("*.py"))
    flags = set(re.findall(r"\"(--[a-z][a-z0-9-]*)\"", cli))
    for name, field in Settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        flags.add(flag)
        if field.annotation is bool:
            flags.add("--no-" + flag[2:])
    return flags | {"--help"}


FLAGS = polyvox_flags()


def unknown_flags(text: str) -> list[str]:
    """Flags in a backquoted `polyvox ...` command, or a backquoted flag on its own (`--max-num-seqs 128`)."""
    found = []
    for span in quoted(text):
        if span.startswith(("polyvox ", ".venv/bin/polyvox ")):
            found += re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", span)
        elif span.startswith("--"):
            found.append(re.match(r"--[a-z][a-z0-9-]*", span).group(0))
    return sorted({f for f in found if f not in FLAGS and f not in FOREIGN_FLAGS})


def unknown_settings(text: str) -> list[str]:
    """`snake_name = value` (a config file's line; a value in quotes or braces is a client's argument,
    `base_url="..."`) unless it is a speech request's field, and "the `name` setting"."""
    fields = set(SpeechRequest.model_fields) | {
        a for f in SpeechRequest.model_fields.values() for a in _aliases(f)
    }
    named = re.findall(r"`([a-z][a-z0-9]*_[a-z0-9_]*) ?= ?[^`=\"'{\s][^`=]*`", text)
    named += re.findall(r"`([a-z][a-z0-9_]*)` setting", text)
    return sorted({n for n in named if n not in SETTINGS and n not in fields})


def _aliases(field) -> list[str]:
    alias = field.validation_alias
    return [a for a in getattr(alias, "choices", []) if isinstance(a, str)]


def unknown_codes(text: str) -> list[str]:
    """Codes after a status (`400 `input_too_long``, `409 (`consent_in_use`)`), and the second column of
    a table whose header names `code`."""
    codes = re.findall(r"\b[45]\d\d \(?`([a-z]+(?:_[a-z]+)+)`", text)
    for table in re.findall(r"^\| status \| `code` \|.*?(?=^[^|])", text + "\n\n", re.S | re.M):
        for row in table.splitlines()[2:]:
            codes += re.findall(r"`([a-z]+(?:_[a-z]+)*)`", row.split("|")[2])
    return sorted({c for c in codes if not sends(c)})


def sends(code: str) -> bool:
    if f'"{code}"' in SOURCE:
        return True
    # `{param}_too_long` for the text fields longer than max_input_chars
    return code.endswith("_too_long") and code.removesuffix("_too_long") in SpeechRequest.model_fields


def unknown_series(text: str) -> list[str]:
    series = set(re.findall(r"\b(?:polyvox|uttera_tts)_[a-z_]*[a-z]", text))
    return sorted(s for s in series if not exports(s))


def exports(name: str) -> bool:
    base = re.sub(r"_(total|bucket|count|sum|created)$", "", name)
    candidates = {f'"{name}"', f'"{base}"', f'"{base}_total"'}
    if base.startswith("polyvox_engine_"):  # the engine's gauges are declared by their suffix
        candidates.add(f'"{base.removeprefix("polyvox_engine_")}"')
    return any(c in SOURCE for c in candidates)


CHECKS = {
    "variables": unknown_variables,
    "flags": unknown_flags,
    "settings": unknown_settings,
    "codes": unknown_codes,
    "series": unknown_series,
}


@pytest.mark.parametrize("kind", CHECKS)
@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_name_in_the_docs_exists(page: Path, kind: str) -> None:
    assert CHECKS[kind](page.read_text(encoding="utf-8")) == []


def test_the_checks_catch_names_that_do_not_exist() -> None:
    assert unknown_variables("POLYVOX_MAX_QUEUE and POLYVOX_MAX_QEUE") == ["POLYVOX_MAX_QEUE"]
    assert unknown_flags("`--max-num-seqs 8`, `polyvox serve --model X --max-qeue 3`") == ["--max-qeue"]
    assert unknown_settings("`max_queue = 12`, `speed=1.5`, the `max_qeue` setting") == ["max_qeue"]
    assert unknown_codes("400 `input_too_long`, 400 `ref_text_too_long`, 422 `no_such_code`") == [
        "no_such_code"
    ]
    assert unknown_series("`polyvox_queue_depth`, `polyvox_engine_preemptions_total`, `polyvox_nope`") == [
        "polyvox_nope"
    ]
