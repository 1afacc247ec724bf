"""The page's calls against the real `till ui`: every action a verb call with its contract,
previewed before it applies, and nothing changed by a preview that went stale."""

from __future__ import annotations

import http.client
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tests.web.conftest import Mission, fork_folder, start_ui


def _rewind_preview(mission: Mission, universe: str, snapshot: str) -> Any:
    return mission.result(
        "/api/preview",
        {"verb": "workspace.rewind", "universe": universe, "params": {"id": snapshot}},
    )


def _apply(mission: Mission, verb: str, universe: str, params: Any, previewed: Any) -> Any:
    return mission.post(
        "/api/apply",
        {
            "verb": verb,
            "universe": universe,
            "params": params,
            "preview_digest": previewed["preview_digest"],
            "confirm_snapshot": previewed["confirm_snapshot"],
        },
    )


def test_the_overview_is_the_family_with_its_collisions(
    mission: Mission, till: Till, folder: Path
) -> None:
    (fork_folder(folder, "agent-a") / "app.py").write_text("print('fork')\n")
    till.json("snap", cwd=fork_folder(folder, "agent-a"))
    (folder / "app.py").write_text("print('here')\n")
    till.json("snap")
    overview = mission.overview()
    names = [(u["name"], u["depth"]) for u in overview["universes"]]
    assert names == [("project", 0), ("agent-a", 1)]
    root, fork = overview["universes"]
    assert overview["here"] == root["id"]
    assert fork["parent"] == root["id"] and fork["fork"]["disk_bytes"] > 0
    assert fork["status"]["head"]["id"] == fork["fork"]["head"]
    assert [(c["path"], c["forks"], c["workspace"]) for c in overview["radar"]["conflicts"]] == [
        ("app.py", ["agent-a"], True)
    ]


def test_a_rewind_is_previewed_then_applied_and_shows_its_undo(
    mission: Mission, till: Till, folder: Path
) -> None:
    root = mission.universe("project")
    first = till.json("timeline")["snapshots"][-1]["id"]
    count = len(till.json("timeline")["snapshots"])
    previewed = _rewind_preview(mission, root, first)
    assert previewed["confirm_snapshot"] == first
    assert [c["path"] for c in previewed["preview"]["changes"]] == ["app.py"]
    assert (folder / "app.py").read_text() == "print('v2')\n"  # a preview changes nothing
    assert len(till.json("timeline")["snapshots"]) == count
    applied = _apply(mission, "workspace.rewind", root, {"id": first}, previewed)
    assert applied.status == 200, applied.body
    result = applied.doc["result"]
    assert result["applied"] is True and result["undo"]
    assert (folder / "app.py").read_text() == "print('v1')\n"
    undo = _rewind_preview(mission, root, result["undo"])
    assert _apply(mission, "workspace.rewind", root, {"id": result["undo"]}, undo).status == 200
    assert (folder / "app.py").read_text() == "print('v2')\n"  # the rewind was rewound


def test_a_preview_gone_stale_changes_nothing_and_shows_the_fresh_one(
    mission: Mission, till: Till, folder: Path
) -> None:
    root = mission.universe("project")
    first = till.json("timeline")["snapshots"][-1]["id"]
    previewed = _rewind_preview(mission, root, first)
    (folder / "new.txt").write_text("written after the preview\n")  # an agent writes meanwhile
    heads = len(till.json("timeline")["snapshots"])
    stale = _apply(mission, "workspace.rewind", root, {"id": first}, previewed)
    assert (stale.status, stale.error) == (409, "ui.stale_preview")
    fresh = stale.doc["error"]["details"]
    assert {c["path"] for c in fresh["preview"]["changes"]} == {"app.py", "new.txt"}
    assert (folder / "new.txt").exists() and (folder / "app.py").read_text() == "print('v2')\n"
    assert len(till.json("timeline")["snapshots"]) == heads  # not even a pre-rewind seal
    assert _apply(mission, "workspace.rewind", root, {"id": first}, fresh).status == 200
    assert not (folder / "new.txt").exists()


def test_an_apply_must_confirm_the_snapshot_previewed(
    mission: Mission, till: Till, folder: Path
) -> None:
    root = mission.universe("project")
    snaps = till.json("timeline")["snapshots"]
    previewed = _rewind_preview(mission, root, snaps[-1]["id"])
    wrong = {**previewed, "confirm_snapshot": snaps[0]["id"]}
    answer = _apply(mission, "workspace.rewind", root, {"id": snaps[-1]["id"]}, wrong)
    assert (answer.status, answer.error) == (409, "ui.confirm_mismatch")
    for missing in ("preview_digest", "confirm_snapshot"):
        body = {
            "verb": "workspace.rewind",
            "universe": root,
            "params": {"id": snaps[-1]["id"]},
            **{k: previewed[k] for k in ("preview_digest", "confirm_snapshot") if k != missing},
        }
        answer = mission.post("/api/apply", body)
        assert (answer.status, answer.error) == (400, "invalid_argument"), missing
    assert (folder / "app.py").read_text() == "print('v2')\n"


def test_a_rewind_by_a_name_applies_the_snapshot_previewed_not_where_the_name_moved(
    mission: Mission, till: Till, folder: Path
) -> None:
    root = mission.universe("project")
    previewed = mission.result(
        "/api/preview", {"verb": "workspace.rewind", "universe": root, "params": {"id": "head~1"}}
    )
    first = till.json("timeline")["snapshots"][-1]["id"]
    assert previewed["confirm_snapshot"] == first
    applied = _apply(mission, "workspace.rewind", root, {"id": "head~1"}, previewed)
    assert applied.doc["result"]["snapshot"]["id"] == first


def test_destructive_verbs_are_not_callable_without_a_preview(mission: Mission) -> None:
    root = mission.universe("project")
    for verb, params in (
        ("workspace.rewind", {"id": "head", "yes": True}),
        ("fork.remove", {"name": "agent-a", "yes": True}),
        ("merge.apply", {"name": "agent-a"}),
        ("workspace.forget", {"purge": True, "yes": True}),
        ("store.gc", {"yes": True}),
        ("fork.run", {"name": "x", "command": ["touch", "pwned"]}),
        ("try.run", {"command": ["true"]}),
    ):
        answer = mission.post("/api/call", {"verb": verb, "universe": root, "params": params})
        assert (answer.status, answer.error) == (404, "ui.not_offered"), verb
        assert verb not in answer.doc["error"]["details"]["offered"] or verb in (
            "workspace.rewind",
            "fork.remove",
            "merge.apply",
        )
    for verb in ("workspace.forget", "store.gc", "timeline.list"):
        answer = mission.post("/api/preview", {"verb": verb, "universe": root, "params": {}})
        assert (answer.status, answer.error) == (404, "ui.not_offered"), verb


def test_a_universe_outside_the_family_is_unknown(
    mission: Mission, till: Till, folder: Path
) -> None:
    other = folder.parent / "other"
    other.mkdir()
    (other / "secret.txt").write_text("not this page's\n")
    till.json("watch", "--no-daemon", cwd=other)
    other_id = till.json("status", cwd=other)["id"]
    for universe in (other_id, "x" * 32, str(other)):
        answer = mission.post(
            "/api/call",
            {
                "verb": "timeline.cat",
                "universe": universe,
                "params": {"id": "head", "path": "secret.txt"},
            },
        )
        assert (answer.status, answer.error) == (404, "ui.unknown_universe"), universe


def test_a_bad_argument_is_a_public_error_naming_it(mission: Mission) -> None:
    root = mission.universe("project")
    for params, words in (
        ({"limit": "ten"}, "limit must be int"),
        ({"limit": True}, "limit must be int"),
        ({"limit": 0}, "-n must be at least 1"),
        ({"nonsense": 1}, "unknown param 'nonsense'"),
        ({"after": "0" * 64}, "no snapshot"),
    ):
        answer = mission.post(
            "/api/call", {"verb": "timeline.list", "universe": root, "params": params}
        )
        assert answer.status in (400, 404), (params, answer.body)
        assert words in answer.doc["error"]["message"], (params, answer.body)
    answer = mission.post("/api/call", {"verb": "timeline.list", "universe": root, "params": []})
    assert (answer.status, answer.error) == (400, "invalid_argument")


def test_a_merge_whose_check_fails_lands_nothing_and_shows_the_check(
    mission: Mission, till: Till, folder: Path
) -> None:
    fork = fork_folder(folder, "agent-a")
    (fork / "feature.txt").write_text("from the fork\n")
    till.json("snap", cwd=fork)
    root = mission.universe("project")
    params = {"name": "agent-a", "check": "echo checking; test -e never-there"}
    previewed = mission.result(
        "/api/preview", {"verb": "merge.apply", "universe": root, "params": params}
    )
    assert previewed["preview"]["dry_run"] is True
    assert previewed["confirm_snapshot"] == previewed["preview"]["theirs"]
    answer = _apply(mission, "merge.apply", root, params, previewed)
    assert answer.status == 200, answer.body
    result = answer.doc["result"]
    assert result["landed"] is False and result["check_failed"] is True
    assert "checking" in result["check_output"]
    assert not (folder / "feature.txt").exists()
    passing = {"name": "agent-a", "check": "test -e feature.txt"}
    previewed = mission.result(
        "/api/preview", {"verb": "merge.apply", "universe": root, "params": passing}
    )
    landed = _apply(mission, "merge.apply", root, passing, previewed).doc["result"]
    assert landed["landed"] is True
    assert (folder / "feature.txt").read_text() == "from the fork\n"


def test_a_merge_preview_gone_stale_lands_nothing(
    mission: Mission, till: Till, folder: Path
) -> None:
    fork = fork_folder(folder, "agent-a")
    (fork / "feature.txt").write_text("one\n")
    till.json("snap", cwd=fork)
    root = mission.universe("project")
    params = {"name": "agent-a"}
    previewed = mission.result(
        "/api/preview", {"verb": "merge.apply", "universe": root, "params": params}
    )
    (fork / "feature.txt").write_text("two: changed after the preview\n")
    till.json("snap", cwd=fork)
    answer = _apply(mission, "merge.apply", root, params, previewed)
    assert answer.status == 409 and answer.error in ("ui.stale_preview", "merge.stale_preview")
    assert not (folder / "feature.txt").exists()


def test_a_fork_is_removed_only_through_its_preview_and_its_last_state_is_kept(
    mission: Mission, till: Till, folder: Path
) -> None:
    fork = fork_folder(folder, "agent-a")
    (fork / "work.txt").write_text("the agent's work\n")
    root = mission.universe("project")
    params = {"name": "agent-a"}
    previewed = mission.result(
        "/api/preview", {"verb": "fork.remove", "universe": root, "params": params}
    )
    assert fork.exists() and previewed["preview"]["path"] == str(fork)
    (fork / "later.txt").write_text("written after the preview\n")
    till.json("snap", cwd=fork)
    stale = _apply(mission, "fork.remove", root, params, previewed)
    assert (stale.status, stale.error) == (409, "ui.stale_preview")
    assert (fork / "later.txt").exists()
    fresh = stale.doc["error"]["details"]
    removed = _apply(mission, "fork.remove", root, params, fresh).doc["result"]
    assert removed["removed"] is True and not fork.exists()
    kept = till("cat", removed["snapshot"]["id"], "later.txt")
    assert kept.stdout == "written after the preview\n"
    assert [u["name"] for u in mission.overview()["universes"]] == ["project"]


def test_pins_and_claims_are_verb_calls(mission: Mission, till: Till) -> None:
    root = mission.universe("project")
    head = till.json("timeline")["snapshots"][0]["id"]
    assert mission.result(
        "/api/call", {"verb": "timeline.pin", "universe": root, "params": {"id": head}}
    )["snapshot"]["pinned"]
    assert till.json("show", head)["snapshot"]["pinned"] is True
    mission.result(
        "/api/call", {"verb": "timeline.unpin", "universe": root, "params": {"id": head}}
    )
    assert till.json("show", head)["snapshot"]["pinned"] is False
    claim = mission.result(
        "/api/call",
        {"verb": "claim.take", "universe": root, "params": {"pattern": "src/*", "owner": "me"}},
    )["claim"]
    assert [c["id"] for c in mission.overview()["claims"]["claims"]] == [claim["id"]]
    wrong = mission.post(
        "/api/call",
        {
            "verb": "claim.release",
            "universe": root,
            "params": {"claim": claim["id"], "owner": "you"},
        },
    )
    assert wrong.status != 200  # the verb's own rule: only the owner releases
    mission.result(
        "/api/call",
        {
            "verb": "claim.release",
            "universe": root,
            "params": {"claim": claim["id"], "owner": "me"},
        },
    )
    assert till.json("claims")["claims"] == []


def test_the_timeline_pages_through_thousands(mission: Mission, till: Till, folder: Path) -> None:
    for n in range(7):
        (folder / "notes.md").write_text(f"edit {n}\n")
        till.json("snap", "-m", f"edit {n}")
    root = mission.universe("project")
    everything = [s["id"] for s in till.json("timeline", "-n", "100")["snapshots"]]
    seen: list[str] = []
    after = None
    while True:
        params: dict[str, Any] = {"limit": 3, **({"after": after} if after else {})}
        page = mission.result(
            "/api/call", {"verb": "timeline.list", "universe": root, "params": params}
        )
        seen += [s["id"] for s in page["snapshots"]]
        assert page["more"] == len(everything) - len(seen)
        if not page["more"]:
            break
        after = page["snapshots"][-1]["id"]
    assert seen == everything


def test_a_file_is_sent_for_preview_only_up_to_its_limit(
    mission: Mission, till: Till, folder: Path
) -> None:
    (folder / "pixel.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    (folder / "huge.bin").write_bytes(b"\0" * (9 << 20))
    head = till.json("snap")["snapshot"]["id"]
    root = mission.universe("project")
    small = mission.result(
        "/api/call",
        {"verb": "timeline.cat", "universe": root, "params": {"id": head, "path": "pixel.png"}},
    )
    assert small["size"] == 72 and small["content_base64"].startswith("iVBORw0KGgo")
    huge = mission.result(
        "/api/call",
        {"verb": "timeline.cat", "universe": root, "params": {"id": head, "path": "huge.bin"}},
    )
    assert huge["size"] == 9 << 20 and huge["content_base64"] is None


def _read_event(conn: http.client.HTTPConnection, response: http.client.HTTPResponse) -> Any:
    block = b""
    while not block.endswith(b"\n\n") or b"data: " not in block:
        line = response.readline()
        assert line, "the feed ended"
        block = b"" if line == b"\n" and b"data: " not in block else block + line
    data = [line[6:] for line in block.split(b"\n") if line.startswith(b"data: ")]
    return json.loads(b"\n".join(data))


def test_the_event_feed_tells_of_a_seal_in_any_universe(
    mission: Mission, till: Till, folder: Path
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", mission.port, timeout=60)
    conn.request("GET", "/api/events", headers={"X-Tillage-Token": mission.token})
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type", "").startswith("text/event-stream")
    assert response.readline() == b": tillage events\n"  # the feed is open
    fork = fork_folder(folder, "agent-a")
    (fork / "new.txt").write_text("sealed while the page looks\n")
    sealed = till.json("snap", "-m", "live", cwd=fork)["snapshot"]["id"]
    event = _read_event(conn, response)
    while event["kind"] != "sealed":
        event = _read_event(conn, response)
    assert event["detail"]["snapshot"] == sealed
    assert event["workspace_id"] == mission.universe("agent-a")
    conn.close()
    # Resuming after a cursor sends what came after it, history included.
    conn = http.client.HTTPConnection("127.0.0.1", mission.port, timeout=60)
    conn.request(
        "GET", "/api/events", headers={"X-Tillage-Token": mission.token, "Last-Event-ID": "0"}
    )
    response = conn.getresponse()
    response.readline()
    assert _read_event(conn, response)["cursor"] >= 1
    conn.close()


def test_till_ui_refuses_a_folder_not_attached(till: Till, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    run = till("--json", "ui", cwd=bare)
    assert run.code == 1 and run.doc["error"]["name"] == "workspace.not_attached"


def test_a_port_in_use_is_a_public_error_and_each_run_has_its_own_token(
    mission: Mission, till: Till, folder: Path
) -> None:
    run = till("--json", "ui", "--port", str(mission.port))
    assert run.code == 1 and run.doc["error"]["name"] == "ui.port_in_use"
    bad = till("--json", "ui", "--port", "70000")
    assert bad.code == 1 and bad.doc["error"]["name"] == "invalid_argument"
    second = start_ui(till, folder)
    try:
        assert second.token != mission.token and second.port != mission.port
        refused = second.request("GET", "/api/overview", headers={"X-Tillage-Token": mission.token})
        assert refused.status == 403
    finally:
        assert second.stop() == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_it_even_with_a_live_feed_open(
    till: Till, folder: Path, sig: signal.Signals
) -> None:
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    running = start_ui(till, folder)
    conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=60)
    conn.request("GET", "/api/events", headers={"X-Tillage-Token": running.token})
    response = conn.getresponse()
    response.readline()
    assert running.stop(sig) == 0
    conn.close()


def test_an_operation_is_undone_through_its_preview(
    mission: Mission, till: Till, folder: Path
) -> None:
    root = mission.universe("project")
    first = till.json("timeline")["snapshots"][-1]["id"]
    previewed = _rewind_preview(mission, root, first)
    assert _apply(mission, "workspace.rewind", root, {"id": first}, previewed).status == 200
    assert (folder / "app.py").read_text() == "print('v1')\n"
    ops = mission.result("/api/call", {"verb": "operation.log", "universe": root})["operations"]
    rewound = next(op for op in ops if op["command"] == "rewind")
    undo = mission.result(
        "/api/preview",
        {"verb": "operation.undo", "universe": root, "params": {"id": rewound["id"]}},
    )
    assert undo["confirm_operation"] == rewound["id"]
    body = {
        "verb": "operation.undo",
        "universe": root,
        "params": {"id": rewound["id"]},
        "preview_digest": undo["preview_digest"],
    }
    wrong = mission.post("/api/apply", {**body, "confirm_operation": ops[-1]["id"]})
    assert (wrong.status, wrong.error) == (409, "ui.confirm_mismatch")
    missing = mission.post("/api/apply", {**body, "confirm_snapshot": rewound["id"]})
    assert (missing.status, missing.error) == (400, "invalid_argument")
    assert (folder / "app.py").read_text() == "print('v1')\n"
    done = mission.post("/api/apply", {**body, "confirm_operation": rewound["id"]})
    assert done.status == 200, done.body
    assert (folder / "app.py").read_text() == "print('v2')\n"
