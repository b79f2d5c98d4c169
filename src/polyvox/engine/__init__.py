"""Continuous batching for VoxCPM2: sequences, KV blocks, scheduler, model runner, engine loop."""
