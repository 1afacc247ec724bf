"""Universes' ports: no two live forks of a family share one, the caller's $PORT is the base,
a port something listens on is skipped, and a fork keeps its port for its life; a batch tells
each command its place in it (TILLAGE_FORK_INDEX of TILLAGE_FORK_COUNT)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import Till
from tests.helpers import free_ports_above
from tillage.features.forks.errors import BadPortError, NoFreePortError
from tillage.features.forks.ports import DEFAULT_BASE, next_port, port_base
from tillage.platform.launch import Launch

ENV_LINE = "echo $TILLAGE_FORK $TILLAGE_FORK_INDEX $TILLAGE_FORK_COUNT $PORT"


@contextmanager
def _listening(port: int) -> Iterator[None]:
    """A server listening on every address at `port`, as a dev server would."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("0.0.0.0", port))
        server.listen()
        yield


def _seen(output: str) -> tuple[str, int, int, int]:
    name, index, count, port = output.split()
    return name, int(index), int(count), int(port)


def _ports(till: Till, cwd: Path | None = None) -> dict[str, int]:
    return {f["name"]: f["port"] for f in till.json("forks", "--no-disk", cwd=cwd)["forks"]}


def test_a_fork_and_its_own_fork_hold_different_ports(till: Till, project: Path) -> None:
    """Fork `a` and its fork `a1` both got 3001 (each counted among its own parent's forks)."""
    base = free_ports_above(4)
    env = {"PORT": str(base)}
    a = till.json("fork", "a", env=env)["fork"]
    a1 = till.json("run", "a1", "--", ENV_LINE, cwd=Path(a["path"]), env=env)["fork"]
    b = till.json("run", "b", "--", ENV_LINE, env=env)["fork"]
    assert (a["port"], a1["port"], b["port"]) == (base + 1, base + 2, base + 3)
    assert _seen(a1["output"]) == ("a1", 1, 1, base + 2)
    assert _seen(b["output"]) == ("b", 1, 1, base + 3)
    events = [json.loads(line) for line in till("--json", "events").stdout.splitlines()]
    ports = {e["detail"]["name"]: e["detail"]["port"] for e in events if e["kind"] == "forked"}
    assert ports["a"] == base + 1 and ports["b"] == base + 3


def test_a_second_exec_batch_counts_from_one_and_takes_ports_no_live_fork_holds(
    till: Till, project: Path
) -> None:
    """A second `exec -n 2` was told indexes 9 and 10 (every fork ever made of the parent)."""
    base = free_ports_above(6)
    env = {"PORT": str(base)}
    first = till.json("exec", "-n", "3", "--", ENV_LINE, env=env)["universes"]
    second = till.json("exec", "-n", "2", "--fork", "more", "--", ENV_LINE, env=env)["universes"]
    assert [_seen(u["output"]) for u in first] == [
        ("exec-1", 1, 3, base + 1),
        ("exec-2", 2, 3, base + 2),
        ("exec-3", 3, 3, base + 3),
    ]
    assert [_seen(u["output"]) for u in second] == [
        ("more-1", 1, 2, base + 4),
        ("more-2", 2, 2, base + 5),
    ]
    assert [(u["index"], u["count"], u["port"]) for u in second] == [
        (1, 2, base + 4),
        (2, 2, base + 5),
    ]
    # A removed fork's port is free again; the live ones keep theirs.
    till.json("fork-rm", "exec-2", "--yes")
    again = till.json("exec", "--fork", "late", "--", ENV_LINE, env=env)["universes"]
    assert _seen(again[0]["output"]) == ("late-1", 1, 1, base + 2)
    assert sorted(_ports(till).values()) == [base + i for i in (1, 2, 3, 4, 5)]


def test_without_port_in_the_callers_environment_the_base_is_3000(
    till: Till, project: Path
) -> None:
    expected = next_port(DEFAULT_BASE, set())
    doc = till.json("run", "plain", "--", ENV_LINE)["fork"]
    assert _seen(doc["output"]) == ("plain", 1, 1, expected)
    assert doc["port"] == expected


def test_a_port_in_use_on_the_loopback_is_skipped(till: Till, project: Path) -> None:
    base = free_ports_above(3)
    with _listening(base + 1):
        doc = till.json("exec", "-n", "2", "--", ENV_LINE, env={"PORT": str(base)})
    assert [u["port"] for u in doc["universes"]] == [base + 2, base + 3]


def test_a_fork_keeps_its_port_for_its_life(till: Till, project: Path) -> None:
    """Later runs get the fork's port whatever the caller's $PORT, even while the fork's own
    server listens on it; `forks` shows it."""
    base = free_ports_above(2)
    made = till.json("fork", "srv", env={"PORT": str(base)})["fork"]
    assert made["port"] == base + 1
    with _listening(base + 1):
        again = till.json("run", "srv", "--", ENV_LINE, env={"PORT": "4000"})["fork"]
    assert _seen(again["output"]) == ("srv", 1, 1, base + 1)
    assert again["port"] == base + 1
    assert _ports(till) == {"srv": base + 1}
    human = till("forks")
    assert f"PORT={base + 1}" in human.stdout


@pytest.mark.parametrize("bad", ["abc", "0", "65535", "99999", "-1", "30 00"])
def test_a_port_that_is_no_base_is_refused_and_nothing_is_made(
    till: Till, project: Path, bad: str
) -> None:
    for args in (("fork", "x"), ("run", "x", "--", "true"), ("exec", "-n", "2", "--", "true")):
        run = till("--json", *args, env={"PORT": bad})
        assert run.code == 1, run.stdout
        assert (run.error["code"], run.error["name"]) == (-32066, "fork.bad_port")
    assert till.json("forks")["forks"] == []
    assert not (project.parent / f"{project.name}.forks").exists()


def test_an_empty_port_is_no_port(till: Till, project: Path) -> None:
    doc = till.json("fork", "e", env={"PORT": ""})["fork"]
    assert doc["port"] == next_port(
        DEFAULT_BASE, {p for p in _ports(till).values() if p != doc["port"]}
    )


def test_a_fork_recorded_without_a_port_gets_one_when_a_command_runs_in_it(
    till: Till, project: Path
) -> None:
    """A fork an older version made has no port in its record: its first command gets one,
    recorded (`fork_port`) and kept."""
    from tillage.store.store import Store

    base = free_ports_above(3)
    till.json("fork", "new", env={"PORT": str(base)})  # holds base + 1
    old = till.json("fork", "old", env={"PORT": str(base)})["fork"]
    store = Store.open(till.home)
    try:
        row = store.fork_of(old["workspace"])
        assert row is not None
        # The fact as an older version wrote it: no port.
        fact = {"workspace": row.workspace, "parent": row.parent, "name": row.name}
        store.publish("fork", {**fact, "base": row.base, "root": row.root})
    finally:
        store.close()
    assert _ports(till)["old"] is None
    ran = till.json("run", "old", "--", ENV_LINE, env={"PORT": str(base)})["fork"]
    assert _seen(ran["output"]) == ("old", 1, 1, base + 2)
    assert _ports(till) == {"new": base + 1, "old": base + 2}
    store = Store.open(till.home)
    try:
        store.rebuild_index()  # the index is the log's: the port survives a rebuild
        row = store.fork_of(old["workspace"])
        assert row is not None and row.port == base + 2
    finally:
        store.close()


@pytest.mark.process
def test_forks_made_at_once_anywhere_in_a_family_never_share_a_port(
    till: Till, project: Path
) -> None:
    base = free_ports_above(8)
    a = Path(till.json("fork", "a", env={"PORT": str(base)})["fork"]["path"])
    env = {**till.env(), "PORT": str(base)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tillage", "--json", "fork", name],
            cwd=where,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, where in (("b", project), ("a1", a), ("a2", a), ("c", project))
    ]
    docs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    ports = [d["fork"]["port"] for d in docs]
    assert len(set(ports)) == 4
    assert all(base + 2 <= p <= base + 8 for p in ports)


def test_the_next_port_skips_held_and_busy_ones_and_says_when_none_is_left() -> None:
    assert next_port(3000, {3001, 3002}, lambda p: p != 3003) == 3004
    assert next_port(65533, set(), lambda p: True) == 65534
    with pytest.raises(NoFreePortError) as raised:
        next_port(65533, {65534}, lambda p: p != 65535)
    assert raised.value.code == -32164


def test_the_base_comes_from_the_callers_environment_only() -> None:
    assert port_base(Launch(env={})) == DEFAULT_BASE
    assert port_base(Launch(env={"PORT": " 8000 "})) == 8000
    with pytest.raises(BadPortError):
        port_base(Launch(env={"PORT": "٣٠٠٠"}))  # digits, but not ASCII ones
