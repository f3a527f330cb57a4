"""The builder's workload presets in the browser: picking DeepSeek-V3 fills its own degrees (manual mode, PP 16,
EP 64, the manual inputs shown) and the live estimate runs on them; picking a preset that states no degrees puts
the parallelism back to the search (auto mode, the manual inputs hidden)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import needs_chromium, shot, sign_in, wait_js

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True), needs_chromium]


def test_a_preset_sets_the_parallelism_mode_and_its_degrees(live_server: Any, browser: Any, make_user: Any,
                                                            team: Any) -> None:
    from planning import services

    services.catalog_load_default()
    planner = make_user("planner", team=team, username="dee-presets")
    page = sign_in(browser, live_server.url, planner.username)
    page.goto(f"{live_server.url}/scenarios/new/")
    page.wait_for_selector("#est-step-time")
    assert page.is_checked("input[name=par_mode][value=auto]")
    assert not page.is_visible("input[name=pp]")

    page.select_option("select[name=preset]", "deepseek-v3")
    assert page.is_checked("input[name=par_mode][value=manual]")
    assert not page.is_checked("input[name=par_mode][value=auto]")
    assert page.is_visible("input[name=pp]")
    values = {name: page.input_value(f"input[name={name}]") for name in ("tp", "pp", "vpp", "cp", "ep", "etp")}
    assert values == {"tp": "1", "pp": "16", "vpp": "", "cp": "1", "ep": "64", "etp": ""}, values
    assert page.input_value("input[name=mla_kv_lora_rank]") == "512"
    assert page.input_value("input[name=mtp_layers]") == "1"  # DeepSeek-V3's one multi-token-prediction module
    # the estimate follows the form: DeepSeek-V3 on the builder's cluster, not refused for the size of its search
    wait_js(page, "document.querySelector('#estimate-result') && document.querySelector('#est-step-time')"
                  " && !document.querySelector('#estimate-errors')"
                  " && document.querySelector('#estimate-result').textContent.includes('PP 16')"
                  " && document.querySelector('#estimate-result').textContent.includes('EP 64')")
    shot(page, "45-builder-deepseek-v3-preset")

    page.select_option("select[name=preset]", "llama3-8b")
    assert page.is_checked("input[name=par_mode][value=auto]")
    assert not page.is_visible("input[name=pp]")
    assert page.input_value("input[name=mtp_layers]") == ""
