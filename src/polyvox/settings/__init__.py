"""Configuration: one `Settings` object read from flags, `POLYVOX_*` variables, a config file and
defaults (`fields.py`), with its sources (`config_file.py`, `uttera.py`), the lines a person reads when
a value is wrong (`errors.py`) and the README's table of them (`readme_table.py`)."""

from polyvox.settings.config_file import ConfigFileSource
from polyvox.settings.fields import Settings

__all__ = ["ConfigFileSource", "Settings"]
