"""The CTC aligner: a wav2vec2 / MMS CTC checkpoint (a directory or a hub id, through transformers'
`AutoModelForCTC` and the checkpoint's own feature extractor and tokenizer) gives each frame's token
log-probabilities, and `ctc_viterbi.forced_align` finds the spoken words' characters in them. It serves
the languages the checkpoint's vocabulary spells; characters outside that vocabulary are dropped for
alignment (no romanisation), and a word left with none is shared out between its found neighbours.
torch and transformers are imported only when such an aligner is built (the `voxcpm` extra)."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np

from polyvox.alignment.aligners.ctc_viterbi import forced_align
from polyvox.alignment.aligners.estimate import EstimateAligner, fill_gaps
from polyvox.alignment.aligners.span import Span
from polyvox.audio.resample import resample_clip
from polyvox.runtime.startup import StartupError


class CtcVocabulary:
    """How a checkpoint's character tokenizer spells a word: its blank, its word separator and the case
    its letters are in."""

    def __init__(self, vocab: dict[str, int], blank: int, separator: int | None) -> None:
        self.ids = vocab
        self.blank = blank
        self.separator = separator
        # the letters' case, from the one-character tokens ("<pad>" and the like say nothing)
        self.lower = any(len(token) == 1 and token.islower() for token in vocab)

    def spell(self, word: str) -> list[int]:
        """The token ids of `word`'s characters the vocabulary has (the others dropped)."""
        word = unicodedata.normalize("NFC", word.lower() if self.lower else word.upper())
        return [self.ids[ch] for ch in word if ch in self.ids and self.ids[ch] != self.blank]


class CtcAligner:
    """One checkpoint on one device; `align` may run in several threads at once (inference only)."""

    name = "ctc"

    def __init__(self, model: Any, features: Any, vocabulary: CtcVocabulary, device: str) -> None:
        self._model = model
        self._features = features
        self._vocabulary = vocabulary
        self._device = device
        self._rate = int(features.sampling_rate)
        # the samples per output frame: declared by every architecture AutoModelForCTC loads for speech
        # (wav2vec2, HuBERT, WavLM, data2vec-audio, the conformer); any other spreads its frames evenly
        stride = getattr(model.config, "inputs_to_logits_ratio", None)
        self._frame_s = stride / self._rate if stride else None
        self._fallback = EstimateAligner()

    @classmethod
    def load(cls, spec: str, *, device: str = "cpu") -> CtcAligner:
        try:
            import torch
            from transformers import AutoFeatureExtractor, AutoModelForCTC, AutoTokenizer
        except ImportError as exc:
            raise StartupError(
                f"aligner {spec!r} (a CTC model) needs torch and transformers: pip install 'polyvox[voxcpm]'"
            ) from exc
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            model = AutoModelForCTC.from_pretrained(spec).to(device).eval()
            features = AutoFeatureExtractor.from_pretrained(spec)
            tokenizer = AutoTokenizer.from_pretrained(spec)
            vocab = tokenizer.get_vocab()
            delimiter = tokenizer.convert_tokens_to_ids(tokenizer.word_delimiter_token or "|")
            blank = int(tokenizer.pad_token_id)
        except (OSError, ValueError, KeyError, RuntimeError, AttributeError, TypeError) as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StartupError(
                f"aligner {spec!r} is neither 'estimate', 'pocketsphinx' nor a CTC model directory or "
                f"hub id that loads: {reason}"
            ) from exc
        separator = delimiter if isinstance(delimiter, int) and delimiter in vocab.values() else None
        vocabulary = CtcVocabulary(vocab, blank, separator)
        return cls(model, features, vocabulary, device)

    def align(self, samples: np.ndarray, sample_rate: int, words: Sequence[str]) -> list[Span]:
        if not words:
            return []
        samples = np.nan_to_num(np.asarray(samples, dtype=np.float32).reshape(-1))
        duration = len(samples) / sample_rate
        spellings = [self._vocabulary.spell(w) for w in words]
        if not any(spellings) or not len(samples):
            return self._fallback.align(samples, sample_rate, words)
        emissions = self._emissions(resample_clip(samples, sample_rate, self._rate))
        if emissions is None:
            return self._fallback.align(samples, sample_rate, words)
        targets, owners = self._targets(spellings)
        held = forced_align(emissions, targets, self._vocabulary.blank)
        if held is None:
            return self._fallback.align(samples, sample_rate, words)
        frame_s = self._frame_s or duration / len(emissions)
        found: list[Span | None] = []
        for i, spelling in enumerate(spellings):
            if not spelling:
                found.append(None)
                continue
            mine = held[owners == i]
            start = min(mine[0, 0] * frame_s, duration)
            found.append(Span(float(start), float(min(mine[-1, 1] * frame_s, duration)), False))
        return fill_gaps(words, found, duration)

    def _targets(self, spellings: Sequence[list[int]]) -> tuple[list[int], np.ndarray]:
        """The token sequence to align (the spelt words, the separator between them) and, per token, the
        index of the word it spells (-1 for a separator)."""
        targets: list[int] = []
        owners: list[int] = []
        for i, spelling in enumerate(spellings):
            if not spelling:
                continue
            if targets and self._vocabulary.separator is not None:
                targets.append(self._vocabulary.separator)
                owners.append(-1)
            targets += spelling
            owners += [i] * len(spelling)
        return targets, np.array(owners)

    def _emissions(self, audio: np.ndarray) -> np.ndarray | None:
        """Per-frame token log-probabilities (frames x vocabulary); None when the audio is too short for
        the model's first convolutions."""
        import torch

        inputs = self._features(audio, sampling_rate=self._rate, return_tensors="pt").input_values
        try:
            with torch.inference_mode():
                logits = self._model(inputs.to(self._device)).logits[0]
        except RuntimeError:
            return None
        log_probs: np.ndarray = torch.log_softmax(logits.float(), dim=-1).cpu().numpy()
        return log_probs if len(log_probs) else None
