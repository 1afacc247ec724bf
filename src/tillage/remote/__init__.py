"""Remotes for sync: opaque-bytes transports (memory, a directory, SSH, S3-compatible stores)
behind one seam (`base.Remote`). They never see a key or a plaintext name: the sync engine
encrypts below them."""
