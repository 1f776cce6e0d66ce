"""Storage failures a user can act on: what went wrong reaching the store (refused connection, unknown host,
refused credentials, an endpoint lost mid-run), a full or failing disk (``ENOSPC``, SQLite's "disk I/O
error"), where (endpoint and bucket, or path), what to do - and never a secret: ``redact`` also removes SigV4
signatures, credentials and security tokens from anything logged (``RedactingFilter``)."""

from __future__ import annotations

import errno
import logging
import re
import socket
from collections.abc import Iterable, Iterator

__all__ = [
    "RedactingFilter",
    "StorageUnavailableError",
    "one_line_error",
    "redact",
    "translate_storage_error",
]


class StorageUnavailableError(RuntimeError):
    """The store cannot be reached or refuses the credentials; the message names the endpoint, never a secret."""


_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^/@:\s]*):(?P<secret>[^/@\s]*)@", re.I
)
_ACCESS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA)[A-Z0-9]{12,}\b")
# SigV4 material in headers, query strings and botocore's debug lines: signatures, credential scopes (they
# start with the access key id, whatever its form) and session tokens
_SIGNING = [
    (re.compile(r"(?i)((?:x-amz-)?signature[\"']?\s*[:=]\s*[\"']?\s*)[0-9a-f]{16,}"), r"\1***"),
    (re.compile(r"(?i)((?:x-amz-)?credential[\"']?\s*[:=]\s*[\"']?)[^\s,&\"']+"), r"\1***"),
    (re.compile(r"(?i)((?:x-amz-security-token|aws_session_token|security-token)[\"']?\s*[:=]\s*[\"']?)[^\s,&\"']+"),
     r"\1***"),
    (re.compile(r"(?i)(aws_access_key_id[\"']?\s*[:=]\s*[\"']?)[^\s,&\"']+"), r"\1***"),
]  # fmt: skip
_CREDENTIAL_CODES = (
    "invalidaccesskeyid",
    "signaturedoesnotmatch",
    "accessdenied",
    "access denied",
    "forbidden",
    "invalidtoken",
    "expiredtoken",
    "nocredentials",
    "unable to locate credentials",
    "(403)",
)
_TIMEOUT_WORDS = ("timed out", "timeout")
_NETWORK_WORDS = ("could not connect", "cannot connect", "connection refused", "unreachable")

HINT_NETWORK = "check FM_S3_ENDPOINT_URL (or FM_ROOT) and that the server is up and reachable from here"
HINT_DNS = "the endpoint's host name does not resolve: check FM_S3_ENDPOINT_URL for a typo, or DNS/VPN"
HINT_CREDENTIALS = (
    "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or AWS_PROFILE / the role) and the bucket policy"
)
HINT_URL_CREDENTIALS = (
    "remove user:password@ from FM_S3_ENDPOINT_URL and pass AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY instead"
)


def redact(text: str | None, secrets: Iterable[str] = ()) -> str:
    """``text`` with ``scheme://user:password@`` reduced to ``scheme://user:***@``, access key ids and the given
    ``secrets`` replaced by ``***``."""
    text = _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text or "")
    text = _ACCESS_KEY_ID.sub("***", text)
    for pattern, replacement in _SIGNING:
        text = pattern.sub(replacement, text)
    for secret in secrets:
        if secret and len(secret) >= 3:
            text = text.replace(secret, "***")
    return text


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _kind(exc: BaseException, endpoint_url: str) -> tuple[str, str]:
    """(kind of failure, what to do) for ``exc`` (its whole cause chain is looked at)."""
    chain = list(_chain(exc))
    text = " ".join(f"{type(e).__name__}: {e}" for e in chain).lower()
    if "encoded in url" in text or _URL_CREDENTIALS.search(endpoint_url):
        return "credentials inside the endpoint URL", HINT_URL_CREDENTIALS
    if any(isinstance(e, socket.gaierror) for e in chain) or "name or service not known" in text:
        return "endpoint unreachable (DNS: host name not found)", HINT_DNS
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "connection refused" in text:
        return "endpoint unreachable (connection refused)", HINT_NETWORK
    if any(isinstance(e, PermissionError) for e in chain) or any(w in text for w in _CREDENTIAL_CODES):
        return "credentials refused", HINT_CREDENTIALS
    if any(isinstance(e, TimeoutError) for e in chain) or any(w in text for w in _TIMEOUT_WORDS):
        return "endpoint unreachable (timed out)", HINT_NETWORK
    if any(w in text for w in _NETWORK_WORDS) or any(isinstance(e, ConnectionError) for e in chain):
        return "endpoint unreachable", HINT_NETWORK
    return "storage error", "see the cause in parentheses"


def translate_storage_error(
    exc: BaseException, *, where: str, what: str, endpoint_url: str = "", secrets: Iterable[str] = ()
) -> StorageUnavailableError:
    """A ``StorageUnavailableError`` for ``exc`` raised while trying to ``what`` the store at ``where``
    (already free of secrets): kind of failure, the redacted cause, and a hint."""
    secrets = list(secrets)
    kind, hint = _kind(exc, endpoint_url)
    cause = redact(f"{type(exc).__name__}: {exc}", secrets)
    cause = cause if len(cause) <= 300 else cause[:297] + "..."
    return StorageUnavailableError(f"cannot {what} {where}: {kind} ({cause}); {hint}")


class RedactingFilter(logging.Filter):
    """Passes every record with its message ``redact``-ed (signatures, credentials, tokens, ``secrets``)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message, self.secrets)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


# exceptions raised (by botocore, aiobotocore, aiohttp, urllib3) when an endpoint that answered before stops
_LOST_ENDPOINT = frozenset({
    "EndpointConnectionError", "ConnectionClosedError", "ConnectTimeoutError", "ReadTimeoutError",
    "ClientConnectorError", "ServerDisconnectedError", "ClientOSError", "ProtocolError", "NewConnectionError",
})  # fmt: skip
_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS}
HINT_DISK = "free space (or fix the disk), then run the same command again: committed work is kept"


def disk_problem(exc: BaseException) -> str | None:
    """What is wrong with the disk, when ``exc`` (or its cause) is a full, read-only or failing disk."""
    for error in _chain(exc):
        if isinstance(error, OSError) and error.errno in _DISK_ERRNOS:
            where = f" writing {error.filename}" if error.filename else ""
            return f"{error.strerror or errno.errorcode.get(error.errno or 0, 'disk error')}{where}"
        text = str(error).lower()
        if type(error).__name__ in ("OperationalError", "DatabaseError") and (
            "disk i/o error" in text or "database or disk is full" in text or "readonly database" in text
        ):
            return f"the Dagster instance's SQLite database cannot write ({text.splitlines()[0][:160]})"
    return None


def one_line_error(
    exc: BaseException, *, where: str, endpoint_url: str = "", secrets: Iterable[str] = ()
) -> str | None:
    """The one-line message for a storage or disk failure that reached the command line (None: not one)."""
    disk = disk_problem(exc)
    if disk is not None:
        return f"disk full or failing under {where} or the Dagster home: {disk}; {HINT_DISK}"
    if isinstance(exc, StorageUnavailableError):
        return str(exc)
    if any(type(error).__name__ in _LOST_ENDPOINT for error in _chain(exc)):
        return str(translate_storage_error(exc, where=where, what="keep working with", endpoint_url=endpoint_url,
                                           secrets=secrets)) + "; committed work is kept, run the same command again"  # fmt: skip
    return None
