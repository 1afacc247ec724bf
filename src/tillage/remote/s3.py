"""S3Remote: a remote in an S3-compatible bucket (AWS S3, MinIO, R2, Ceph), through obstore.

`s3://bucket[/prefix]`: each name is the object `prefix/name`. Settings come from the
environment mapping the host passes in, never from this process's own: credentials from
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (handed to obstore through a
callback, so they appear in no config or repr), the region from AWS_REGION or
AWS_DEFAULT_REGION, the endpoint from TILLAGE_S3_ENDPOINT, AWS_ENDPOINT_URL_S3 or
AWS_ENDPOINT_URL (path-style requests; AWS itself otherwise), and plain http only with
TILLAGE_S3_ALLOW_HTTP=1.

A put is atomic by S3's nature (a reader sees the old object or the new one). write_if is a
real conditional write: `If-None-Match: *` to create, `If-Match: <ETag>` to replace, so the
store itself decides which of two racing writers wins; the ETag is the version token.
"""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

import obstore
from obstore.exceptions import (
    AlreadyExistsError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
)
from obstore.exceptions import BaseError as ObstoreError
from obstore.store import S3Store

from tillage.errors import echo
from tillage.platform.names import random_hex
from tillage.remote.base import Versioned
from tillage.remote.errors import BadRemoteUrlError, RemoteMissingError, RemoteUnavailableError
from tillage.remote.names import check_name, check_prefix, is_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from obstore import GetOptions, PutMode
    from obstore.store import ClientConfig, RetryConfig, S3Credential

__all__ = ["S3Credentials", "S3Location", "S3Remote"]

# exists(): how many listed keys per asked name a listing may read before the rest are asked
# one HEAD each. Measured against moto (bench/s3_remote.py): a LIST page of 1,000 keys takes
# ~0.1 s, 1,000 HEADs 16 at a time ~1.5 s, so a listing wins up to ~15 keys per asked name.
LIST_KEYS_PER_NAME = 16
LIST_PAGE = 1000
HEAD_THREADS = 16
# put(): objects above this go up in parts, so no single request carries more than a part
# (a slow uplink finishes each one well inside the request timeout).
MULTIPART_ABOVE = 32 << 20
PART_SIZE = 8 << 20
PART_THREADS = 8
CONNECT_TIMEOUT = timedelta(seconds=5)
READ_TIMEOUT = timedelta(seconds=30)  # a store that stops answering mid-request
REQUEST_TIMEOUT = timedelta(seconds=600)  # a whole request: a part, or a large GET
RETRIES = 3
RETRY_WINDOW = timedelta(seconds=30)
# write_if(): attempts of one conditional write (409 ConditionalRequestConflict, an
# unanswered request); obstore's own retries are off for it (see _write_conditionally).
CONDITIONAL_ATTEMPTS = 5
CONDITIONAL_BACKOFF = 0.1

_Names = list[str]  # spelled here: inside S3Remote, `list` is the method
_ENDPOINT_VARIABLES = ("TILLAGE_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
# The stores whose conditional writes this process proved (endpoint, bucket, prefix): each is
# probed once, before this process's first write to it.
_PROVEN: set[tuple[str, str, str]] = set()
_PROVEN_LOCK = threading.Lock()
_PROBING = threading.local()

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_PREFIX_SEGMENT = re.compile(r"[A-Za-z0-9!_.*'()-]+")
_REGION = re.compile(r"[a-z0-9-]{1,40}")
_TRUE = frozenset({"1", "true", "yes"})
_STATUS = re.compile(r"status code: (\d{3})")
_S3_CODE = re.compile(r"<Code>([A-Za-z]+)</Code>")
_CONNECT = re.compile(r'ConnectError\(\s*"([^"]+)"')
_OS_REASON = re.compile(r'(?:message|error): "([^"]+)"')
_KIND = re.compile(r"kind: ([A-Za-z]+)")

_CREDENTIAL_NEXT = (
    "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary "
    "credentials), and that they may list, read, write and delete in the bucket"
)
_ENDPOINT_NEXT = (
    "check that the store is running and reachable at that address (TILLAGE_S3_ENDPOINT or "
    "AWS_ENDPOINT_URL), then retry"
)
_CREDENTIAL_REASONS = {
    "InvalidAccessKeyId": "the access key id is not one the store knows",
    "SignatureDoesNotMatch": "the secret access key does not match the access key id",
    "InvalidToken": "the session token is not valid",
    "ExpiredToken": "the session token has expired",
    "TokenRefreshRequired": "the session token has expired",
    "AccessDenied": "these credentials may not do that in this bucket",
    "AllAccessDisabled": "all access to this bucket is disabled",
}


@dataclass(frozen=True)
class S3Location:
    """Where a remote's objects live: the bucket and key prefix, the endpoint (path-style
    when custom), the signing region, and whether plain http was allowed."""

    bucket: str
    prefix: str
    endpoint: str
    virtual_hosted: bool
    region: str
    allow_http: bool
    custom: bool = False  # the endpoint came from the environment (not AWS's own)


class S3Credentials:
    """Static S3 credentials, handed to obstore as a callback so no config, repr or error
    holds them (obstore asks once and caches them: they never expire)."""

    __slots__ = ("_key_id", "_secret", "_token")

    def __init__(self, key_id: str, secret: str, token: str | None = None) -> None:
        self._key_id = key_id
        self._secret = secret
        self._token = token or None

    def __call__(self) -> S3Credential:
        """Returns the credentials in obstore's shape."""
        return {
            "access_key_id": self._key_id,
            "secret_access_key": self._secret,
            "token": self._token,
            "expires_at": None,
        }

    def __repr__(self) -> str:
        return "S3Credentials(<hidden>)"

    __str__ = __repr__


class S3Remote:
    """A remote in an S3 bucket (see the module's docstring). Thread-safe: obstore's client
    is shared by every thread; several S3Remotes on one bucket coordinate only through the
    store's conditional writes."""

    def __init__(self, url: str, location: S3Location, credentials: S3Credentials) -> None:
        self.url = url
        self.location = location
        self._store = _make_store(location, credentials, retries=RETRIES)
        # Conditional writes retry here, not in obstore: a retried If-Match whose first try
        # landed unseen would come back 412 and report a write that happened as lost.
        self._conditional_store = _make_store(location, credentials, retries=0)

    @classmethod
    def from_url(cls, url: str, env: Mapping[str, str]) -> S3Remote:
        """Opens `s3://bucket[/prefix]` with the settings in `env` (see the module's
        docstring). BadRemoteUrlError for a malformed URL or endpoint, or plain http without
        TILLAGE_S3_ALLOW_HTTP=1; RemoteUnavailableError when no credentials are set. Nothing
        is sent until the first call."""
        bucket, prefix = _parse_url(url)
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
        if not _REGION.fullmatch(region):
            raise BadRemoteUrlError(
                f"the AWS region {echo(region)} is not a region name",
                next_step="set AWS_REGION to the bucket's region (for example eu-west-1)",
            )
        allow_http = env.get("TILLAGE_S3_ALLOW_HTTP", "").strip().lower() in _TRUE
        endpoint, virtual_hosted = _endpoint(bucket, region, env, allow_http)
        key_id = env.get("AWS_ACCESS_KEY_ID", "")
        secret = env.get("AWS_SECRET_ACCESS_KEY", "")
        if not key_id or not secret:
            missing = " and ".join(
                name
                for name, value in (
                    ("AWS_ACCESS_KEY_ID", key_id),
                    ("AWS_SECRET_ACCESS_KEY", secret),
                )
                if not value
            )
            raise RemoteUnavailableError(
                f"no S3 credentials to open {url}: {missing} not set",
                next_step=(
                    "export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN "
                    "for temporary credentials), then retry"
                ),
                details={"remote": url},
            )
        custom = any(env.get(v, "").strip() for v in _ENDPOINT_VARIABLES)
        location = S3Location(bucket, prefix, endpoint, virtual_hosted, region, allow_http, custom)
        credentials = S3Credentials(key_id, secret, env.get("AWS_SESSION_TOKEN"))
        shown = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
        return cls(shown, location, credentials)

    def __repr__(self) -> str:
        return f"S3Remote({self.url!r}, endpoint={self.location.endpoint!r})"

    @property
    def recorded_endpoint(self) -> str | None:
        """The endpoint to keep with the remote (one the environment named; None for AWS's
        own, which the bucket and region decide)."""
        return self.location.endpoint if self.location.custom else None

    def _proven(self) -> None:
        """Before this process's first write to the store: its conditional writes are proven
        once (check_conditional_writes), so a store that ignores them is refused before a
        head can be lost through it, whichever command writes first."""
        where = (self.location.endpoint, self.location.bucket, self.location.prefix)
        if where in _PROVEN or getattr(_PROBING, "active", False):
            return
        with _PROVEN_LOCK:
            if where in _PROVEN:
                return
            _PROBING.active = True
            try:
                self._check_conditional_writes()
            finally:
                _PROBING.active = False
            _PROVEN.add(where)

    # -- reading ------------------------------------------------------------------------

    def exists(self, names: Sequence[str]) -> set[str]:
        """Returns which of `names` are present: one listing of the key range they span
        (sorted, so it decides every name up to the last key read), then, when that range is
        far larger than the batch, a parallel HEAD for each name left."""
        wanted = sorted({check_name(name) for name in names})
        if not wanted:
            return set()
        found, last = self._exists_by_listing(wanted)
        rest = wanted if last is None else [name for name in wanted if name > last]
        if rest:
            found |= self._exists_by_head(rest)
        return found

    def _exists_by_listing(self, wanted: list[str]) -> tuple[set[str], str | None]:
        """Lists from the smallest wanted name up to the largest, at most
        LIST_KEYS_PER_NAME keys per name (whole pages). Returns the names found and the last
        key read (every name up to it is decided), or `wanted[-1]` when it all was."""
        low, high = wanted[0], wanted[-1]
        folder = _common_folder(low, high)
        budget = LIST_KEYS_PER_NAME * len(wanted)
        wanted_set = set(wanted)
        found: set[str] = set()
        last: str | None = None
        read = 0
        try:
            stream = obstore.list(
                self._store, folder, offset=low[:-1] or None, chunk_size=LIST_PAGE
            )
            for page in stream:
                for meta in page:
                    key = meta["path"]
                    if key > high:
                        return found, high
                    if key in wanted_set:
                        found.add(key)
                    last = key
                read += len(page)
                if read >= budget:
                    return found, last
        except (ObstoreError, OSError) as exc:
            raise self._failure(exc, "list") from None
        return found, high

    def _exists_by_head(self, names: list[str]) -> set[str]:
        def present(name: str) -> bool:
            try:
                obstore.head(self._store, name)
            except FileNotFoundError:
                return False
            except (ObstoreError, OSError) as exc:
                raise self._failure(exc, f"look for {name} in") from None
            return True

        with ThreadPoolExecutor(min(HEAD_THREADS, len(names))) as pool:
            answers = list(pool.map(present, names))
        return {name for name, yes in zip(names, answers, strict=True) if yes}

    def get(self, name: str) -> bytes:
        """Returns `name`'s bytes; RemoteMissingError when it is absent."""
        found = self._read(name, "read")
        if found is None:
            raise RemoteMissingError(name, self.url)
        return found.data

    def get_range(self, name: str, offset: int, length: int) -> bytes:
        """One ranged GET (`Range: bytes=a-b`, or `bytes=-n` for a negative offset); a range
        past the end is no bytes (S3's 416), a range running past it is cut short."""
        check_name(name)
        if length < 0:
            raise ValueError(f"a range of {length} bytes")
        if length == 0:
            self.get_range(name, 0, 1)  # still RemoteMissingError for an absent name
            return b""
        options: GetOptions = (
            {"range": {"suffix": -offset}} if offset < 0 else {"range": (offset, offset + length)}
        )
        try:
            result = obstore.get(self._store, name, options=options)
            data = bytes(result.bytes())
        except FileNotFoundError as exc:
            if _s3_code(exc) == "NoSuchBucket":
                raise self._failure(exc, f"read {name} from") from None
            raise RemoteMissingError(name, self.url) from None
        except (ObstoreError, OSError) as exc:
            text = str(exc)
            past_end = _status(exc) == 416 or "InvalidRange" in text or "out of range" in text
            if past_end and offset >= 0:
                return b""
            raise self._failure(exc, f"read {name} from") from None
        return data[:length]

    def read_versioned(self, name: str) -> Versioned | None:
        """Returns `name`'s bytes with their ETag (both from one GET); None when absent."""
        return self._read(name, "read")

    def _read(self, name: str, doing: str) -> Versioned | None:
        check_name(name)
        try:
            result = obstore.get(self._store, name)
            data = bytes(result.bytes())
        except FileNotFoundError as exc:
            if _s3_code(exc) == "NoSuchBucket":
                raise self._failure(exc, doing) from None
            return None
        except (ObstoreError, OSError) as exc:
            raise self._failure(exc, f"{doing} {name} from") from None
        token = result.meta["e_tag"]
        if not token:
            raise RemoteUnavailableError(
                f"the S3 store behind {self.url} sent {name} without an ETag: it cannot take "
                "part in conditional writes",
                next_step="use an S3-compatible store that supports conditional writes",
                details={"remote": self.url},
            )
        return Versioned(data, token)

    def list(self, prefix: str) -> list[str]:
        """Returns the names that start with `prefix`, sorted: one listing from the prefix's
        folder, starting just before the prefix and stopping past it."""
        check_prefix(prefix)
        folder = prefix.rpartition("/")[0] or None
        names: list[str] = []
        try:
            stream = obstore.list(
                self._store, folder, offset=prefix[:-1] or None, chunk_size=LIST_PAGE
            )
            for page in stream:
                for meta in page:
                    key = meta["path"]
                    if key.startswith(prefix):
                        if is_name(key):  # anything else in the bucket is not ours
                            names.append(key)
                    elif key > prefix:
                        return sorted(names)
        except (ObstoreError, OSError) as exc:
            raise self._failure(exc, "list") from None
        return sorted(names)

    def first_names(self, limit: int) -> _Names:
        """Up to `limit` names below the prefix (one listing page): whether a place is empty,
        without listing a bucket of millions."""
        try:
            for page in obstore.list(self._store, None, chunk_size=limit):
                return [meta["path"] for meta in page][:limit]
        except (ObstoreError, OSError) as exc:
            raise self._failure(exc, "list") from None
        return []

    # -- writing ------------------------------------------------------------------------

    def put(self, name: str, data: bytes) -> None:
        """Stores `data` under `name` in one atomic PUT (in parts above MULTIPART_ABOVE:
        the object appears whole when the upload completes)."""
        check_name(name)
        self._proven()
        try:
            obstore.put(
                self._store,
                name,
                data,
                use_multipart=len(data) > MULTIPART_ABOVE,
                chunk_size=PART_SIZE,
                max_concurrency=PART_THREADS,
            )
        except (ObstoreError, OSError) as exc:
            raise self._failure(exc, f"write {name} to") from None

    def delete(self, name: str) -> None:
        """Removes `name`; an absent name is fine (S3 answers it like a present one)."""
        check_name(name)
        self._proven()
        try:
            obstore.delete(self._store, name)
        except FileNotFoundError as exc:
            if _s3_code(exc) == "NoSuchBucket":
                raise self._failure(exc, f"delete {name} from") from None
        except (ObstoreError, OSError) as exc:
            raise self._failure(exc, f"delete {name} from") from None

    def write_if(self, name: str, data: bytes, expect: str | None) -> bool:
        """Compare-and-swap by a conditional PUT: `If-None-Match: *` when `expect` is None,
        `If-Match: expect` otherwise; the store answers 412 to the loser, and this returns
        False for it. When an attempt got no answer and the retry lost, the name is read back:
        the write landed (and this returns True) exactly when it holds `data` — the engine's
        sealed documents carry a random nonce, so no other writer's bytes are equal."""
        check_name(name)
        self._proven()
        mode: PutMode = "create" if expect is None else {"e_tag": expect}
        unanswered = False
        last: Exception | None = None
        for attempt in range(CONDITIONAL_ATTEMPTS):
            if attempt:
                time.sleep(CONDITIONAL_BACKOFF * (1 << (attempt - 1)))
            try:
                obstore.put(self._conditional_store, name, data, mode=mode, use_multipart=False)
            except (AlreadyExistsError, PreconditionError, FileNotFoundError) as exc:
                if _s3_code(exc) == "NoSuchBucket":
                    raise self._failure(exc, f"write {name} to") from None
                if unanswered:
                    current = self._read(name, "read back")
                    return current is not None and current.data == data
                return False
            except (ObstoreError, OSError) as exc:
                outcome = _conditional_outcome(exc)
                if outcome == "fatal":
                    raise self._failure(exc, f"write {name} to") from None
                unanswered = unanswered or outcome == "unanswered"
                last = exc
                continue
            return True
        assert last is not None
        raise self._failure(last, f"write {name} to") from None

    def check_conditional_writes(self) -> None:
        """(Every process runs this once before its first write: see _proven.)"""
        _PROBING.active = True
        try:
            self._check_conditional_writes()
        finally:
            _PROBING.active = False
        where = (self.location.endpoint, self.location.bucket, self.location.prefix)
        with _PROVEN_LOCK:
            _PROVEN.add(where)

    def _check_conditional_writes(self) -> None:
        """Proves that this store enforces conditional writes, on a scratch name it removes:
        a second create-only write and a write against a stale ETag must both lose. Some
        S3-compatible servers ignore the headers and overwrite; a sync through one of them
        could lose a head, so this answers RemoteUnavailableError for it."""
        name = f"probe/{random_hex(16)}"
        try:
            first = self.write_if(name, b"first " + random_hex(8).encode(), None)
            second = self.write_if(name, b"second " + random_hex(8).encode(), None)
            seen = self.read_versioned(name)
            stale = seen is not None and self.write_if(
                name, b"third " + random_hex(8).encode(), '"0000"'
            )
        finally:
            self.delete(name)
        if not first or second or seen is None or stale:
            raise RemoteUnavailableError(
                f"the S3 store behind {self.url} does not enforce conditional writes "
                "(If-None-Match / If-Match): two machines could overwrite each other's head",
                next_step=(
                    "use a store that supports conditional writes (AWS S3, MinIO, Cloudflare "
                    "R2, a recent Ceph RGW)"
                ),
                details={"remote": self.url, "endpoint": self.location.endpoint},
            )

    def close(self) -> None:
        """Nothing to release: obstore's connections close with the store object."""

    # -- failures -----------------------------------------------------------------------

    def _failure(self, exc: BaseException, doing: str) -> RemoteUnavailableError:
        """Turns an obstore failure into one RemoteUnavailableError that says what went
        wrong with which store and what to check, without obstore's debug dump."""
        text = str(exc)
        status = _status(exc)
        code = _s3_code(exc)
        where = self.url
        endpoint = self.location.endpoint
        details: dict[str, object] = {"remote": where, "endpoint": endpoint}
        if status is not None:
            details["status"] = status
        if code:
            details["s3_code"] = code
        if code == "NoSuchBucket":
            return RemoteUnavailableError(
                f"the bucket {self.location.bucket!r} does not exist at {endpoint}",
                next_step=(
                    f"create it (for example `aws s3 mb s3://{self.location.bucket}`), or check "
                    "the URL and the endpoint (TILLAGE_S3_ENDPOINT or AWS_ENDPOINT_URL)"
                ),
                details=details,
            )
        if code == "RequestTimeTooSkewed":
            return RemoteUnavailableError(
                f"S3 refused to {doing} {where}: this machine's clock is too far from the store's",
                next_step="set this machine's clock (enable NTP), then retry",
                details=details,
            )
        if code in (
            "PermanentRedirect",
            "AuthorizationHeaderMalformed",
            "IllegalLocationConstraintException",
        ):
            return RemoteUnavailableError(
                f"S3 refused to {doing} {where}: the bucket is not in region "
                f"{self.location.region} ({code})",
                next_step="set AWS_REGION to the bucket's region, then retry",
                details=details,
            )
        if (
            isinstance(exc, (PermissionDeniedError, UnauthenticatedError))
            or status in (401, 403)
            or code in _CREDENTIAL_REASONS
        ):
            reason = _CREDENTIAL_REASONS.get(code or "", "the credentials were refused")
            shown = f" ({code})" if code else ""
            return RemoteUnavailableError(
                f"S3 refused to {doing} {where}: {reason}{shown}",
                next_step=_CREDENTIAL_NEXT,
                details=details,
            )
        if status is None and _KIND.search(text) and "Connect" in _KIND.findall(text):
            connect = _CONNECT.search(text)
            reason_match = _OS_REASON.search(text)
            reason = reason_match.group(1) if reason_match else "the connection failed"
            reason = reason[:1].lower() + reason[1:]
            if connect and connect.group(1) == "dns error":
                reason = f"its host name does not resolve ({reason})"
            return RemoteUnavailableError(
                f"cannot reach the S3 endpoint {endpoint} for {where}: {reason}",
                next_step=_ENDPOINT_NEXT,
                details=details,
            )
        if status is None and ("Timeout" in _KIND.findall(text) or "timed out" in text):
            return RemoteUnavailableError(
                f"the S3 endpoint {endpoint} did not answer in time for {where}",
                next_step=_ENDPOINT_NEXT,
                details=details,
            )
        if status is not None and status >= 500:
            return RemoteUnavailableError(
                f"the S3 store at {endpoint} failed to {doing} {where}: HTTP {status}"
                + (f" {code}" if code else ""),
                next_step="the store had a problem of its own; retry in a moment",
                details=details,
            )
        first_line = text.split("\n", 1)[0].strip()
        return RemoteUnavailableError(
            f"S3 could not {doing} {where}: {first_line[:300]}",
            next_step=_ENDPOINT_NEXT,
            details=details,
        )


def _parse_url(url: str) -> tuple[str, str]:
    """Returns the bucket and key prefix of `s3://bucket[/prefix]`; BadRemoteUrlError for
    anything else (a port, credentials, a query in the URL; a name S3 would refuse)."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise BadRemoteUrlError(f"not an s3:// URL: {echo(url)} ({exc})") from None
    if parts.scheme.lower() != "s3":
        raise BadRemoteUrlError(f"not an s3:// URL: {echo(url)}")
    if parts.query or parts.fragment or "@" in parts.netloc or ":" in parts.netloc:
        raise BadRemoteUrlError(
            f"an S3 remote is s3://bucket[/prefix], without a port, credentials or query: "
            f"{echo(url)}",
            next_step=(
                "put the endpoint in TILLAGE_S3_ENDPOINT and the credentials in "
                "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY"
            ),
        )
    bucket = parts.netloc
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise BadRemoteUrlError(
            f"{echo(bucket)} is not an S3 bucket name (3 to 63 lowercase letters, digits, dots "
            f"and hyphens): {echo(url)}"
        )
    segments = [segment for segment in parts.path.split("/")]
    inner = segments[1:-1] if parts.path.endswith("/") else segments[1:]
    if parts.path and (
        any(not _PREFIX_SEGMENT.fullmatch(s) or s in (".", "..") for s in inner)
        or len(parts.path) > 400
    ):
        raise BadRemoteUrlError(
            f"the key prefix in {echo(url)} must be '/'-separated words of letters, digits and "
            "!_.*'()- (no empty, '.' or '..' parts)"
        )
    return bucket, "/".join(inner)


def _endpoint(
    bucket: str, region: str, env: Mapping[str, str], allow_http: bool
) -> tuple[str, bool]:
    """Returns the endpoint to send requests to and whether requests are virtual-hosted:
    a custom endpoint (TILLAGE_S3_ENDPOINT, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL) is
    addressed path-style; AWS virtual-hosted (path-style for a dotted bucket, whose name
    would break the TLS certificate's wildcard)."""
    for variable in _ENDPOINT_VARIABLES:
        value = env.get(variable, "").strip()
        if value:
            break
    else:
        if "." in bucket:
            return f"https://s3.{region}.amazonaws.com", False
        return f"https://{bucket}.s3.{region}.amazonaws.com", True
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  (raises on a malformed port)
    except ValueError:
        raise BadRemoteUrlError(
            f"the S3 endpoint {echo(value)} (from {variable}) is not a URL",
            next_step=f"set {variable} to http(s)://host[:port]",
        ) from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise BadRemoteUrlError(
            f"the S3 endpoint {echo(value)} (from {variable}) is not an http(s)://host[:port] URL",
            next_step=f"set {variable} to http(s)://host[:port]",
        )
    if parts.username or parts.password:
        raise BadRemoteUrlError(
            f"the S3 endpoint (from {variable}) must not hold credentials",
            next_step="put them in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
        )
    if scheme == "http" and not allow_http:
        raise BadRemoteUrlError(
            f"the S3 endpoint {echo(value)} (from {variable}) is plain http: requests, "
            "signatures and object names would cross the network unencrypted",
            next_step=(
                "use an https endpoint, or set TILLAGE_S3_ALLOW_HTTP=1 to allow plain http "
                "(a store on this machine or a trusted network)"
            ),
        )
    return value.rstrip("/"), False


def _make_store(location: S3Location, credentials: S3Credentials, *, retries: int) -> S3Store:
    """An obstore S3Store with every setting given explicitly, so nothing in this process's
    own environment (obstore reads AWS_* from it) changes where or how it connects."""
    client: ClientConfig = {
        "allow_http": location.allow_http,
        "connect_timeout": CONNECT_TIMEOUT,
        "read_timeout": READ_TIMEOUT,
        "timeout": REQUEST_TIMEOUT,
    }
    retry: RetryConfig = {
        "max_retries": retries,
        "retry_timeout": RETRY_WINDOW,
        "backoff": {
            "init_backoff": timedelta(milliseconds=100),
            "max_backoff": timedelta(seconds=2),
            "base": 2,
        },
    }
    return S3Store(
        location.bucket,
        prefix=location.prefix or None,
        endpoint=location.endpoint,
        region=location.region,
        virtual_hosted_style_request=location.virtual_hosted,
        conditional_put="etag",
        skip_signature=False,
        client_options=client,
        retry_config=retry,
        credential_provider=credentials,
    )


def _common_folder(low: str, high: str) -> str | None:
    """The deepest folder (whole `/` segments) holding both names; None for the root."""
    shared = 0
    for a, b in zip(low, high, strict=False):
        if a != b:
            break
        shared += 1
    folder = low[:shared].rpartition("/")[0]
    return folder or None


def _status(exc: BaseException) -> int | None:
    match = _STATUS.search(str(exc))
    return int(match.group(1)) if match else None


def _s3_code(exc: BaseException) -> str | None:
    """The S3 error code in the reply's XML body (NoSuchBucket, AccessDenied, ...); None for
    a reply without a body (HEAD) or no reply."""
    match = _S3_CODE.search(str(exc))
    return match.group(1) if match else None


def _conditional_outcome(exc: BaseException) -> str:
    """Sorts a failed conditional PUT: "conflict" (409, a concurrent conditional write: try
    again), "unsent" (no connection: safe to try again), "unanswered" (it may have landed:
    try again, then read back) or "fatal" (refused: credentials, bucket, request)."""
    status = _status(exc)
    text = str(exc)
    if status == 409:
        return "conflict"
    if status is None:
        return "unsent" if "Connect" in _KIND.findall(text) else "unanswered"
    if status >= 500 or status in (408, 429):
        return "unanswered"
    return "fatal"
