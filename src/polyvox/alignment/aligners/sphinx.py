"""The `pocketsphinx` aligner: forced alignment of a piece's spoken words with pocketsphinx 5's US
English acoustic model and CMUdict, offline and on the CPU. English only: a word outside the
dictionary is aligned with a rough letter-by-letter pronunciation and marked approximate; a word with
no Latin letters (another script, digits, punctuation) is shared out between its found neighbours."""

from __future__ import annotations

import contextlib
import threading
import unicodedata
from collections.abc import Sequence

import numpy as np

from polyvox.alignment.aligners.estimate import EstimateAligner, fill_gaps
from polyvox.alignment.aligners.span import Span
from polyvox.audio.resample import resample_clip
from polyvox.runtime.startup import StartupError

RATE = 16000  # the acoustic model's rate
FRAMES_PER_S = 100  # pocketsphinx's default frame rate
# One ARPABET phone per letter: a pronunciation of about the right length for a word CMUdict lacks
# (a name, a coinage), so that it takes its share of the audio instead of its neighbours taking it.
LETTER_PHONES = {
    "a": "AE", "b": "B", "c": "K", "d": "D", "e": "EH", "f": "F", "g": "G", "h": "HH", "i": "IH",
    "j": "JH", "k": "K", "l": "L", "m": "M", "n": "N", "o": "AA", "p": "P", "q": "K", "r": "R",
    "s": "S", "t": "T", "u": "AH", "v": "V", "w": "W", "x": "K S", "y": "Y", "z": "Z",
}  # fmt: skip
FILLERS = {"<s>", "</s>", "<sil>", "(NULL)", "[NOISE]"}


def dictionary_form(word: str) -> str:
    """The word as CMUdict spells its entries: lower case, Latin letters without accents, inner
    apostrophes and hyphens kept; "" when nothing is left."""
    plain = unicodedata.normalize("NFKD", word).encode("ascii", "ignore").decode().lower()
    kept = "".join(ch for ch in plain if ch.isalpha() or ch in "'-")
    return kept.strip("'-")


def letter_pronunciation(word: str) -> str:
    """A rough pronunciation, one phone per letter (doubled letters once)."""
    letters = [ch for i, ch in enumerate(word) if ch.isalpha() and (i == 0 or ch != word[i - 1])]
    return " ".join(LETTER_PHONES[ch] for ch in letters if ch in LETTER_PHONES)


class SphinxAligner:
    """One decoder, used by one alignment at a time (a pocketsphinx decoder is not thread-safe)."""

    name = "pocketsphinx"

    def __init__(self, decoder) -> None:
        self._decoder = decoder
        self._lock = threading.Lock()
        self._fallback = EstimateAligner()
        self._guessed: set[str] = set()  # words this decoder was taught a letter pronunciation for

    @classmethod
    def load(cls) -> SphinxAligner:
        try:
            from pocketsphinx import Decoder  # type: ignore[import-untyped, unused-ignore]
        except ImportError as exc:
            raise StartupError(
                "aligner 'pocketsphinx' needs the pocketsphinx package: pip install 'polyvox[align]'"
            ) from exc
        try:
            return cls(Decoder(lm=None, samprate=RATE, loglevel="FATAL"))
        except (RuntimeError, ValueError) as exc:
            raise StartupError(f"aligner 'pocketsphinx' could not load its English model: {exc}") from exc

    def align(self, samples: np.ndarray, sample_rate: int, words: Sequence[str]) -> list[Span]:
        if not words:
            return []
        samples = np.nan_to_num(np.asarray(samples, dtype=np.float32).reshape(-1))
        duration = len(samples) / sample_rate
        with self._lock:
            tokens = [self._token(w) for w in words]
            found = self._found(samples, sample_rate, tokens, duration)
        if found is None or all(span is None for span in found):
            return self._fallback.align(samples, sample_rate, words)
        return fill_gaps(words, found, duration)

    def _token(self, word: str) -> tuple[str, bool] | None:
        """The dictionary entry to align `word` as, and whether CMUdict knew it (else it is added with a
        letter pronunciation); None when the word has nothing to pronounce."""
        form = dictionary_form(word)
        if not form:
            return None
        if self._decoder.lookup_word(form) is not None:
            return form, form not in self._guessed
        parts = [p for p in form.replace("'", "-").split("-") if p]
        known = [self._decoder.lookup_word(p) for p in parts]
        phones = [k or letter_pronunciation(p) for k, p in zip(known, parts, strict=True)]
        self._decoder.add_word(form, " ".join(phones), True)
        if None in known:
            self._guessed.add(form)
        return form, None not in known

    def _found(
        self,
        samples: np.ndarray,
        sample_rate: int,
        tokens: Sequence[tuple[str, bool] | None],
        duration: float,
    ) -> list[Span | None] | None:
        """Each token's span as the decoder aligned it (None for a word it had nothing to align); None
        for all when the alignment fails (too short, or the decoder finds no path)."""
        aligned = [t for t in tokens if t is not None]
        if not aligned:
            return [None] * len(tokens)
        audio = resample_clip(samples, sample_rate, RATE)
        pcm = (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2").tobytes()
        try:
            self._decoder.set_align_text(" ".join(form for form, _ in aligned))
            self._decoder.start_utt()
            self._decoder.process_raw(pcm, full_utt=True)
            self._decoder.end_utt()
            segments = [s for s in self._decoder.seg() or () if s.word not in FILLERS]
        except RuntimeError:
            with contextlib.suppress(RuntimeError):
                self._decoder.end_utt()
            return None
        if len(segments) != len(aligned):
            return None
        spans = iter(segments)
        found: list[Span | None] = []
        last_end = 0.0
        for token in tokens:
            if token is None:
                found.append(None)
                continue
            segment = next(spans)
            start = min(max(segment.start_frame / FRAMES_PER_S, last_end), duration)
            end = min(max((segment.end_frame + 1) / FRAMES_PER_S, start), duration)
            found.append(Span(start, end, approximate=not token[1]))
            last_end = end
        return found
