"""Each of N takes of the garden sentence (the embedded voice, onyx, PCM at RATE) heard by tiny.en
greedily and with a beam of 5: how many takes had how many of the 13 words wrong, each way.

    POLYVOX_CACHE_ENABLED=false python bench/results/2026-12-06-ci-flow-workers/asr_beam.py 80 16000
"""

import collections
import sys

import httpx
import numpy as np

sys.path.insert(0, "tests")
from helpers.asr import to_16k, whisper_model, word_error_rate  # noqa: E402
from helpers.serve_process import polyvox_serve  # noqa: E402

TEXT = "The garden gate was open. Two cats sat on the warm stone wall."
HEARD = "the garden gate was open two cats sat on the warm stone wall"


def hear(samples: np.ndarray, rate: int, beam: int) -> str:
    options = {"language": "en", "vad_filter": False, "condition_on_previous_text": False}
    segments, _ = whisper_model().transcribe(to_16k(samples, rate), beam_size=beam, **options)
    return " ".join(segment.text.strip() for segment in segments)


def main() -> None:
    takes, rate = int(sys.argv[1]), int(sys.argv[2])
    wrong: dict[int, list[int]] = collections.defaultdict(list)
    body = {"model": "tts-1", "voice": "onyx", "input": TEXT, "response_format": "pcm", "sample_rate": rate}
    with polyvox_serve("--log-level", "warning") as (_, url):
        for _take in range(takes):
            answer = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=60)
            samples = np.frombuffer(answer.content, dtype="<i2").astype(np.float32) / 32768
            for beam in (1, 5):
                wrong[beam].append(round(word_error_rate(HEARD, hear(samples, rate, beam)) * 13))
    for beam, counts in wrong.items():
        histogram = dict(sorted(collections.Counter(counts).items()))
        print(f"rate {rate} beam {beam}: words wrong -> takes {histogram}")


if __name__ == "__main__":
    main()
