"""ENGINE_VERSION moves with the engine: a change to engine code or data without a new version fails here."""

from __future__ import annotations

from pathlib import Path

from engine.version import ENGINE_RELEASES, ENGINE_VERSION, engine_files, fingerprint


def test_the_current_version_was_released_with_the_engine_as_it_is() -> None:
    """Edit anything under engine/ that can move a result and this fails until a new version is added."""
    now = fingerprint()
    assert ENGINE_RELEASES[ENGINE_VERSION] == now, (
        f"engine code or data changed since ENGINE_VERSION {ENGINE_VERSION} was released: add a new version to "
        f"ENGINE_RELEASES in engine/version.py with fingerprint {now!r} (stored results of {ENGINE_VERSION} must not be "
        "reused for the new engine)")


def test_every_release_has_its_own_fingerprint_and_versions_grow() -> None:
    prints = [p for p in ENGINE_RELEASES.values() if p]
    assert len(prints) == len(set(prints)), "two versions claim the same engine"
    versions = [tuple(int(x) for x in v.split(".")) for v in ENGINE_RELEASES]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    assert list(ENGINE_RELEASES)[-1] == ENGINE_VERSION


def test_the_fingerprint_sees_code_and_data_but_not_readmes(tmp_path: Path) -> None:
    """A one-byte change to a module or a data file changes the fingerprint; a README does not."""
    (tmp_path / "performance").mkdir()
    (tmp_path / "catalog" / "data").mkdir(parents=True)
    module = tmp_path / "performance" / "model.py"
    data = tmp_path / "catalog" / "data" / "gpus.json"
    readme = tmp_path / "README.md"
    module.write_text("EFF = 0.5\n")
    data.write_text('{"items": []}\n')
    readme.write_text("# engine\n")
    (tmp_path / "version.py").write_text("ENGINE_VERSION = '1'\n")
    base = fingerprint(tmp_path)
    assert [p.name for p in engine_files(tmp_path)] == ["gpus.json", "model.py"]
    module.write_text("EFF = 0.25\n")
    halved = fingerprint(tmp_path)
    assert halved != base
    data.write_text('{"items": [1]}\n')
    assert fingerprint(tmp_path) not in (base, halved)
    before = fingerprint(tmp_path)
    readme.write_text("# engine, reworded\n")
    (tmp_path / "version.py").write_text("ENGINE_VERSION = '2'\n")
    assert fingerprint(tmp_path) == before
