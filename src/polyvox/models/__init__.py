"""The model families polyvox serves, one folder each (PyTorch modules, configs, tokenizers, checkpoint
loaders), registered in `architectures.py`, and what is common to them: the loaded model, the
interface the engine talks to, model sources and random checkpoints."""
