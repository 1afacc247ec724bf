"""The headline, end to end: an agent wrecks a workspace and tillage brings it back.

Builds a small project (a git repo, an ignored `.env`, a SQLite database in WAL mode with rows
only in its `-wal` file, a build folder), attaches it to the default store with its background
watcher, shows the watcher sealing an edit on its own and an agent-turn hook sealing a named
restore point, lets an "agent" wreck it (`git clean -fdx`, a corrupted database, rewritten
source), rewinds it byte-exact, then undoes the rewind; then three agents work in forks of
it, the radar sees two of them touch one file, two merges land line by line behind a check
and the third (a syntax error) lands nothing; then an agent's harness works through `till mcp`
(tools listed, a restore previewed and confirmed) inside a session whose changelog is printed;
an estimate comes first and a gc dry run last (the demo never gc's the default store: that
would thin the user's own history). Every step is a real `till --json` call or MCP call.
Exits non-zero if anything does not come back exactly.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GIT_ENV = {
    "GIT_AUTHOR_NAME": "demo",
    "GIT_AUTHOR_EMAIL": "demo@example.com",
    "GIT_COMMITTER_NAME": "demo",
    "GIT_COMMITTER_EMAIL": "demo@example.com",
}


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tillage", "--json", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )


def till(folder: Path, *args: str) -> Any:
    proc = _run(folder, *args)
    if proc.returncode != 0:
        raise SystemExit(
            f"till {' '.join(args)} failed ({proc.returncode}): {proc.stdout}{proc.stderr}"
        )
    return json.loads(proc.stdout)


def till_lines(folder: Path, *args: str) -> list[Any]:
    """A streaming command's JSON lines."""
    proc = _run(folder, *args)
    if proc.returncode != 0:
        raise SystemExit(f"till {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def till_status_watching(folder: Path) -> bool:
    """Whether a watcher still runs for the folder (false once it is forgotten)."""
    doc = json.loads(_run(folder, "status").stdout)
    return bool(doc.get("watching"))


def wait_for_watch_seal(folder: Path, after: str, timeout: float = 20.0) -> Any:
    """The watcher's own snapshot of a change, once it has sealed one after `after`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        newest = till(folder, "timeline", "-n", "1")["snapshots"][0]
        if newest["id"] != after and newest["trigger"] == "watch":
            return newest
        time.sleep(0.1)
    raise SystemExit("the watcher did not seal the edit within 20 s")


def sh(folder: Path, *cmd: str) -> None:
    subprocess.run(cmd, cwd=folder, env={**os.environ, **GIT_ENV}, check=True, capture_output=True)


def fingerprint(root: Path) -> dict[str, str]:
    """Path -> sha256 of every file (and link target) below root.

    Leaves out tillage's pointer and the database: it comes back as a consistent image (every
    committed row, its -wal folded in), which is checked by its rows instead of its bytes.
    """
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root and ".tillage" in dirnames:
            dirnames.remove(".tillage")
        for name in filenames:
            if name.startswith("dev.db"):
                continue
            p = Path(dirpath, name)
            data = os.readlink(p).encode() if p.is_symlink() else p.read_bytes()
            out[str(p.relative_to(root))] = hashlib.sha256(data).hexdigest()[:16]
    return out


def rows(db: Path) -> str:
    try:
        conn = sqlite3.connect(db)
        check = conn.execute("PRAGMA integrity_check").fetchone()[0]
        n = conn.execute("SELECT count(*) FROM orders").fetchone()[0]
        conn.close()
        return f"integrity {check}, {n} orders"
    except sqlite3.DatabaseError as exc:
        return f"unreadable ({exc})"


def build_project(root: Path) -> sqlite3.Connection:
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def total(orders):\n    return sum(orders)\n")
    (root / ".gitignore").write_text(".env\nbuild/\n*.db\n*.db-*\n")
    (root / ".env").write_text("STRIPE_KEY=sk_live_do_not_lose_me\n")
    (root / "build").mkdir()
    (root / "build" / "bundle.js").write_text("console.log('built');\n" * 200)
    sh(root, "git", "init", "-q")
    sh(root, "git", "add", "-A")
    sh(root, "git", "commit", "-qm", "initial")
    db = sqlite3.connect(root / "dev.db")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA wal_autocheckpoint=0")  # committed rows stay in dev.db-wal
    db.execute("CREATE TABLE orders(id INTEGER PRIMARY KEY, amount INTEGER)")
    db.executemany("INSERT INTO orders(amount) VALUES (?)", [(i,) for i in range(1000)])
    db.commit()
    return db


COMPILES = "python3 -m compileall -q src"


def universes(root: Path) -> bool:
    """Three agents, each in its own full copy of the workspace; two land (line by line,
    gated on a check), the broken one lands nothing. Returns whether the workspace ends as
    expected."""
    print("5. Three agents work on the wrecked project, each in its own universe:")
    a = till(root, "fork", "agent-a")["fork"]
    print(f"   till fork agent-a -> {a['path']} ({a['files']} files, driver {a['driver']})")
    app = Path(a["path"]) / "src" / "app.py"
    app.write_text('"""Order arithmetic."""\n\n\n' + app.read_text())
    till(Path(a["path"]), "snap", "-m", "agent-a documents the module")
    fix = "sed -i 's/return 0.*/return sum(orders)/' src/app.py"
    b = till(root, "run", "agent-b", "--", fix)["fork"]
    print(f'   till run agent-b -- "{fix}" -> exit {b["exit_code"]}, sealed {b["head"][:12]}')
    c = till(root, "run", "agent-c", "--", "echo 'def broken(:' > src/util.py")["fork"]
    print(f"   till run agent-c -- (adds src/util.py, a syntax error) -> exit {c['exit_code']}")
    radar = till(root, "radar")["conflicts"]
    print("   till radar -> " + "; ".join(f"{x['path']} in {', '.join(x['forks'])}" for x in radar))
    landed = [till(root, "merge", name, "--check", COMPILES) for name in ("agent-a", "agent-b")]
    for doc in landed:
        print(
            f"   till merge {doc['fork']} --check '{COMPILES}' -> landed {doc['landed']}, "
            f"{doc['changes']} change(s)"
        )
    refused = _run(root, "merge", "agent-c", "--check", COMPILES)
    verdict = json.loads(refused.stdout)
    print(
        f"   till merge agent-c --check ... -> exit {refused.returncode}, landed "
        f"{verdict['landed']}, check failed {verdict['check_failed']}"
    )
    text = (root / "src" / "app.py").read_text()
    print("   src/app.py now: " + " | ".join(line for line in text.splitlines() if line))
    for name in ("agent-a", "agent-b", "agent-c"):
        till(root, "fork-rm", name, "--yes")
    print("   till fork-rm NAME --yes for each -> their last states stay restorable by ID")
    return (
        all(doc["landed"] for doc in landed)
        and refused.returncode == 3
        and verdict["check_failed"]
        and not (root / "src" / "util.py").exists()
        and "return sum(orders)" in text
        and "Order arithmetic" in text
    )


def agent_over_mcp(root: Path, secret: bytes) -> bool:
    """An agent's harness launches `till mcp`; the agent, in a session whose changelog is kept
    beside the timeline, finds the restore point its last turn left and brings back the `.env`
    that `git clean` wiped (the wreck was put back in step 4). Returns whether it came back."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    print("6. An agent's harness launches `till mcp`; the agent works through its tools:")
    session = "demo-session-1"
    till(root, "session", "start", session, "-m", "the agent starts on the orders task")
    (root / "NOTES.md").write_text("the .env is gone; restoring it from tillage\n")
    till(root, "session", "record", session, "-m", "the agent writes notes")

    async def work() -> bool:
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "tillage", "--repo", str(root), "mcp"],
            env=dict(os.environ),
        )
        async with Client(server) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            print(f"   tools/list -> {len(tools)} tools: {', '.join(tools[:4])}, ...")
            started = time.perf_counter()
            listed = await client.call_tool("workspace_snapshots", {"trigger": "hook"})
            took = (time.perf_counter() - started) * 1000
            point = listed.structured_content["snapshots"][0]  # type: ignore[index]
            print(
                f"   workspace_snapshots (trigger hook) -> {point['id'][:12]}... "
                f"{point['label']!r} in {took:.1f} ms"
            )
            args = {"snapshot": point["id"], "paths": [".env"]}
            preview = await client.call_tool("workspace_restore", args)
            first = preview.content[0].text.splitlines()[0]  # type: ignore[union-attr]
            print(f"   workspace_restore .env -> {first[:90]}...")
            applied = await client.call_tool("workspace_restore", {**args, "confirm": True})
            last = applied.content[0].text.splitlines()[-1]  # type: ignore[union-attr]
            print(f"   ... with confirm: true -> {last[:90]}...")
            return not applied.is_error

    restored = anyio.run(work) and (root / ".env").read_bytes() == secret
    till(root, "session", "end", session, "-m", "the agent brought .env back")
    log = till(root, "session", "changelog", session)
    print(f"   till session changelog {session} -> {len(log['commits'])} commits:")
    for commit in log["commits"]:
        files = ", ".join(f"{c['kind']} {c['path']}" for c in commit["changes"]) or "baseline"
        print(f"     {commit['short']} {commit['description']!r}: {files}")
    print(f"   .env is back byte-exact, NOTES.md kept: {restored and (root / 'NOTES.md').exists()}")
    return restored and (root / "NOTES.md").exists()


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="tillage-demo-") as tmp:
        root = Path(tmp) / "shop"
        root.mkdir()
        db = build_project(root)
        print(f"1. A project at {root}: git repo, ignored .env, build/, dev.db (WAL, open writer)")
        guess = till(root, "estimate")
        classes = ", ".join(
            f"{name} {size / 1024:.1f} KiB" for name, size in guess["classes"].items() if size
        )
        print(
            f"   till estimate -> {guess['files']} files ({classes}); a first seal would take "
            f"about {guess['seconds']:.1f} s; nothing written yet"
        )
        started = till(root, "watch")
        head = started["head"]
        print(
            f"   till watch -> sealed {head['short']} ({head['files']} files, grade "
            f"{head['grade']}); background watcher running: {started['watching']}"
        )
        (root / "src" / "app.py").write_text(
            "def total(orders):\n    return sum(orders)\n\n\ndef count(orders):\n"
            "    return len(orders)\n"
        )
        written = time.monotonic()
        sealed = wait_for_watch_seal(root, head["id"])
        print(
            f"   an edit to src/app.py -> the watcher sealed {sealed['short']} on its own "
            f"{time.monotonic() - written:.1f} s later"
        )
        turn = till(root, "hook", "turn-end", "--agent", "demo-agent", "--turn", "1")
        head = turn["snapshot"]
        print(f"   till hook turn-end --agent demo-agent --turn 1 -> {head['label']!r}")
        before = fingerprint(root)
        secret = (root / ".env").read_bytes()

        db.close()
        sh(root, "git", "clean", "-fdxq")
        (root / "src" / "app.py").write_text("def total(orders):\n    return 0  # 'simplified'\n")
        (root / "dev.db").write_bytes(b"migration went wrong")
        print("2. The agent runs `git clean -fdx`, rewrites src/app.py, corrupts dev.db:")
        print(f"   .env exists: {(root / '.env').exists()}; dev.db: {rows(root / 'dev.db')}")

        plan = till(root, "rewind", head["id"], "--dry-run")
        print(f"3. till rewind {head['short']} --dry-run -> {len(plan['changes'])} changes")
        done = till(root, "rewind", head["id"], "--yes")
        back = fingerprint(root)
        print(f"   till rewind {head['short']} --yes -> applied; undo = {done['undo'][:12]}")
        print(f"   .env: {(root / '.env').read_text().strip()}; dev.db: {rows(root / 'dev.db')}")
        exact = back == before and rows(root / "dev.db") == "integrity ok, 1000 orders"
        print(f"   every file byte-exact, every committed row back: {exact}")

        till(root, "rewind", done["undo"], "--yes")
        undone = (root / "dev.db").read_bytes() == b"migration went wrong"
        print(f"4. till rewind {done['undo'][:12]} --yes -> the wrecked state is back: {undone}")
        merged = universes(root)
        served = agent_over_mcp(root, secret)
        kinds = [e["kind"] for e in till_lines(root, "events")]
        print(f"7. till events -> {len(kinds)} events: " + ", ".join(sorted(set(kinds))))
        till(root, "forget", "--purge", "--yes")
        watching = till_status_watching(root)
        print(
            "8. till forget --purge --yes -> the watcher stopped, the demo workspace is "
            f"detached from the store (watching: {watching})"
        )
        reclaim = till(root, "gc", "--dry-run")
        print(
            f"9. till gc --dry-run -> a gc of this store would give back "
            f"{reclaim['bytes_reclaimed'] / 1024:.0f} KiB (the purged demo's bytes among them); "
            "`till gc --yes` does it. Nothing was changed."
        )
        if not (exact and undone and merged and served):
            print("FAILED: the workspace did not come back exactly", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
