"""Synthesis back ends behind one contract (`base.Backend`): the embedded voice, VoxCPM2, a fake voice for
tests; and `TextPipeline`, the text step that prepares a request's pieces and speaks them on any of them."""
