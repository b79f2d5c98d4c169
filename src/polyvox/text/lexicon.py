"""The pronunciation lexicon: names and terms replaced by a spoken form before synthesis.

Stored as one JSON object, `{"term": "spoken form"}` (matched without regard to case), or
`{"term": {"say": "spoken form", "case_sensitive": true}}`; a term is at most `MAX_TERM_CHARS`
characters and a spoken form at most `MAX_SAY_CHARS`, neither with control characters. A term
matches as a whole word: a Latin letter or digit at its edge must not continue into a neighbouring
letter or digit ("SQL" does not match inside "MySQL"); at a CJK edge there is no word boundary to
respect, so "张三" matches anywhere. Longer terms win over shorter ones that overlap them. Saves are
atomic (write to a temporary file, then rename), and every method is safe to call from several
threads. Servers sharing the file follow each other's saves with `reload_if_changed` (one stat when
nothing changed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import filelock

from polyvox.files.file_stamp import FileStamp, file_stamp

log = logging.getLogger(__name__)

LOCK_TIMEOUT_S = 30.0
# A term is a name, word or phrase: 200 characters holds any of them, and keeps a term's URL
# (`DELETE /admin/lexicon/{term}`, up to 9 characters per CJK character percent-encoded) under what
# servers and proxies take, and every edit's recompiled pattern small. A spoken form may spell a term
# out, so it gets more room, still a sentence or two rather than a text.
MAX_TERM_CHARS = 200
MAX_SAY_CHARS = 1000


class LexiconError(ValueError):
    """A lexicon file or entry that cannot be used; `param` names the entry's field at fault (`term`,
    `say`), if one is."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class LexiconEntry:
    term: str
    say: str
    case_sensitive: bool = False


_WORD_EDGE = r"0-9A-Za-z\u00c0-\u024f"


class Lexicon:
    """Term → spoken-form replacements, optionally backed by a JSON file at `path`."""

    def __init__(self, entries: list[LexiconEntry] | tuple[LexiconEntry, ...] = (), path: Path | None = None):
        self.path = Path(path) if path is not None else None
        self._lock = threading.RLock()
        self._entries: dict[str, LexiconEntry] = {}
        self._seen: FileStamp = None  # the file as this lexicon last read or saved it
        self._compiled: tuple[re.Pattern[str] | None, dict[str, str], dict[str, str]] = (None, {}, {})
        for entry in entries:
            self._entries[_check(entry).term] = entry
        self._compile()

    @classmethod
    def load(cls, path: str | Path) -> Lexicon:
        """The lexicon stored at `path`; empty (and saved there later) when the file does not exist."""
        path = Path(path)
        stamp = file_stamp(path)  # taken before reading: a later save shows as a change
        if stamp is None:
            return cls(path=path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise LexiconError(f"cannot read lexicon {path}: {exc}") from exc
        lexicon = cls(parse_entries(data), path=path)
        lexicon._seen = stamp
        return lexicon

    def reload(self) -> None:
        """Re-read the file (no-op without one)."""
        if self.path is None or not self.path.exists():
            return
        fresh = Lexicon.load(self.path)
        with self._lock:
            self._entries = fresh._entries
            self._seen = fresh._seen
            self._compile()

    def reload_if_changed(self) -> bool:
        """Re-read the file when it changed since this lexicon last read or saved it (another server
        sharing it saved an edit); True when it did. A malformed file raises LexiconError once, then is
        left alone until it changes again."""
        if self.path is None:
            return False
        with self._lock:  # not in the middle of an edit of this server's (see `editing`)
            stamp = file_stamp(self.path)
            if stamp is None or stamp == self._seen:
                return False
            self._seen = stamp
            self.reload()
        return True

    @contextlib.contextmanager
    def editing(self) -> Iterator[None]:
        """Around an edit and its `save` when other servers may share the file: hold the lock file
        beside it and start from what it holds now, so no server's save drops another's edit.
        Blocking: run it in a thread. Raises LexiconError when the lock stays held."""
        if self.path is None:
            yield
            return
        lock = filelock.FileLock(self.path.with_name(f".{self.path.name}.lock"), timeout=LOCK_TIMEOUT_S)
        try:
            with lock, self._lock:
                try:
                    self.reload_if_changed()
                except LexiconError as exc:  # as without sharing: the edit's save replaces the broken file
                    log.warning("lexicon: %s; saving the entries held here over it", exc)
                yield
        except filelock.Timeout as exc:
            raise LexiconError(
                f"{self.path} stayed locked for {LOCK_TIMEOUT_S:g} s by another writer"
            ) from exc

    def entries(self) -> list[LexiconEntry]:
        """Every entry, sorted by term."""
        with self._lock:
            return sorted(self._entries.values(), key=lambda entry: entry.term)

    @property
    def digest(self) -> str:
        """A hash of every entry, for audio cache keys: a lexicon edit must not serve stale audio."""
        with self._lock:
            return self._digest

    def get(self, term: str) -> LexiconEntry | None:
        with self._lock:
            return self._entries.get(term)

    def add(self, term: str, say: str, case_sensitive: bool = False) -> LexiconEntry:
        """Add an entry, replacing any entry for the same term; the file is not written until `save`."""
        entry = _check(LexiconEntry(term, say, case_sensitive))
        with self._lock:
            self._entries[entry.term] = entry
            self._compile()
        return entry

    def remove(self, term: str) -> bool:
        """Remove the entry for `term`; False when there was none."""
        with self._lock:
            if self._entries.pop(term, None) is None:
                return False
            self._compile()
            return True

    def replace_if_unchanged(self, entries: list[LexiconEntry], digest: str) -> bool:
        """Swap in `entries` as the whole lexicon, unless it changed since `digest` was read (then
        False: the caller's copy is stale). The file is not written until `save`."""
        checked = {_check(entry).term: entry for entry in entries}
        with self._lock:
            if self._digest != digest:
                return False
            self._entries = checked
            self._compile()
        return True

    def save(self, path: str | Path | None = None) -> None:
        """Write every entry to `path` (default: the file it was loaded from) atomically."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise LexiconError("this lexicon has no file to save to")
        with self._lock:
            data = {
                entry.term: {"say": entry.say, "case_sensitive": True} if entry.case_sensitive else entry.say
                for entry in self.entries()
            }
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as file:
                    json.dump(data, file, ensure_ascii=False, indent=2)
                    file.write("\n")
                    file.flush()
                    os.fsync(file.fileno())
                os.replace(tmp, target)
                if target == self.path:
                    self._seen = file_stamp(target)  # its own save is no change to reload
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise

    def apply(self, text: str) -> str:
        """`text` with every whole-word occurrence of a term replaced by its spoken form."""
        pattern, exact, folded = self._compiled
        if pattern is None:
            return text
        return pattern.sub(lambda m: exact.get(m.group()) or folded.get(m.group().lower(), m.group()), text)

    def __len__(self) -> int:
        return len(self._entries)

    def _compile(self) -> None:
        entries = sorted(self._entries.values(), key=lambda entry: len(entry.term), reverse=True)
        exact = {e.term: e.say for e in entries if e.case_sensitive}
        folded = {e.term.lower(): e.say for e in entries if not e.case_sensitive}
        pattern = re.compile("|".join(_term_pattern(e) for e in entries)) if entries else None
        self._compiled = (pattern, exact, folded)
        listing = [(e.term, e.say, e.case_sensitive) for e in sorted(entries, key=lambda e: e.term)]
        self._digest = hashlib.sha256(json.dumps(listing, ensure_ascii=False).encode()).hexdigest()


def parse_entries(data: object) -> list[LexiconEntry]:
    """Entries from the JSON form described in the module docstring."""
    if not isinstance(data, dict):
        raise LexiconError('a lexicon is a JSON object: {"term": "spoken form", ...}')
    entries = []
    for term, value in data.items():
        if isinstance(value, str):
            entries.append(LexiconEntry(term, value))
        elif isinstance(value, dict) and isinstance(value.get("say"), str):
            entries.append(LexiconEntry(term, value["say"], bool(value.get("case_sensitive", False))))
        else:
            raise LexiconError(
                f'lexicon entry {shown_term(term)} must be a string or {{"say": ..., "case_sensitive": ...}}'
            )
    return [_check(entry) for entry in entries]


def _check(entry: LexiconEntry) -> LexiconEntry:
    shown = shown_term(entry.term)
    if not entry.term.strip() or entry.term != entry.term.strip():
        raise LexiconError(f"lexicon term {shown} must be non-empty without surrounding spaces", "term")
    _check_text(entry.term, f"lexicon term {shown}", MAX_TERM_CHARS, "term")
    if not entry.say.strip():
        raise LexiconError(f"the spoken form of {shown} must not be empty", "say")
    _check_text(entry.say, f"the spoken form of {shown}", MAX_SAY_CHARS, "say")
    return entry


def _check_text(text: str, what: str, limit: int, param: str) -> None:
    """At most `limit` characters of text: no control characters (NUL, ESC, newlines...), no lone
    UTF-16 surrogates (valid JSON, but not text a file can hold)."""
    if len(text) > limit:
        raise LexiconError(f"{what} is {len(text)} characters; the limit is {limit}", param)
    control = next((c for c in text if unicodedata.category(c) == "Cc"), None)
    if control is not None:
        raise LexiconError(f"{what} holds a control character (U+{ord(control):04X})", param)
    if any(unicodedata.category(c) == "Cs" for c in text):
        raise LexiconError(f"{what} holds a lone UTF-16 surrogate, which is not text", param)


def shown_term(term: str) -> str:
    """A term as a message quotes it: cut short, so refusing a huge term does not echo it back."""
    return repr(term) if len(term) <= 60 else f"{term[:57]!r}..."


def _term_pattern(entry: LexiconEntry) -> str:
    body = re.escape(entry.term)
    if not entry.case_sensitive:
        body = f"(?i:{body})"
    left = f"(?<![{_WORD_EDGE}])" if re.match(f"[{_WORD_EDGE}]", entry.term[0]) else ""
    right = f"(?![{_WORD_EDGE}])" if re.match(f"[{_WORD_EDGE}]", entry.term[-1]) else ""
    return left + body + right
