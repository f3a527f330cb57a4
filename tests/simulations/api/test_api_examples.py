"""The OpenAPI examples are documents the engine accepts (a stale example is a broken promise to clients)."""

from __future__ import annotations

from typing import Any

import pytest


def _examples(serializer: Any) -> list[Any]:
    return list(getattr(serializer, "_spectacular_annotation", {}).get("examples", []))


def test_preview_request_example_is_a_valid_engine_document() -> None:
    from engine.document.validate import validate_scenario
    from simulations.api.serializers import PreviewRequestSerializer

    examples = _examples(PreviewRequestSerializer)
    assert examples, "PreviewRequestSerializer documents an example request"
    for example in examples:
        validate_scenario(example.value["document"])  # raises ScenarioError naming the field when stale


def test_a_stale_example_would_fail() -> None:
    from engine.document.validate import validate_scenario
    from engine.errors import ScenarioError

    with pytest.raises(ScenarioError):
        validate_scenario({"model": {"preset": "llama-3-70b"}, "training": {"global_batch_tokens": 1},
                           "parallelism": "auto", "cluster": {"gpu": "H100-SXM", "gpus": 8}})
