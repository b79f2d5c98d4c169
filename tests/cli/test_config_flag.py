"""`--config FILE` is handed to the settings it is given for, not left in the environment: settings
made afterwards in the same process (another command, an app built in a test or a program) read only
the file `POLYVOX_CONFIG` names, as a person set it. A bad value in the file is still said with the
file and its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from polyvox.cli import build_parser, settings_from_args
from polyvox.settings import Settings
from polyvox.settings.errors import InvalidSettings


def test_the_config_flag_sets_this_commands_settings_and_nothing_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POLYVOX_CONFIG", raising=False)
    config = tmp_path / "polyvox.toml"
    config.write_text("max_queue = 3\n")
    settings = settings_from_args(build_parser().parse_args(["serve", "--config", str(config)]))
    assert settings.max_queue == 3
    assert Settings().max_queue == Settings.model_fields["max_queue"].default


def test_the_config_flag_wins_over_polyvox_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    named, given = tmp_path / "named.toml", tmp_path / "given.toml"
    named.write_text("max_queue = 3\n")
    given.write_text("max_queue = 4\n")
    monkeypatch.setenv("POLYVOX_CONFIG", str(named))
    settings = settings_from_args(build_parser().parse_args(["serve", "--config", str(given)]))
    assert settings.max_queue == 4
    assert Settings().max_queue == 3  # the variable a person set still works


def test_a_bad_value_in_the_given_file_names_the_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POLYVOX_CONFIG", raising=False)
    config = tmp_path / "polyvox.toml"
    config.write_text('port = 9000\nmax_queue = "many"\n')
    with pytest.raises(InvalidSettings) as refused:
        settings_from_args(build_parser().parse_args(["serve", "--config", str(config)]))
    assert f"config file {config}, line 2" in str(refused.value)
