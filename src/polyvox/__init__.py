"""polyvox: a self-hosted, OpenAI-compatible text-to-speech server."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("polyvox")  # the installed package's metadata: pyproject.toml's version
except PackageNotFoundError:  # a source tree on sys.path, never installed
    __version__ = "0+unknown"
