"""Synthesis back ends behind one contract (`base.Backend`): the embedded voice, VoxCPM2, a fake voice for
tests, and `TextPipeline`, which speaks long text through any of them."""
