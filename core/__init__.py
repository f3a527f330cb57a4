"""Shared kernel: what every app may import and which imports no app (domain errors)."""
