"""The S3 remote against moto on 127.0.0.1: small objects, one large object, batched existence.

    python bench/s3_remote.py [--plain] [--repeat 3]

Starts moto the way the tests do (tests/remote/s3_server.py: writes serialized) or, with
`--plain`, moto's own `moto_server`, then times through S3Remote: 1,000 puts and gets of 1 KiB
(one thread, and 16 threads), one 64 MiB object (multipart, as put() sends it, and in one
PUT), and exists() of 1,000 names half present, by listing (what exists() does when the key
range is small), by parallel HEADs only, and on a remote of 10,000 objects. Every read is
checked byte-equal. Prints one JSON document of best-of-`--repeat` seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.remote import s3_server

from tillage.platform.names import random_hex
from tillage.remote import s3
from tillage.remote.s3 import S3Remote


def best(repeat: int, work: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return round(min(times), 3)


def check(answer: object, expected: object) -> None:
    if answer != expected:
        raise SystemExit("a wrong answer from the remote")


def name(i: int) -> str:
    digest = f"{i * 2654435761 % (1 << 64):016x}" * 4
    return f"objects/{digest[:2]}/{digest}"


def fresh(server: s3_server.MotoServer) -> S3Remote:
    bucket = f"bench-{random_hex(6)}"
    server.create_bucket(bucket)
    return S3Remote.from_url(f"s3://{bucket}/sync", server.env())


def measure(server: s3_server.MotoServer, repeat: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    remote = fresh(server)
    small = {name(i): os.urandom(1024) for i in range(1000)}

    def put_all() -> None:
        for key, data in small.items():
            remote.put(key, data)

    def get_all() -> None:
        for key, data in small.items():
            check(remote.get(key), data)

    with ThreadPoolExecutor(16) as pool:

        def put_threads() -> None:
            list(pool.map(lambda kv: remote.put(*kv), small.items()))

        def get_threads() -> None:
            check(list(pool.map(remote.get, small)), list(small.values()))

        out["put_1000x1KiB_1thread"] = best(repeat, put_all)
        out["get_1000x1KiB_1thread"] = best(repeat, get_all)
        out["put_1000x1KiB_16threads"] = best(repeat, put_threads)
        out["get_1000x1KiB_16threads"] = best(repeat, get_threads)

    big = os.urandom(64 << 20)
    out["put_64MiB_multipart_8MiB_parts"] = best(repeat, lambda: remote.put("objects/ff/big", big))
    out["get_64MiB"] = best(repeat, lambda: check(remote.get("objects/ff/big"), big))
    threshold = s3.MULTIPART_ABOVE
    s3.MULTIPART_ABOVE = 1 << 40
    try:
        out["put_64MiB_single_put"] = best(repeat, lambda: remote.put("objects/ff/big", big))
    finally:
        s3.MULTIPART_ABOVE = threshold
    remote.delete("objects/ff/big")

    # exists(): 1,000 names, 500 of them among the 1,000 objects above.
    asked = [name(i) for i in range(500, 1500)]
    present = {name(i) for i in range(500, 1000)}
    out["exists_1000_by_listing"] = best(repeat, lambda: check(remote.exists(asked), present))
    by_head = remote._exists_by_head
    out["exists_1000_by_heads_x16"] = best(repeat, lambda: check(by_head(asked), present))

    big_remote = fresh(server)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: big_remote.put(name(i), b"x"), range(10_000)))
    asked = [name(i) for i in range(0, 20_000, 20)]  # spread over the whole key range
    present = {name(i) for i in range(0, 10_000, 20)}
    out["exists_1000_of_10000_objects_by_listing"] = best(
        repeat, lambda: check(big_remote.exists(asked), present)
    )
    by_head = big_remote._exists_by_head
    out["exists_1000_of_10000_objects_by_heads_x16"] = best(
        repeat, lambda: check(by_head(asked), present)
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--plain", action="store_true", help="moto's own moto_server")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if args.plain:
        s3_server.SERIAL_MOTO = "import sys; from moto import server; server.main(sys.argv[1:])"
    with tempfile.TemporaryDirectory() as folder:
        server = s3_server.start_moto(Path(folder))
        try:
            results = measure(server, args.repeat)
        finally:
            server.stop()
    server_kind = "moto_server" if args.plain else "moto, writes serialized"
    print(json.dumps({"server": server_kind, "seconds": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
