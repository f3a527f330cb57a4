"""docs/scenario-format.md's reference tables are generated from the declaration, and up to date."""

from __future__ import annotations

from pathlib import Path

from engine.document.reference import main, render, table
from engine.schema.fields import section_fields

DOC = Path(__file__).resolve().parents[3] / "docs" / "scenario-format.md"


def test_the_doc_is_up_to_date() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert render(text) == text, "run: python -m engine.document.reference docs/scenario-format.md"
    assert main(["--check", str(DOC)]) == 0


def test_every_declared_section_has_its_table_in_the_doc() -> None:
    text = DOC.read_text(encoding="utf-8")
    for section in ("top", "model", "model.moe", "training", "parallelism", "cluster", "costs", "costs.goodput",
                    "uncertainty"):
        assert f"<!-- reference:{section} -->" in text, section
    for f in section_fields("cluster"):
        assert f"| `{f.key}` |" in table("cluster")


def test_a_table_shows_type_bound_default_choices_and_help() -> None:
    rows = {line.split("|")[1].strip(): line for line in table("cluster").splitlines()[2:]}
    assert "int 1-1,048,576" in rows["`gpus`"] and "required" in rows["`gpus`"]
    assert "`infiniband` InfiniBand" in rows["`fabric`"] and "`roce` Ethernet (RoCE)" in rows["`fabric`"]
    assert "int 1-128" in rows["`qps_per_connection`"]
    costs = {line.split("|")[1].strip(): line for line in table("costs").splitlines()[2:]}
    assert "| 0.08 |" in costs["`usd_per_kwh`"]  # the default facility's figure, read from the catalog


def test_a_stale_table_is_rewritten(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("intro\n<!-- reference:model.moe -->\nold\n<!-- /reference:model.moe -->\nend\n")
    assert main(["--check", str(doc)]) == 1
    assert main([str(doc)]) == 0 and main(["--check", str(doc)]) == 0
    assert "| `experts` |" in doc.read_text() and "old" not in doc.read_text()
