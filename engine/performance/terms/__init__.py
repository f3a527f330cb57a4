"""The physical terms of the step model, one module per concept, each a typed function returning a named record
of arrays over layouts (README.md in engine/performance)."""
