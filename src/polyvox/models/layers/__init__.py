"""The layers every model family is built of (as vLLM's `model_executor/layers/`): paged attention and
its KV cache, the MiniCPM4 stacks and their fused projections, LocEnc, LocDiT and its flow-matching
solve, FSQ, and the AudioVAE. A family's folder picks and fuses them; nothing here names a family."""
