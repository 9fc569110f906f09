"""Use cases: what the writer API does, in the problem's words, over the store."""
