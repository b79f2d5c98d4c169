"""Synthesis engines behind one contract: the embedded voice and VoxCPM2."""
