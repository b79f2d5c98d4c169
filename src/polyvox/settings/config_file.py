"""Reading the settings file named by `--config` / `POLYVOX_CONFIG`: TOML, or JSON when its name ends in
`.json` (`ConfigFileSource`, one of `Settings`' sources). The command line hands its `--config` to
`Settings(_config_file=...)`; without one, the file `POLYVOX_CONFIG` names is read. A file that cannot
be read or parsed, or that sets a name that is no setting, raises `ConfigFileError`, naming the file
and the line.

Not pydantic-settings' `TomlConfigSettingsSource` / `JsonConfigSettingsSource` (2.16): they read the
file named in `model_config` (no argument of `Settings()` names it per call, as `--config` must), skip
a file that does not exist without a word, let tomllib's and json's errors through as they are (no
quoted line, no fix), and leave a name that is no setting to `extra` (ignored, or pydantic's "Extra
inputs are not permitted" without the file's line or the setting meant)."""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from collections.abc import Collection
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from polyvox.runtime.startup import StartupError

# tomllib (3.11) gives the position only inside its message: "... (at line 2, column 16)".
_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


class ConfigFileError(StartupError):
    """The config file is missing, unreadable or not valid TOML / JSON."""


CONFIG_FILE_ARGUMENT = "_config_file"  # Settings(_config_file=path), as pydantic-settings' own _env_file


def config_path(given: str | Path | None = None) -> Path | None:
    """The config file to read: the one `given` (`--config`), else the one `POLYVOX_CONFIG` names."""
    path = given or os.environ.get("POLYVOX_CONFIG")
    return Path(path) if path else None


class ConfigFileSource(PydanticBaseSettingsSource):
    """Values from the TOML or JSON file at `path` (None: nothing)."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None):
        super().__init__(settings_cls)
        self.path = path

    def get_field_value(self, field, field_name):  # pragma: no cover - not used by __call__
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        if self.path is None:
            return {}
        data = read_config_file(self.path)  # ConfigFileError names the file and the line
        check_names(self.path, data, self.settings_cls.model_fields)
        return data


def config_format(path: Path) -> str:
    return "JSON" if path.suffix.lower() == ".json" else "TOML"


def read_config_file(path: Path) -> dict[str, Any]:
    """The file's top-level table of settings."""
    fmt = config_format(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigFileError(
            f"config file {path} does not exist; check the path given to --config or POLYVOX_CONFIG"
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"config file {path} is not UTF-8 ({exc.reason}); save it as UTF-8") from exc
    except OSError as exc:
        raise ConfigFileError(f"config file {path} cannot be read: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text) if fmt == "JSON" else tomllib.loads(text)
    except json.JSONDecodeError as exc:
        raise _syntax_error(path, fmt, text, exc.msg, exc.lineno, exc.colno) from exc
    except tomllib.TOMLDecodeError as exc:
        reason = str(exc)
        position = _TOML_POSITION.search(reason)
        line, column = (int(position[1]), int(position[2])) if position else (None, None)
        raise _syntax_error(path, fmt, text, _TOML_POSITION.sub("", reason), line, column) from exc
    if not isinstance(data, dict):
        raise ConfigFileError(
            f"config file {path} holds a JSON {type(data).__name__}, not an object of settings; "
            'write it as {"setting": value, ...}'
        )
    return data


def check_names(path: Path, data: dict[str, object], settings: Collection[str]) -> None:
    """ConfigFileError with a line for each key of `data` that is not one of `settings` (a misspelt
    setting would otherwise be ignored without a word), naming its line and the closest setting."""
    lines = []
    for key in (key for key in data if key not in settings):
        line = line_of(path, key)
        where = f", line {line}" if line is not None else ""
        lines.append(f"config file {path}{where}: {key!r} is not a setting; {_closest(key, settings)}")
    if lines:
        raise ConfigFileError("\n".join(lines))


def _closest(key: str, settings: Collection[str]) -> str:
    """What to write instead: the setting `key` most likely meant, or where the settings are listed."""
    name = key.lower().replace("-", "_").removeprefix("polyvox_")  # an environment variable's or flag's form
    matches = [name] if name in settings else difflib.get_close_matches(name, list(settings), n=1)
    if matches:
        return f"did you mean {matches[0]!r}?"
    return "remove it (`polyvox serve --help` and README's configuration table list every setting)"


def _syntax_error(
    path: Path, fmt: str, text: str, reason: str, line: int | None, column: int | None
) -> ConfigFileError:
    where = f"line {line}, column {column}" if line is not None else "at the end"
    message = f"config file {path} is not valid {fmt}: {where}: {reason}"
    lines = text.splitlines()
    if line is not None and 0 < line <= len(lines):
        message += f"\n    {line} | {lines[line - 1]}"
    form = 'name = value, strings in quotes: host = "0.0.0.0"' if fmt == "TOML" else '{"name": value, ...}'
    return ConfigFileError(f"{message}\nfix that line; settings are written {form}")


def line_of(path: Path, key: str) -> int | None:
    """The first line of the file that sets `key` (for messages about its value), if one does."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    name = re.escape(key)
    pattern = re.compile(rf'^\s*"?{name}"?\s*=|"{name}"\s*:')  # TOML `key = ...`, JSON `"key": ...`
    return next((number for number, text in enumerate(lines, 1) if pattern.search(text)), None)
