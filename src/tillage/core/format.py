"""Constants that define the storage format: change one and the format version changes.

The chunker parameters define dedup identity (the same bytes cut the same way), so they are part
of the format, not tuning knobs (docs/design/format.md).
"""

from __future__ import annotations

FORMAT_VERSION = 1

# Content-defined chunking (FastCDC 2020 via pyfastcdc). pyfastcdc's real mean is avg + min.
CDC_MIN = 256 * 1024
CDC_AVG = 512 * 1024
CDC_MAX = 4 * 1024 * 1024
# Files up to this size are stored whole, as one chunk.
WHOLE_FILE_MAX = 512 * 1024

# A hole of a sparse file longer than this is split into holes of at most this length (a chunk
# reference's length is a u32). Part of the format: it decides a sparse file's blob ID.
HOLE_MAX = 1 << 31

# Compression settings are tuning, not identity (any zstd frame reads back). Measured on the
# standard workload: level 2 squeezes big chunks (logs, databases) as well as 3 for less CPU.
ZSTD_LEVEL = 2
# Objects up to this size (most of a source tree) are compressed harder; it costs little.
SMALL_OBJECT_MAX = 64 * 1024
# How: zstd's greedy strategy searching deep (64 search attempts) in a 64 KiB window, rather
# than a level. On the standard workload's 5,032 files up to 64 KiB (63.7 MB) it made 16.50 MB
# in 0.49 s of CPU, where level 6 made 16.65 MB in 0.62 s and level 5 16.91 MB in 0.43 s.
SMALL_ZSTD_PARAMS = {
    "window_log": 16,
    "hash_log": 16,
    "chain_log": 16,
    "search_log": 6,
    "min_match": 5,
}
# Objects up to this size are compressed at this level instead: zstd's own parameters for
# sources this small (tuned by source size) find more than the greedy setting. On the standard
# workload's 2,348 files up to 4 KiB (3.3 MB) level 6 made 1.597 MB where the greedy setting
# made 1.614 MB, in the same CPU time; a tree of a million tiny files is mostly these.
TINY_OBJECT_MAX = 4 * 1024
ZSTD_LEVEL_TINY = 6
# A pack is closed and a new one started past this size.
PACK_TARGET_BYTES = 256 * 1024 * 1024
