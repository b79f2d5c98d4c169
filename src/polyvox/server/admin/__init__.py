"""Admin routes under `/admin/`: the pronunciation lexicon."""
