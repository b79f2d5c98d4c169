"""LoRA adapters written by the official VoxCPM fine-tuning code, served many at once: read and checked
from disk (`files`), matched to a model's linear layers (`sites`), stacked in device slots and applied per
batch row (`stacked`, `bank`)."""
