"""Model implementations (PyTorch modules, configs, tokenizers, checkpoint loaders)."""
