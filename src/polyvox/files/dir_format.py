"""The format version of a directory polyvox keeps data in across upgrades (the voices directory, the
audio cache): its `format.json` says which layout the files follow, so that at start a newer polyvox
migrates an older directory and an older polyvox refuses one that a newer polyvox wrote, instead of
misreading it. A directory without the file is format 0, from before the file existed."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from polyvox import __version__

FORMAT_FILE = "format.json"


class DirectoryFormatError(Exception):
    """A directory this polyvox cannot use as it stands; `str()` is one line that says what to do."""


def _unchanged(directory: Path) -> None:
    """A step that only writes the version: the files already follow the next format."""


@dataclass(frozen=True)
class DirectoryFormat:
    """The format `current` of one kind of directory (`what`, as a person names it, e.g. "voices_dir"),
    and `steps[n]`, which moves a directory from format n to n + 1 (each missing step: nothing to move)."""

    what: str
    current: int
    steps: Mapping[int, Callable[[Path], None]] = field(default_factory=dict)

    def ensure(self, directory: Path) -> int:
        """Check `directory` (which exists) at start, migrating an older format step by step; the
        format found. DirectoryFormatError for a newer or unreadable format file, OSError when the
        file cannot be written."""
        found, writer = self.read(directory)
        if found > self.current:
            raise DirectoryFormatError(
                f"{self.what} {directory} has format {found} (written by {writer}), but polyvox "
                f"{__version__} reads format {self.current} at most: upgrade polyvox, or point {self.what} "
                "at another directory"
            )
        for version in range(found, self.current):
            self.steps.get(version, _unchanged)(directory)
        if found < self.current:
            self._write(directory)
        return found

    def read(self, directory: Path) -> tuple[int, str]:
        """The format of `directory` and the polyvox that wrote it ((0, "an earlier polyvox") without
        the file)."""
        path = directory / FORMAT_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            version = data["format"]
        except FileNotFoundError:
            return 0, "an earlier polyvox"
        except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
            raise DirectoryFormatError(
                f"{self.what} {directory}: {path} cannot be read ({exc}); restore it, or delete it to "
                f"have polyvox {__version__} treat the directory as one from before format versions"
            ) from exc
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise DirectoryFormatError(
                f"{self.what} {directory}: {path} names format {version!r}, not a whole number"
            )
        return version, str(data.get("written_by", "another polyvox"))

    def _write(self, directory: Path) -> None:
        # Written whole then renamed: servers sharing the directory may start at once.
        payload = {"format": self.current, "written_by": f"polyvox {__version__}"}
        temporary = directory / f".{FORMAT_FILE}.{uuid.uuid4().hex}.tmp"
        temporary.write_text(json.dumps(payload) + "\n", encoding="utf-8")
        os.replace(temporary, directory / FORMAT_FILE)
