"""Who may use Mission Control's page: the checks every request passes, and the headers every
answer carries. Pure: a request is its method, path and headers; nothing here does I/O.

The page is served on 127.0.0.1 only, yet any site a browser has open can send requests there,
so each layer refuses on its own:
- `Host` must name the address the server is bound to (127.0.0.1:PORT or localhost:PORT): a
  site that rebinds its own name to 127.0.0.1 (DNS rebinding) sends its own name.
- Every API call carries this run's token in `X-Tillage-Token`. A custom header cannot be sent
  across origins without a CORS preflight, which is never answered, and the token is never a
  cookie (a browser would attach a cookie to another site's request).
- A call that changes something (a POST) must also say `Origin` equal to the page's own origin,
  send JSON (`Content-Type: application/json`, which a plain HTML form cannot), and, when the
  browser says where it came from (`Sec-Fetch-Site`), come from the same origin.
- Answers forbid framing (CSP `frame-ancestors 'none'`), never leak the URL (and so the token)
  in a Referer, isolate the page's window (COOP same-origin) and load scripts only from the
  page's own origin.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass

TOKEN_HEADER = "x-tillage-token"
LOOPBACK_NAMES = ("127.0.0.1", "localhost")
# Headers on every answer (the page, its files, the API, errors and refusals alike).
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
)


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: the HTTP status and the public error's name (verbs/ui.py)."""

    status: int
    error: str  # "host", "origin" or "token"
    message: str


def allowed_hosts(port: int) -> frozenset[str]:
    """The `Host` values the page answers to: the loopback names with the bound port."""
    return frozenset(f"{name}:{port}" for name in LOOPBACK_NAMES)


def check(
    method: str,
    path: str,
    headers: Mapping[str, str],
    *,
    port: int,
    token: str,
) -> Refusal | None:
    """Returns why a request must be refused, or None when it may be served. `headers` are
    keyed in lower case."""
    host = headers.get("host", "")
    if host.lower() not in allowed_hosts(port):
        return Refusal(403, "host", f"this page answers only to 127.0.0.1:{port}, not {host!r}")
    if not path.startswith("/api/"):
        return None  # the page and its files: the same for everyone, and read-only
    if method == "POST":
        refusal = _same_origin(headers, host)
        if refusal is not None:
            return refusal
    given = headers.get(TOKEN_HEADER, "")
    if not given or not hmac.compare_digest(given.encode(), token.encode()):
        return Refusal(403, "token", "this call needs this run's token in X-Tillage-Token")
    return None


def _same_origin(headers: Mapping[str, str], host: str) -> Refusal | None:
    origin = headers.get("origin")
    if origin is None or origin.lower() != f"http://{host.lower()}":
        return Refusal(403, "origin", f"a call that changes something must come from http://{host}")
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return Refusal(403, "origin", f"a call from a {site} page is refused")
    kind = headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        return Refusal(415, "origin", "a call that changes something must send JSON")
    return None
