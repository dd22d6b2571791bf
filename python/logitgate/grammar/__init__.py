"""Grammar IR and its serialization for the core."""
