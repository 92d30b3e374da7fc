"""validation layer."""
