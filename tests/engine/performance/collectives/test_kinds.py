"""The collective kinds keep the short names stored calibration profiles use as keys."""

from __future__ import annotations

from engine.performance.collectives.kinds import CollectiveKind


def test_values_are_the_stored_profile_keys() -> None:
    assert [k.value for k in CollectiveKind] == ["ar", "ag", "rs", "a2a", "p2p"]
    assert CollectiveKind("ag") is CollectiveKind.ALL_GATHER
    assert {"ar": 0.9}[CollectiveKind.ALL_REDUCE] == 0.9  # a profile's str keys look up by the enum
