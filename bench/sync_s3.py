"""The sync bench's S3: moto on 127.0.0.1 with the counting proxy (bench/s3_proxy.py) before it.

moto is started as the tests start it (tests/remote/s3_server.py: a free port of 127.0.0.1,
our child, stopped by its PID), but as moto's own `moto_server`, without the tests'
serialization of writes: the tests need conditional writes decided atomically for their races,
the bench has one writer at a time, and a real S3 takes writes in parallel. Both tools' S3
lanes go through the proxy (requests counted per step); `direct` settings skip it, for the
proxy's overhead measured once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from measure import ToolMissingError

REPO = Path(__file__).resolve().parent.parent
PREFIX = "r"  # every lane's key prefix in its bucket (the proxy names kinds below it)
PLAIN_MOTO = "import sys; from moto import server; server.main(sys.argv[1:])"
PROXY_START_S = 10.0


@dataclass
class S3Site:
    """moto and the proxy, both our children, and the settings that reach them."""

    moto: Any  # tests.remote.s3_server.MotoServer
    proxy: subprocess.Popen[str]
    proxy_port: int

    def endpoint(self, direct: bool = False) -> str:
        return self.moto.endpoint if direct else f"http://127.0.0.1:{self.proxy_port}"

    def create_bucket(self, bucket: str) -> None:
        """A fresh bucket, made directly on moto (not counted)."""
        self.moto.create_bucket(bucket)

    def tillage_env(self, direct: bool = False) -> dict[str, str]:
        """What tillage's s3:// remote reads: credentials, TILLAGE_S3_ENDPOINT, plain http."""
        env: dict[str, str] = self.moto.env()
        env["TILLAGE_S3_ENDPOINT"] = self.endpoint(direct)
        return env

    def tillage_url(self, bucket: str) -> str:
        return f"s3://{bucket}/{PREFIX}"

    def restic_env(self) -> dict[str, str]:
        """What restic's s3 backend reads: the same test credentials and region."""
        env = self.moto.env()
        return {
            "AWS_ACCESS_KEY_ID": env["AWS_ACCESS_KEY_ID"],
            "AWS_SECRET_ACCESS_KEY": env["AWS_SECRET_ACCESS_KEY"],
            "AWS_DEFAULT_REGION": env["AWS_REGION"],
        }

    def restic_repo(self, bucket: str, direct: bool = False) -> str:
        return f"s3:{self.endpoint(direct)}/{bucket}/{PREFIX}"

    def counts(self, reset: bool = True) -> dict[str, Any]:
        """The proxy's counts since the last reset (and a reset)."""
        url = f"http://127.0.0.1:{self.proxy_port}/_bench/counts" + ("?reset=1" if reset else "")
        with urllib.request.urlopen(url, timeout=30) as reply:
            doc: dict[str, Any] = json.loads(reply.read())
            return doc

    def bucket_bytes(self, bucket: str) -> tuple[int, int]:
        """(bytes, objects) stored in `bucket`, listed directly on moto."""
        import obstore

        store = self.moto.raw_store(bucket)
        metas = [meta for page in obstore.list(store, None) for meta in page]
        return sum(int(m["size"]) for m in metas), len(metas)

    def stop(self) -> None:
        if self.proxy.poll() is None:
            self.proxy.terminate()
            try:
                self.proxy.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proxy.kill()
                self.proxy.wait()
        self.moto.stop()


def start_s3(folder: Path) -> S3Site:
    """Starts moto (plain moto_server, see the docstring) and the proxy before it."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    try:
        from tests.remote import s3_server
    except ImportError as exc:
        raise ToolMissingError(f"moto or the tests' s3_server cannot be imported: {exc}") from exc
    folder.mkdir(parents=True, exist_ok=True)
    s3_server.SERIAL_MOTO = PLAIN_MOTO
    try:
        moto = s3_server.start_moto(folder)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # pytest.fail's outcome, when moto did not start
        raise ToolMissingError(f"moto did not start: {str(exc)[-2000:]}") from exc
    proxy = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("s3_proxy.py")), str(moto.port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=open(folder / "proxy.log", "wb"),  # noqa: SIM115 - the child keeps it
        text=True,
    )
    assert proxy.stdout is not None
    line = proxy.stdout.readline().strip()
    if not line.isdigit():
        proxy.kill()
        proxy.wait()
        moto.stop()
        raise ToolMissingError(f"the S3 proxy did not start: {line!r}")
    return S3Site(moto, proxy, int(line))
