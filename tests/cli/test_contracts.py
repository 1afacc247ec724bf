"""`till contracts` lists every verb with no store and no I/O beyond printing."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Till

from tillage.verbs.registry import all_verbs

REPO = Path(__file__).resolve().parents[2]


def test_contracts_lists_every_registered_verb_with_its_effect_and_audience(till: Till) -> None:
    doc = till.json("contracts")
    listed = {v["verb"]: v for v in doc["verbs"]}
    assert set(listed) == {v.contract.name for v in all_verbs()}
    for verb in listed.values():
        assert verb["effect"] in {"read", "write", "destructive", "settings"}
        assert verb["audience"] in {"agent", "user", "internal"}
        assert {"params", "result", "errors", "doc", "since"} <= set(verb)


def test_contracts_creates_no_store(till: Till) -> None:
    till.json("contracts")
    assert not till.home.exists()


def test_the_rewind_contract_is_derived_from_its_request(till: Till) -> None:
    doc = till.json("contracts")
    rewind = next(v for v in doc["verbs"] if v["command"] == "rewind")
    names = [p["name"] for p in rewind["params"]]
    assert names == ["id", "paths", "dry_run", "yes"]
    assert rewind["effect"] == "destructive"
    assert rewind["confirmation"] is True
    assert {"snapshot", "changes", "applied", "undo"} <= set(rewind["result"]["fields"])


def test_the_committed_agent_guide_is_up_to_date(till: Till) -> None:
    run = till("agents-md")
    assert run.code == 0
    committed = (REPO / "docs" / "agents.md").read_text()
    assert committed == run.stdout, "docs/agents.md is stale: run `till agents-md > docs/agents.md`"
