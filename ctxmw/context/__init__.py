"""Context engineering: token counting, budgets, segments, compressors, survival checks."""
