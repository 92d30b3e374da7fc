"""publish layer."""
