"""Slow, obviously-correct reference recognizer used as an oracle by the differential tests."""
