import numpy as np
import pytest

from polyvox.audio import TimeStretcher
from polyvox.audio.stretch import atempo_stages

from .signals import TONE_HZ, chunks, dominant_frequency, tone

RATE = 24000


def stretch(samples, speed, chunk=None):
    stretcher = TimeStretcher(RATE, speed)
    if chunk is None:
        return np.concatenate([stretcher.process(samples), stretcher.flush()])
    parts = [stretcher.process(c) for c in chunks(samples, chunk)]
    return np.concatenate([*parts, stretcher.flush()])


@pytest.mark.parametrize("speed", [0.5, 2.0, 0.25, 4.0, 1.3])
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_duration_scales_and_pitch_stays(speed, streamed):
    out = stretch(tone(1.0, RATE), speed, chunk=int(0.16 * RATE) if streamed else None)
    expected = RATE / speed
    assert abs(len(out) - expected) < 0.04 * expected
    assert abs(dominant_frequency(out, RATE) - TONE_HZ) < 4


def test_speed_one_is_the_identity():
    samples = tone(0.3, RATE)
    assert np.array_equal(stretch(samples, 1.0), samples)


@pytest.mark.parametrize("speed", [0.1, 4.5])
def test_out_of_range_speed_is_refused(speed):
    with pytest.raises(ValueError, match="speed"):
        TimeStretcher(RATE, speed)


@pytest.mark.parametrize("speed", [0.25, 0.3, 0.75, 3.0, 4.0])
def test_stages_multiply_to_the_speed_and_stay_in_range(speed):
    stages = atempo_stages(speed)
    assert np.prod(stages) == pytest.approx(speed)
    assert all(0.5 <= s <= 2.0 for s in stages)
