"""The embedded voice under each of ONNX Runtime's graph optimisation levels: the CPU to build its
session (paid at every start of every process that loads the voice) and to speak a fixed text, and how
far each level's audio is from the default level's (`all`), with the noise off so the audio is a pure
function of the graph. Levels alternate within each round.

    python bench/onnx_levels.py --rounds 5 --json levels.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime
from piper import PiperConfig, PiperVoice, SynthesisConfig

from polyvox.backends import embedded_voice

LEVELS = {
    "disable": onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
TEXT = (
    "The quick brown fox jumps over the lazy dog. Speech synthesis on a CPU should start fast and speak "
    "faster than real time, sentence after sentence."
)


def session(model: bytes, level: onnxruntime.GraphOptimizationLevel) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = level
    return onnxruntime.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def cpu(fn):
    """(what `fn()` returns, the CPU seconds of this process it took)."""
    started = time.process_time()
    result = fn()
    return result, time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--text", default=TEXT)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    files = embedded_voice.locate_voice()
    pinned = embedded_voice.read_verified(files.model, embedded_voice.VOICE_SHA256)
    model = embedded_voice.aligned_model(pinned)
    config = PiperConfig.from_dict(json.loads(files.config.read_text(encoding="utf-8")))
    quiet = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)
    build: dict[str, list[float]] = {name: [] for name in LEVELS}
    speak: dict[str, list[float]] = {name: [] for name in LEVELS}
    audio: dict[str, np.ndarray] = {}
    for _ in range(args.rounds):
        for name, level in LEVELS.items():
            built, seconds = cpu(lambda level=level: session(model, level))
            build[name].append(seconds)
            voice = PiperVoice(session=built, config=config)
            chunks, seconds = cpu(lambda voice=voice: list(voice.synthesize(args.text, quiet)))
            speak[name].append(seconds)
            audio[name] = np.concatenate([chunk.audio_float_array for chunk in chunks])
    reference = audio["all"]
    rows = []
    for name in LEVELS:
        same_length = len(audio[name]) == len(reference)
        n = min(len(audio[name]), len(reference))
        rows.append(
            {
                "level": name,
                "session_cpu_s": round(statistics.median(build[name]), 3),
                "session_cpu_range_s": [round(min(build[name]), 3), round(max(build[name]), 3)],
                "speak_cpu_s": round(statistics.median(speak[name]), 3),
                "speak_cpu_range_s": [round(min(speak[name]), 3), round(max(speak[name]), 3)],
                "audio_s": round(len(audio[name]) / config.sample_rate, 3),
                "same_length_as_all": same_length,
                "max_abs_diff_from_all": float(np.max(np.abs(audio[name][:n] - reference[:n]))),
            }
        )
    for row in rows:
        print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"rounds": args.rounds, "text": args.text, "levels": rows}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
