"""The pitch shift of the output chain (`TimeStretcher`'s `pitch`): a tone moves by 2^(n/12) at an
unchanged length, streamed in chunks or whole, alone or with a speed change; 0 is the identity."""

import numpy as np
import pytest

from polyvox.audio import TimeStretcher

from .signals import TONE_HZ, chunks, dominant_frequency, tone

RATE = 24000


def shifted(samples: np.ndarray, pitch: float, speed: float = 1.0, chunk: int | None = None) -> np.ndarray:
    stretcher = TimeStretcher(RATE, speed, pitch)
    parts = [stretcher.process(c) for c in chunks(samples, chunk)] if chunk else [stretcher.process(samples)]
    return np.concatenate([*parts, stretcher.flush()])


@pytest.mark.parametrize("pitch", [-12, -5, -0.5, 3, 5, 12])
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_the_tone_moves_by_the_semitones_and_keeps_its_length(pitch, streamed):
    samples = tone(1.0, RATE)
    out = shifted(samples, pitch, chunk=int(0.16 * RATE) if streamed else None)
    assert abs(len(out) - len(samples)) < 0.02 * len(samples)
    assert dominant_frequency(out, RATE) == pytest.approx(TONE_HZ * 2 ** (pitch / 12), rel=0.01)


@pytest.mark.parametrize(("pitch", "speed"), [(5, 1.5), (-5, 0.5), (12, 4.0), (-12, 0.25)])
def test_pitch_and_speed_combine(pitch, speed):
    samples = tone(1.0, RATE)
    out = shifted(samples, pitch, speed, chunk=int(0.16 * RATE))
    assert abs(len(out) - len(samples) / speed) < 0.02 * len(samples) / speed
    assert dominant_frequency(out, RATE) == pytest.approx(TONE_HZ * 2 ** (pitch / 12), rel=0.01)


def test_pitch_zero_is_the_identity():
    samples = tone(0.3, RATE)
    assert np.array_equal(shifted(samples, 0), samples)


@pytest.mark.parametrize("pitch", [-12.5, 13])
def test_out_of_range_pitch_is_refused(pitch):
    with pytest.raises(ValueError, match="pitch"):
        TimeStretcher(RATE, 1.0, pitch)
