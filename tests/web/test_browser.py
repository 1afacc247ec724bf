"""Mission Control in a real browser (Playwright driving Debian's Chromium): the story a person
lives when two agents work in two forks, and a screenshot of each view for a person to look at
(test-output/ui/index.html, or $TILLAGE_TEST_ARTIFACTS/ui)."""

from __future__ import annotations

import html
import os
import shutil
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tests.web.conftest import Mission, fork_folder, start_ui

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
ARTIFACTS = Path(
    os.environ.get("TILLAGE_TEST_ARTIFACTS") or Path(__file__).parents[2] / "test-output"
)
WAIT_MS = 15_000  # how long a step may take to show on a busy 2-core machine (not a target)

playwright = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')"
)
if not Path(CHROMIUM).exists():
    pytest.skip(
        "Debian's chromium is not installed (apt-get install chromium): the browser tests need it",
        allow_module_level=True,
    )


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A solid-colour PNG, written by hand (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\0" + bytes(rgb) * width
    raw = zlib.compress(row * height)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


class Gallery:
    """Screenshots of each view, with what a person should see in each."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def take(self, page: Any, name: str, caption: str) -> None:
        page.screenshot(path=str(self.folder / f"{name}.png"), full_page=True)
        (self.folder / f"{name}.txt").write_text(caption)
        self._index()

    def _index(self) -> None:
        """The index lists every view taken so far, by any test (tests run in workers)."""
        shots = sorted(self.folder.glob("*.txt"), key=lambda p: int(p.stem.split("-")[0]))
        items = "\n".join(
            f"<figure><figcaption><b>{html.escape(p.stem)}</b>: "
            f"{html.escape(p.read_text())}</figcaption>"
            f'<img src="{html.escape(p.stem)}.png" width="1100"></figure>'
            for p in shots
        )
        (self.folder / "index.html").write_text(
            "<!doctype html><meta charset=utf-8><title>Mission Control views</title>"
            "<h1>Mission Control: what each view shows</h1>" + items
        )


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield launched
        finally:
            launched.close()


# The page answers a stale preview (409) itself; Chromium still logs the status.
EXPECTED = ("the server responded with a status of 409",)


def _unexpected(msg: Any) -> bool:
    return bool(msg.type == "error" and not any(e in msg.text for e in EXPECTED))


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 860})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    opened.on("console", lambda msg: errors.append(msg.text) if _unexpected(msg) else None)
    opened.set_default_timeout(WAIT_MS)
    try:
        yield opened
        assert errors == [], errors  # no script error, no CSP violation, no failed load
    finally:
        context.close()


@pytest.fixture
def two_agents(till: Till, folder: Path) -> Iterator[Mission]:
    """A workspace with an image and code, and two forks whose agents both edit app.py."""
    (folder / "app.py").write_text("def greet():\n    return 'hello'\n")
    (folder / "logo.png").write_bytes(png(48, 32, (40, 90, 200)))
    (folder / "README.md").write_text("# shop\n")
    till.json("watch", "--no-daemon")
    (folder / "README.md").write_text("# shop\n\nA small shop.\n")
    till.json("snap", "-m", "describe the shop")
    for name in ("agent-a", "agent-b"):
        till.json("fork", name)
    a, b = fork_folder(folder, "agent-a"), fork_folder(folder, "agent-b")
    (a / "app.py").write_text("def greet():\n    return 'hello from a'\n")
    (a / "logo.png").write_bytes(png(48, 32, (220, 60, 40)))
    till.json("snap", "-m", "agent a: warmer greeting, red logo", cwd=a)
    (b / "app.py").write_text("def greet():\n    return 'hello from b'\n")
    till.json("snap", "-m", "agent b: its own greeting", cwd=b)
    running = start_ui(till, folder)
    try:
        yield running
    finally:
        assert running.stop() == 0, running.stderr


def _open(page: Any, mission: Mission) -> None:
    page.goto(mission.url)
    page.wait_for_selector("body[data-ready=true]")
    assert "#token" not in page.url  # the token leaves the address bar at once


def _universe(page: Any, name: str) -> Any:
    return page.locator(f'#universes li[data-name="{name}"]')


def test_the_story_of_two_agents_in_two_forks(
    page: Any, two_agents: Mission, till: Till, folder: Path
) -> None:
    expect = playwright.expect
    gallery = Gallery(ARTIFACTS / "ui")
    _open(page, two_agents)

    # The universes, and the collision: both forks (and nobody else) changed app.py.
    expect(page.locator("#universes li")).to_have_count(3)
    for name in ("agent-a", "agent-b"):
        assert "collides" in (_universe(page, name).get_attribute("class") or "")
    assert "collides" not in (_universe(page, "project").get_attribute("class") or "")
    collision = page.locator('#collisions li[data-path="app.py"]')
    expect(collision).to_contain_text("agent-a")
    expect(collision).to_contain_text("agent-b")
    gallery.take(
        page, "1-universes", "three universes; agent-a and agent-b highlighted, both changed app.py"
    )

    # agent-a's timeline and its newest snapshot: the text diff and the image before/after.
    _universe(page, "agent-a").click()
    expect(page.locator("#timeline-title")).to_have_text("Timeline · agent-a")
    newest = page.locator("#timeline li").first
    expect(newest).to_contain_text("agent a: warmer greeting")
    newest.click()
    changes = page.locator("[data-testid=changes] li")
    expect(changes).to_have_count(2)
    page.locator('[data-testid=changes] li[data-path="app.py"]').click()
    patch = page.locator("[data-testid=patch]")
    expect(patch.locator(".add")).to_have_text("+    return 'hello from a'")
    expect(patch.locator(".del")).to_have_text("-    return 'hello'")
    gallery.take(
        page, "2-snapshot-diff", "agent-a's newest snapshot: two changed paths, app.py's line diff"
    )
    page.locator('[data-testid=changes] li[data-path="logo.png"]').click()
    images = page.locator("[data-testid=image-preview] img")
    expect(images).to_have_count(2)
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=image-preview] img')]"
        ".every(i => i.complete && i.naturalWidth === 48)"
    )
    gallery.take(page, "3-image-preview", "logo.png before (blue) and after (red)")

    # A merge whose check fails lands nothing, and says why with the check's output.
    before = (folder / "app.py").read_text()
    page.get_by_test_id("merge").click()
    dialog = page.get_by_test_id("dialog")
    expect(dialog).to_contain_text("Merging fork agent-a into project")
    page.get_by_test_id("merge-check").fill("echo 'tests: 1 failed' >&2; exit 1")
    gallery.take(page, "4-merge-preview", "the merge's preview: what lands, and the check to run")
    page.locator("#dialog-apply").click()
    result = page.get_by_test_id("merge-result")
    expect(result).to_contain_text("Nothing landed: the check failed (exit 1)")
    expect(page.get_by_test_id("check-output")).to_contain_text("tests: 1 failed")
    assert (folder / "app.py").read_text() == before
    gallery.take(page, "5-merge-refused", "the check failed: nothing landed, its output shown")

    # Live: a seal in agent-b shows on the page without a reload.
    b = fork_folder(folder, "agent-b")
    (b / "notes.txt").write_text("sealed while the page looks\n")
    sealed = till.json("snap", "-m", "agent b: a live seal", cwd=b)["snapshot"]["id"]
    expect(_universe(page, "agent-b")).to_contain_text(f"head {sealed[:12]}")

    # A rewind, previewed then applied; it shows its undo, and the undo works.
    _universe(page, "project").click()
    oldest = page.locator("#timeline li").last
    expect(oldest).to_contain_text("initial")
    oldest.click()
    page.get_by_test_id("rewind").click()
    expect(page.get_by_test_id("preview-changes")).to_contain_text("README.md")
    assert (folder / "README.md").read_text() == "# shop\n\nA small shop.\n"  # preview only
    gallery.take(
        page, "6-rewind-preview", "rewinding project to its first snapshot: README.md changes"
    )
    page.locator("#dialog-apply").click()
    expect(page.get_by_test_id("undo")).to_contain_text("Rewound")
    assert (folder / "README.md").read_text() == "# shop\n"
    gallery.take(page, "7-rewound", "rewound; the state before is kept, with a button to undo")
    page.get_by_test_id("undo").get_by_role("button").click()
    page.locator("#dialog-apply").click()
    expect(page.get_by_test_id("undo")).to_have_count(2)  # the undo is a rewind too: undoable
    assert (folder / "README.md").read_text() == "# shop\n\nA small shop.\n"

    # A preview that went stale is shown fresh, and nothing changes until confirmed again.
    page.locator("#timeline li").last.click()
    page.get_by_test_id("rewind").click()
    expect(page.get_by_test_id("preview-changes")).to_be_visible()
    (folder / "late.txt").write_text("an agent wrote this after the preview\n")
    page.locator("#dialog-apply").click()
    expect(page.get_by_test_id("stale")).to_contain_text("changed since this preview")
    expect(page.get_by_test_id("preview-changes")).to_contain_text("late.txt")
    assert (folder / "late.txt").exists()
    gallery.take(
        page, "8-stale-preview", "the folder changed after the preview: the fresh one is shown"
    )
    page.locator("#dialog-cancel").click()
    assert (folder / "late.txt").exists()

    # Removing a fork asks for its name, seals its last state, then deletes it.
    _universe(page, "agent-b").click()
    page.get_by_test_id("fork-rm").click()
    apply = page.locator("#dialog-apply")
    expect(apply).to_be_disabled()
    page.get_by_test_id("confirm-name").fill("agent-")
    expect(apply).to_be_disabled()
    page.get_by_test_id("confirm-name").fill("agent-b")
    gallery.take(page, "9-fork-remove", "removing agent-b: its name typed to confirm")
    expect(apply).to_be_enabled()
    apply.click()
    expect(page.locator("#universes li")).to_have_count(2)
    assert not b.exists()
    assert till("cat", sealed, "notes.txt").stdout == "sealed while the page looks\n"

    # Pin and claims.
    page.locator("#timeline li").first.click()
    page.get_by_test_id("pin").click()
    expect(page.locator("#timeline li").first).to_contain_text("★")
    page.fill("#claim-pattern", "src/db/*")
    page.fill("#claim-owner", "agent-a")
    page.locator("#claim-form button").click()
    expect(page.locator("#claims li")).to_contain_text("src/db/*")
    assert [c["pattern"] for c in till.json("claims")["claims"]] == ["src/db/*"]
    gallery.take(page, "10-claims", "a pinned snapshot (★) and a claim held by agent-a")
    page.locator("#claims li button").click()
    expect(page.locator("#claims li")).to_contain_text("No claims held")

    # The operation log, and an undo from it: the pin above is undone.
    pinned = page.locator('#operations li:has-text("pin")').first
    expect(pinned).to_be_visible()
    gallery.take(page, "12-operations", "the universe's operations, newest first, each undoable")
    pinned.get_by_role("button").click()
    expect(page.get_by_test_id("dialog")).to_contain_text("Undo")
    page.locator("#dialog-apply").click()
    expect(page.locator("#timeline li").first).not_to_contain_text("★")
    assert not any(s["pinned"] for s in till.json("timeline")["snapshots"])


def test_the_timeline_scrolls_through_a_long_history(page: Any, till: Till, folder: Path) -> None:
    (folder / "counter.txt").write_text("0\n")
    till.json("watch", "--no-daemon")
    for n in range(1, 230):
        (folder / "counter.txt").write_text(f"{n}\n")
        till.json("snap", "-m", f"count {n}")
    running = start_ui(till, folder)
    try:
        _open(page, running)
        rows = page.locator("#timeline li")
        expect = playwright.expect
        expect(rows).to_have_count(100)
        for count in (200, 230):
            page.locator("#timeline li").last.scroll_into_view_if_needed()
            expect(rows).to_have_count(count)
        expect(rows.last).to_contain_text("initial")
        expect(page.get_by_test_id("timeline-end")).to_contain_text("230 snapshots")
        Gallery(ARTIFACTS / "ui").take(
            page, "11-long-timeline", "230 snapshots, scrolled to the oldest"
        )
    finally:
        assert running.stop() == 0


def test_without_its_token_the_page_says_how_to_get_in(page: Any, two_agents: Mission) -> None:
    page.goto(f"http://127.0.0.1:{two_agents.port}/")
    expect = playwright.expect
    expect(page.locator("#fatal")).to_contain_text("the link `till ui` printed")
    expect(page.locator("#universes li")).to_have_count(0)
