"""The CTC aligner: its Viterbi against hand-built emissions whose best path is known (and against every
path, enumerated), and the whole path through transformers on a tiny random wav2vec2 CTC checkpoint
written by the test (its audio alignment means nothing: the plumbing only)."""

from __future__ import annotations

import functools
import itertools
import json
from types import SimpleNamespace

import numpy as np
import pytest

from polyvox.alignment.aligners import make_aligner
from polyvox.alignment.aligners.ctc import CtcAligner, CtcVocabulary
from polyvox.alignment.aligners.ctc_viterbi import forced_align
from polyvox.runtime.startup import StartupError

BLANK, A, B = 0, 1, 2


def emissions(labels: list[int], vocabulary: int = 3, sure: float = 0.9) -> np.ndarray:
    """Log-probabilities where frame t says `labels[t]` with probability `sure`."""
    probs = np.full((len(labels), vocabulary), (1 - sure) / (vocabulary - 1))
    probs[np.arange(len(labels)), labels] = sure
    return np.log(probs)


def test_the_frames_each_token_holds_on_the_obvious_path():
    # frames say: a, blank, a, a, b, b; the word "aab" holds frames [0,1), [2,4), [4,6)
    held = forced_align(emissions([A, BLANK, A, A, B, B]), [A, A, B], BLANK)
    assert held.tolist() == [[0, 1], [2, 4], [4, 6]]


def test_a_repeated_token_gets_the_blank_it_needs():
    # frames say a, a, a, b, but "aab" must pass a blank between its two a's: the least unlikely frame
    # to give up is the one least sure of `a`
    log_probs = np.log(np.array([[0.05, 0.9, 0.05], [0.3, 0.65, 0.05], [0.05, 0.9, 0.05], [0.05, 0.05, 0.9]]))
    held = forced_align(log_probs, [A, A, B], BLANK)
    assert held.tolist() == [[0, 1], [2, 3], [3, 4]]


def test_a_long_sequence_is_followed_to_its_end():
    # 200 tokens (401 states): a sentence's worth of letters; frames say each token twice, then a blank
    tokens = [A, B] * 100
    labels = [label for token in tokens for label in (token, token, BLANK)]
    held = forced_align(emissions(labels), tokens, BLANK)
    assert held.tolist() == [[3 * j, 3 * j + 2] for j in range(len(tokens))]


def test_too_few_frames_to_spell_the_tokens():
    assert forced_align(emissions([A, A, B]), [A, A, B], BLANK) is None
    assert forced_align(emissions([]), [A], BLANK) is None


def best_by_enumeration(log_probs: np.ndarray, targets: list[int]) -> tuple[float, list[int]]:
    """The most likely frame labelling that collapses (merge repeats, drop blanks) to `targets`."""
    best: tuple[float, list[int]] = (-np.inf, [])
    for labels in itertools.product(range(log_probs.shape[1]), repeat=len(log_probs)):
        collapsed = [k for k, _ in itertools.groupby(labels) if k != BLANK]
        if collapsed == targets:
            score = float(log_probs[np.arange(len(labels)), labels].sum())
            best = max(best, (score, list(labels)))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_the_path_is_the_best_of_all_paths(seed):
    rng = np.random.default_rng(seed)
    log_probs = np.log(rng.dirichlet(np.ones(3), size=7))
    targets = [A, B, B] if seed % 2 else [B, A]
    _, labels = best_by_enumeration(log_probs, targets)

    held = forced_align(log_probs, targets, BLANK)

    # the enumerated best labelling, read back as the frames each token holds
    expected: list[list[int]] = []
    previous = BLANK
    for t, label in enumerate(labels):
        if label != BLANK and label != previous:
            expected.append([t, t + 1])
        elif label != BLANK:
            expected[-1][1] = t + 1
        previous = label
    assert held.tolist() == expected


LETTERS = "abcdefghijklmnopqrstuvwxyz'"


@functools.cache
def tiny_ctc_checkpoint(folder: str) -> str:
    """A randomly initialised wav2vec2 CTC model with a letter vocabulary, saved with its tokenizer and
    feature extractor as a hub checkpoint would be."""
    from pathlib import Path

    import torch
    from transformers import (
        Wav2Vec2Config,
        Wav2Vec2CTCTokenizer,
        Wav2Vec2FeatureExtractor,
        Wav2Vec2ForCTC,
    )

    torch.manual_seed(0)
    vocab = {"<pad>": 0, "<unk>": 1, "|": 2} | {ch: 3 + i for i, ch in enumerate(LETTERS)}
    path = Path(folder)
    (path / "vocab.json").write_text(json.dumps(vocab))
    Wav2Vec2CTCTokenizer(str(path / "vocab.json"), word_delimiter_token="|").save_pretrained(folder)
    Wav2Vec2FeatureExtractor(sampling_rate=16000, do_normalize=True).save_pretrained(folder)
    config = Wav2Vec2Config(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        conv_dim=(8, 8, 8),
        conv_stride=(5, 8, 8),
        conv_kernel=(10, 8, 8),
        num_conv_pos_embeddings=8,
        num_conv_pos_embedding_groups=2,
        pad_token_id=0,
    )
    Wav2Vec2ForCTC(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def ctc(tmp_path_factory):
    return make_aligner(tiny_ctc_checkpoint(str(tmp_path_factory.mktemp("ctc"))))


def test_the_checkpoint_loads_as_the_ctc_aligner(ctc):
    assert ctc.name == "ctc"


def test_device_auto_loads_where_torch_can_run_it(tmp_path):
    aligner = make_aligner(tiny_ctc_checkpoint(str(tmp_path)), device="auto")
    spans = aligner.align(np.zeros(16000, np.float32), 16000, ["auto", "device"])
    assert len(spans) == 2


@pytest.mark.parametrize("rate", [16000, 24000])
def test_one_span_per_word_in_order_within_the_audio(ctc, rate):
    audio = np.random.default_rng(1).standard_normal(2 * rate).astype(np.float32) * 0.1
    words = ["Hello,", "big", "wide", "world."]

    spans = ctc.align(audio, rate, words)

    assert len(spans) == len(words)
    assert not any(s.approximate for s in spans)
    assert all(0.0 <= s.start < s.end <= 2.0 for s in spans)
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:], strict=False))


def test_a_word_the_vocabulary_cannot_spell_is_estimated_between_neighbours(ctc):
    audio = np.random.default_rng(2).standard_normal(16000).astype(np.float32) * 0.1
    spans = ctc.align(audio, 16000, ["one", "中文", "two"])

    assert [s.approximate for s in spans] == [False, True, False]
    assert spans[0].end <= spans[1].start <= spans[1].end <= spans[2].start


@pytest.mark.parametrize(
    "audio",
    [np.zeros(16000, np.float32), np.zeros(40, np.float32), np.zeros(0, np.float32)],
    ids=["silence", "forty samples", "empty"],
)
def test_odd_audio_never_raises(ctc, audio):
    words = ["many", "words", "in", "very", "little", "time"]
    spans = ctc.align(audio, 16000, words)

    assert len(spans) == len(words)
    assert all(0.0 <= s.start <= s.end <= len(audio) / 16000 for s in spans)


def test_a_folder_that_is_no_checkpoint_is_a_startup_error(tmp_path):
    with pytest.raises(StartupError, match="CTC model"):
        make_aligner(str(tmp_path))


@pytest.mark.parametrize("letters", ["abcdefghijklmnopqrstuvwxyz'", "ABCDEFGHIJKLMNOPQRSTUVWXYZ'"])
def test_words_are_spelt_in_the_vocabularys_case_without_what_it_lacks(letters):
    # wav2vec2-base-960h spells in capitals beside "<pad>", "<s>", "</s>", "<unk>"; MMS in small letters
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "|": 4} | {
        ch: 5 + i for i, ch in enumerate(letters)
    }
    vocabulary = CtcVocabulary(vocab, blank=0, separator=4)

    assert vocabulary.spell("Don't!") == [
        vocab[ch] for ch in letters[3] + letters[14] + letters[13] + "'" + letters[19]
    ]
    assert vocabulary.spell("中文") == []


class ScriptedModel:
    """Stands in for a CTC model whose frames say a known script (the frame-to-seconds mapping and the
    grouping of letters into words, apart from any network)."""

    def __init__(self, labels: list[int], vocabulary: int, stride: int) -> None:
        import torch

        self.config = SimpleNamespace(inputs_to_logits_ratio=stride)
        self.logits = torch.from_numpy(emissions(labels, vocabulary)).unsqueeze(0)

    def __call__(self, input_values):
        return SimpleNamespace(logits=self.logits)


def test_frames_become_seconds_at_the_models_stride():
    import torch

    vocab = {"<pad>": 0, "|": 1, "a": 2, "b": 3}
    # 49 frames, as wav2vec2 gives for one second at 16 kHz (320 samples a frame, 20 ms): "a" held on
    # frames 10-19, the separator on 30-31, "b" on 40-44
    labels = [0] * 49
    labels[10:20], labels[30:32], labels[40:45] = [2] * 10, [1] * 2, [3] * 5
    features = lambda audio, sampling_rate, return_tensors: SimpleNamespace(  # noqa: E731
        input_values=torch.zeros(1, len(audio))
    )
    features.sampling_rate = 16000
    aligner = CtcAligner(ScriptedModel(labels, 4, stride=320), features, CtcVocabulary(vocab, 0, 1), "cpu")

    spans = aligner.align(np.zeros(24000, np.float32), 24000, ["A", "b."])

    assert [t for s in spans for t in (s.start, s.end)] == pytest.approx([0.2, 0.4, 0.8, 0.9])
    assert not any(s.approximate for s in spans)
