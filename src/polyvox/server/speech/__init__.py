"""`POST /v1/audio/speech` and its stream: parsing, admission, synthesis, caching and output shaping."""
