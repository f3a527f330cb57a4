"""Print the engine's fingerprint (engine.version.fingerprint): the value a new ENGINE_VERSION is released
with in engine/version.py's RELEASES whenever engine code or data changes."""

from __future__ import annotations

import sys

from engine.version import fingerprint

if __name__ == "__main__":
    sys.stdout.write(fingerprint() + "\n")
