"""VoxCPM2: its config and sizes, its LM (a `SpeechLM` with VoxCPM2's fusions and LocDiT window), its
loaded model with every prompt mode, and its declaration (`family.py`); built of `models/layers/`."""
