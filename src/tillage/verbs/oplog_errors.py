"""Public errors of the operation log and `till undo` (module "oplog"; shared codes:
not_found, ambiguous, confirmation_required).

Apart from the undo machinery so that the verbs can name them in their contracts cheaply.
"""

from __future__ import annotations

from tillage.errors import AmbiguousError, NotFoundError, TillageError

__all__ = [
    "AlreadyUndoneError",
    "NotUndoableError",
    "NothingToUndoError",
    "OperationAmbiguousError",
    "OperationNotFoundError",
]


class OperationNotFoundError(NotFoundError):
    """No operation of this workspace has this ID (or prefix)."""

    name = "operation.not_found"
    module = "oplog"
    next_step = "list the operations with `till op log`"


class OperationAmbiguousError(AmbiguousError):
    """An operation ID prefix matches more than one operation."""

    name = "operation.ambiguous"
    module = "oplog"
    next_step = "give more characters of the operation's ID (`till op log --json` has them whole)"


class NotUndoableError(TillageError):
    """The operation cannot be undone (a gc or a purge deleted bytes for good; a seal is
    history, not a change); nothing was changed. `details.why` says why."""

    code = -32310
    name = "operation.not_undoable"
    module = "oplog"
    next_step = "list the operations that can be undone with `till op log`"


class AlreadyUndoneError(TillageError):
    """The operation was undone already; nothing was changed. `details.undone_by` is the
    operation that undid it: undoing that one does the first again."""

    code = -32311
    name = "operation.already_undone"
    module = "oplog"
    next_step = "undo the undo to do it again: `till undo UNDO_ID --yes`"


class NothingToUndoError(TillageError):
    """No operation of this workspace can be undone (none recorded, or every one is undone
    already or cannot be)."""

    code = -32312
    name = "operation.nothing_to_undo"
    module = "oplog"
    next_step = "list the operations with `till op log`"
