"""VoxCPM2 in PyTorch: config, tokenizer, prompts, the LM side with a paged batched-inference API,
the AudioVAE and the checkpoint loader."""
