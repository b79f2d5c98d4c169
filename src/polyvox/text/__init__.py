"""Request shaping for text: normalisation, sentence splitting, lexicon."""
