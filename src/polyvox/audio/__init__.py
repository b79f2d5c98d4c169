"""Audio out and in: PyAV encode/decode, resampling, time-stretch."""
