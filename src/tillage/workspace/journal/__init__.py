"""The engine's journal: how a folder is changed so that a crash at any moment is finished by
the next command (INV-7). A landing writes its intent in the store (intents.py), applies the
planned actions (applier.py), makes them durable, completes (a merge seals and tells the log)
and only then removes the intent; `landing.finish` rolls a recorded landing forward, whatever
its op. The applier is the journal's own: outside it, a change lands through `landing.land`
(or, for a folder nothing must survive a crash in, workspace.materialize)."""

__all__ = ["intents", "landing"]
