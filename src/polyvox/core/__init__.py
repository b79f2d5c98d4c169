"""Continuous batching, the engine's lower half: sequences, KV blocks, scheduler, model runner,
`EngineCore`, the one step loop (`step_loop.run_steps`) and its transport in a thread
(`AsyncEngineCore`); what the engine raises for a request (`errors.py`) and its counters (`stats.py`)."""
