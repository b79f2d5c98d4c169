"""The model families polyvox serves, one folder each (config, LM, loaded model, declaration), registered
in `architectures.py`, and what is common to them: the layers they are built of (`layers/`), the loaded
model, the interface the engine talks to, tokenizer, prompts, checkpoints, model sources and random
weights."""
