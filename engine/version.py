"""The engine's version: stored with every result, so that results of an older model are never reused."""

ENGINE_VERSION = "1.0.0"
