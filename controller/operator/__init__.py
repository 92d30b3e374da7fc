"""operator layer."""
