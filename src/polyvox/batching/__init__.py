"""Continuous batching, the engine's lower half: sequences, KV blocks, scheduler, model runner,
`BatchingCore`, the one step loop (`step_loop.run_steps`) and its transport in a thread
(`AsyncBatchingCore`); what the engine raises for a request (`errors.py`) and its counters (`stats.py`)."""
