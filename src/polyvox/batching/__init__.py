"""Continuous batching for VoxCPM2: sequences, KV blocks, scheduler, model runner, `BatchingCore` and its
step loop (`AsyncBatchingCore`)."""
