"""The page's calls: which verbs Mission Control offers, and how a call becomes a verb call.

Every call is a registry verb run through verbs/invoke.py, as the command line and MCP run
them: the same contracts, the same confirmation rules, the same public errors. What this
adds is the page's own safety for actions it previews: a rewind, a fork removal, a merge or an
undo is first previewed (`preview`), and applied (`apply`) only with the preview's digest and
the snapshot it showed (`confirm_snapshot`; an undo's operation: `confirm_operation`). Apply
previews again first and refuses a digest that no longer matches (ui.stale_preview, with the
fresh preview), so a person lands exactly what they saw; a merge's digest is its own
`preview_digest`, which the verb checks again under its lock (`expect`).

The page reaches only the universes of one family (the workspace `till ui` was started in, its
root and every fork below it), named by workspace ID, never by a folder the page chose.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tillage.errors import InvalidArgumentError, TillageError
from tillage.verbs.invoke import Settings
from tillage.verbs.ui import (
    ConfirmMismatchError,
    NotOfferedError,
    StalePreviewError,
    UnknownUniverseError,
)

# A file's bytes are sent to the page (an image to preview) up to this size.
CAT_LIMIT = 8 << 20
# The most events one call of workspace.events returns to the page.
EVENTS_LIMIT = 500

# The verbs a page may call directly: reads, and the small actions that change no file.
READS = (
    "workspace.status",
    "timeline.list",
    "timeline.show",
    "timeline.diff",
    "timeline.cat",
    "timeline.ls",
    "fork.list",
    "radar.scan",
    "claim.list",
    "workspace.events",
    "operation.log",
)
ACTIONS = ("timeline.pin", "timeline.unpin", "claim.take", "claim.release")


@dataclass(frozen=True)
class Confirmed:
    """How an action the page previews is previewed and applied: the request fields that make
    a preview or an application of it, and which snapshot of the preview a person confirms."""

    preview: Mapping[str, Any]
    apply: Mapping[str, Any]
    target: Callable[[Mapping[str, Any]], str | None]
    # What the person confirms, by name: the snapshot a rewind goes to, a fork's last state, a
    # merge's head; an undo's operation.
    field: str = "confirm_snapshot"
    # The preview document's own digest field (merge's `preview_digest`), checked again by
    # the verb itself when applied (`expect`), or None: the page digests the document.
    own_digest: str | None = None


def _snapshot_of(doc: Mapping[str, Any]) -> str | None:
    snapshot = doc.get("snapshot")
    return snapshot.get("id") if isinstance(snapshot, dict) else None


CONFIRMED: dict[str, Confirmed] = {
    "workspace.rewind": Confirmed(
        preview={"dry_run": True, "yes": False},
        apply={"dry_run": False, "yes": True},
        target=_snapshot_of,
    ),
    "fork.remove": Confirmed(
        preview={"dry_run": True, "yes": False},
        apply={"dry_run": False, "yes": True},
        target=_snapshot_of,
    ),
    "merge.apply": Confirmed(
        preview={"dry_run": True, "expect": None},
        apply={"dry_run": False},
        target=lambda doc: doc.get("theirs"),
        own_digest="preview_digest",
    ),
    "operation.undo": Confirmed(
        preview={"dry_run": True, "yes": False},
        apply={"dry_run": False, "yes": True},
        target=lambda doc: (doc.get("operation") or {}).get("id"),
        field="confirm_operation",
    ),
}


def confirm_field(verb: str) -> str:
    """The name an apply of `verb` carries its confirmed target under."""
    how = CONFIRMED.get(verb)
    return how.field if how is not None else "confirm_snapshot"


def offered() -> tuple[str, ...]:
    """Every verb the page may call, by contract name."""
    return (*READS, *ACTIONS, *CONFIRMED)


def digest(doc: Mapping[str, Any]) -> str:
    """The digest of a preview: what it would change, in a canonical encoding (`next`, the
    command line's wording, is left out)."""
    kept = {k: v for k, v in doc.items() if k != "next"}
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


class Door:
    """Runs the page's calls for one `till ui`: the family it serves and the settings every
    verb runs with (the folder replaced by the universe's)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._folders: dict[str, Path] = {}
        self._lock = threading.Lock()

    # -- calls -------------------------------------------------------------------------------

    def call(self, verb: str, universe: str, params: Mapping[str, Any]) -> Any:
        """Runs a read or a small action (READS, ACTIONS) in a universe."""
        if verb not in READS and verb not in ACTIONS:
            raise _not_offered(verb)
        values = dict(params)
        if verb == "workspace.events":
            values["follow"] = False  # one call, one answer: the live feed is /api/events
            values["all_workspaces"] = False
            limit = values.get("limit")
            if not isinstance(limit, int) or isinstance(limit, bool) or limit > EVENTS_LIMIT:
                values["limit"] = EVENTS_LIMIT
        if verb == "timeline.cat":
            return self._cat(universe, values)
        return self.run(verb, self.folder(universe), values)

    def preview(self, verb: str, universe: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Previews an action the page confirms: its dry run, its digest and the snapshot a
        person confirms when applying it."""
        how = CONFIRMED.get(verb)
        if how is None:
            raise _not_offered(verb)
        doc = self.run(verb, self.folder(universe), {**params, **how.preview})
        return {
            "preview": doc,
            "preview_digest": self._digest_of(how, doc),
            how.field: how.target(doc),
        }

    def apply(
        self,
        verb: str,
        universe: str,
        params: Mapping[str, Any],
        *,
        preview_digest: Any,
        confirmed: Any,
    ) -> Any:
        """Applies a previewed action, only while a fresh preview still has the digest and
        the snapshot the person confirmed."""
        how = CONFIRMED.get(verb)
        if how is None:
            raise _not_offered(verb)
        if not isinstance(preview_digest, str) or not preview_digest:
            raise InvalidArgumentError("an apply needs the preview's preview_digest")
        if not isinstance(confirmed, str) or not confirmed:
            raise InvalidArgumentError(f"an apply needs {how.field}, what the preview showed")
        folder = self.folder(universe)
        fresh = self.preview(verb, universe, params)
        if fresh["preview_digest"] != preview_digest:
            raise StalePreviewError(
                "what this would change is no longer what was previewed; nothing was changed",
                details={
                    "preview": fresh["preview"],
                    "preview_digest": fresh["preview_digest"],
                    how.field: fresh[how.field],
                },
            )
        if fresh[how.field] != confirmed:
            raise ConfirmMismatchError(
                f"the preview is of {fresh[how.field]}, not {confirmed[:64]!r}; "
                "nothing was changed",
                details={how.field: fresh[how.field]},
            )
        values = {**params, **how.apply}
        if verb in ("workspace.rewind", "operation.undo"):
            values["id"] = confirmed  # the very one shown, not a name that moved since
        if how.own_digest is not None:
            values["expect"] = preview_digest
        return self.run(verb, folder, values)

    def run(self, name: str, folder: Path, values: Mapping[str, Any]) -> Any:
        """Runs one verb by contract name in `folder`, answered as `--json` prints it."""
        from tillage.verbs.wire import to_wire

        return self._invoked(name, folder, values, to_wire)

    def _cat(self, universe: str, values: dict[str, Any]) -> Any:
        """A file's bytes for the page (an image preview): refused past CAT_LIMIT, so a page
        never pulls a 1 GiB file through the browser."""

        def answer(result: Any) -> dict[str, Any]:
            content = None if result.size > CAT_LIMIT else str(result.content_base64)
            return {"path": result.path, "size": result.size, "content_base64": content}

        return self._invoked("timeline.cat", self.folder(universe), values, answer)

    def _invoked(
        self, name: str, folder: Path, values: Mapping[str, Any], answer: Callable[[Any], Any]
    ) -> Any:
        """Runs one verb in `folder` and makes its answer with `answer` while the stores the
        call opened are still open (a file's content is read from them), then closes them."""
        from tillage.store.store import close_stores_opened_by
        from tillage.verbs.contract import decode_request
        from tillage.verbs.invoke import invoke
        from tillage.verbs.registry import by_name
        from tillage.verbs.wire_values import checked_values

        verb = by_name(name)
        request = decode_request(verb.contract, checked_values(verb.contract, values))
        settings = dataclasses.replace(self.settings, folder=folder)
        try:
            return answer(invoke(verb, settings, request))
        finally:
            close_stores_opened_by(threading.get_ident())  # the answer is whole

    @staticmethod
    def _digest_of(how: Confirmed, doc: Mapping[str, Any]) -> str:
        if how.own_digest is not None:
            own = doc.get(how.own_digest)
            if isinstance(own, str) and own:
                return own
        return digest(doc)

    def latest_cursor(self) -> int:
        """The cursor of the store's newest event: a live feed started from it, by a page that
        read its overview just before, misses nothing published in between."""
        from tillage.store.store import Store

        with Store.open(self.settings.home) as store:
            return store.last_seq()

    # -- the family --------------------------------------------------------------------------

    def universes(self) -> list[dict[str, Any]]:
        """Every universe of the family, the root first, each with its status and (for a fork)
        its line in its parent's `forks`: found through the verbs, as a person would find them
        (status names a fork's parent; forks lists a universe's forks)."""
        root, root_status = self._root()
        found: list[dict[str, Any]] = []
        queue: list[tuple[Path, str | None, dict[str, Any] | None, int]] = [(root, None, None, 0)]
        while queue:
            folder, parent, fork, depth = queue.pop(0)
            entry: dict[str, Any] = {"folder": str(folder), "parent": parent, "depth": depth}
            entry["fork"] = fork
            entry["name"] = fork["name"] if fork else folder.name
            try:
                status = root_status if depth == 0 else self.run("workspace.status", folder, {})
                entry["id"] = status.get("id")
                entry["status"] = status
            except TillageError as err:
                entry["id"] = fork.get("workspace") if fork else None
                entry["status"] = None
                entry["error"] = _error_doc(err)
            found.append(entry)
            if entry["id"] is None:
                continue
            with self._lock:
                self._folders[entry["id"]] = folder
            if entry.get("status") is None:
                continue
            try:
                forks = self.run("fork.list", folder, {})["forks"]
            except TillageError as err:
                entry["forks_error"] = _error_doc(err)
                continue
            for line in forks:
                queue.append((Path(line["path"]), entry["id"], line, depth + 1))
        return found

    def folder(self, universe: str) -> Path:
        """The folder of a universe of this family (the family is looked up again when the
        page names one it has not been told of yet: a fork made since)."""
        if not isinstance(universe, str) or not universe:
            raise InvalidArgumentError("a call names its universe (a workspace ID)")
        with self._lock:
            known = self._folders.get(universe)
        if known is None:
            self.universes()
            with self._lock:
                known = self._folders.get(universe)
        if known is None:
            raise UnknownUniverseError(
                f"no universe {universe[:64]!r} in this family", details={"universe": universe}
            )
        return known

    def root_folder(self) -> Path:
        """The folder at the root of the family (the workspace every fork descends from)."""
        return self._root()[0]

    def _root(self) -> tuple[Path, dict[str, Any]]:
        """The family's root folder and its status, found up the forks' parents."""
        folder = self.settings.folder
        seen = {str(folder)}
        while True:
            status = self.run("workspace.status", folder, {})
            fork = status.get("fork")
            parent = fork.get("parent") if isinstance(fork, dict) else None
            if not parent or parent in seen:
                return Path(status.get("workspace") or folder), status
            seen.add(parent)
            folder = Path(parent)


def _not_offered(verb: str) -> NotOfferedError:
    return NotOfferedError(
        f"the page offers no call {verb[:80]!r}", details={"offered": list(offered())}
    )


def _error_doc(err: TillageError) -> dict[str, Any]:
    return err.envelope()
