"""CollectiveKind communication as NCCL runs it: one algorithm per module behind one interface (README.md)."""
