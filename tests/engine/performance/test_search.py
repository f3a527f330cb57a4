from __future__ import annotations

import pytest

from engine.document.parse import parse_scenario
from engine.performance.api import candidate_layouts, predict, search
from engine.performance.result import SearchResult
from tests.engine._scenarios import GPT_22B, scenario


def auto_doc(**training: object) -> dict:
    return scenario(training={"micro_batch": "auto", "recompute": "auto", "zero": "auto", **training},
                    parallelism="auto", cluster={"gpus": 64})


def test_search_returns_fastest_feasible_with_alternatives() -> None:
    res = search(auto_doc(), top_k=5)
    assert isinstance(res, SearchResult)
    assert res.fits
    assert res.candidates_evaluated > 100
    assert 0 < res.candidates_feasible <= res.candidates_evaluated
    assert len(res.alternatives) == 5
    times = [a.result.step_time_s for a in res.alternatives]
    assert all(t >= res.step_time_s for t in times)
    assert times == sorted(times)
    assert all(a.result.fits for a in res.alternatives)
    assert all(a.why for a in res.alternatives)
    d = res.to_dict()
    assert d["candidates_feasible"] == res.candidates_feasible
    assert "why_it_loses" in d["alternatives"][0]


def test_search_beats_every_fixed_layout_it_enumerates() -> None:
    best = search(auto_doc(), top_k=0)
    p = best.parallelism
    for tp, pp in ((8, 1), (4, 2), (2, 4), (8, 2)):
        doc = scenario(training={"micro_batch": 1, "recompute": "selective", "zero": 1},
                       parallelism={"tp": tp, "pp": pp, "cp": 1, "vpp": 1}, cluster={"gpus": 64})
        r = predict(doc)
        if r.fits:
            assert r.step_time_s >= best.step_time_s * (1 - 1e-9)
    # predict on the chosen layout reproduces the search's numbers exactly (same vectorised model)
    fixed = scenario(
        training={"micro_batch": p["micro_batch"], "recompute": p["recompute"], "zero": p["zero"]},
        parallelism={k: p[k] for k in ("tp", "pp", "cp", "ep", "vpp", "sequence_parallel")},
        cluster={"gpus": 64},
    )
    again = predict(fixed)
    assert again.step_time_s == pytest.approx(best.step_time_s, rel=1e-12)
    assert again.memory_gb_per_gpu == pytest.approx(best.memory_gb_per_gpu, rel=1e-12)


def test_predict_with_auto_fields_reports_choice() -> None:
    r = predict(scenario(training={"micro_batch": "auto", "recompute": "auto"}))
    assert r.parallelism["micro_batch"] >= 1
    assert r.parallelism["recompute"] in ("none", "selective", "full")
    assert r.parallelism["tp"] == 8 and r.parallelism["pp"] == 2  # fixed ones untouched
    one = predict(scenario(parallelism={"tp": "auto", "pp": 2, "cp": 1, "vpp": 1}))
    assert one.parallelism["pp"] == 2 and 64 % one.parallelism["tp"] == 0


def test_candidates_respect_constraints() -> None:
    s = parse_scenario(auto_doc())
    lay = candidate_layouts(s)
    prod = lay.tp * lay.pp * lay.dp * lay.cp
    assert (prod == 64).all()
    assert (64 % lay.tp == 0).all() and (GPT_22B["heads"] % lay.tp == 0).all()
    assert (64 % (lay.dp * lay.mb) == 0).all()  # global_batch 64
    assert ((lay.vpp == 1) | (lay.pp > 1)).all()


def test_nothing_fits_still_answers() -> None:
    huge = {**GPT_22B, "layers": 400, "hidden": 16384, "heads": 128, "kv_heads": 128, "ffn_hidden": 65536}
    res = search(scenario(model=huge, training={"global_batch": 16, "micro_batch": "auto"}, cluster={"gpus": 16},
                          parallelism={"tp": 8, "pp": 2, "cp": 1}))
    assert res.candidates_feasible == 0
    assert not res.fits
    assert any("fits" in n for n in res.notes)


def test_moe_search_includes_expert_parallel() -> None:
    moe = {**GPT_22B, "moe": {"experts": 16, "top_k": 2, "expert_ffn_hidden": 8192}}
    res = search(scenario(model=moe, parallelism={"tp": 2, "pp": 1, "cp": 1, "ep": "auto"}))
    s = parse_scenario(scenario(model=moe, parallelism={"tp": 2, "pp": 1, "cp": 1, "ep": "auto"}))
    eps = set(candidate_layouts(s).ep.tolist())
    assert eps == {1.0, 2.0, 4.0, 8.0, 16.0}
    assert res.parallelism["ep"] in (1, 2, 4, 8, 16)
