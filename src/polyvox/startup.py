"""`StartupError`: an expected reason polyvox cannot start (a missing or broken checkpoint, a malformed
config file, an invalid setting, an engine that fails to start). The command line prints its message
alone, without a traceback unless `--debug`, so the message names what is wrong and what to do."""

from __future__ import annotations


class StartupError(Exception):
    """An expected start-up failure; `str()` is the whole message a person reads."""
