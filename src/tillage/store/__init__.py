"""The content-addressed store: packs, the advisory index, the publication log, verification."""
