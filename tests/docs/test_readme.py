"""The README's quick start stays the two make commands, and docs/configuration.md's table is the
settings the code has."""

from pathlib import Path

from polyvox.settings import Settings
from polyvox.settings.readme_table import END, PAGES, START, settings_table

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_quick_start_is_the_two_make_commands() -> None:
    quick_start = README.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in quick_start.strip().splitlines()]
    assert commands == ["make serve", "make test"]


def test_configuration_table_lists_every_setting_as_the_code_has_it() -> None:
    assert PAGES[0] == "docs/configuration.md"
    for page in PAGES:
        table = (ROOT / page).read_text(encoding="utf-8").split(START, 1)[1].split(END, 1)[0].strip()
        assert table == settings_table(), f"{page} is stale: run `make docs`"
        for name in Settings.model_fields:
            assert f"`POLYVOX_{name.upper()}`" in table
