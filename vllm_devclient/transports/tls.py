"""TLS: which certificates a client trusts and shows (`verify=`, `cert=`, the environment), and what a failed
handshake means, said in words that name the setting to change.

The rules, httpx's (`httpx.create_ssl_context`, 0.28) unless told otherwise:

- `verify=True` (the default): the CA bundle file named by `SSL_CERT_FILE`, else the folder of hashed CA
  certificates named by `SSL_CERT_DIR`, else certifi's bundle. An empty variable counts as unset. The
  environment is read when the client is made; a pickled client carries what it read (as it carries the
  API key read from `VLLM_API_KEY`). A variable naming nothing readable is an `InvalidParameterError`
  naming it when the CAs are loaded: at the first https connection (`transport="httpx"`: when the client is
  made), so a plain-http client never minds it (httpx 0.28 raises FileNotFoundError when any client is
  made; 0.27 ignored the variable). Either variable may name a file or a folder.
- `verify="path"` (or a `pathlib.Path`): that CA bundle file, or that folder; the environment is not read.
  (httpx 0.28 takes only a string here, and with a DeprecationWarning.)
- `verify=False`: no check of the server's certificate or name (the client logs one warning).
- `verify=<ssl.SSLContext>`: used as it is. With `cert=` too it is refused (httpx would load the client
  certificate into your context, changing it): load it yourself with `load_cert_chain`.
- `cert=`: httpx's shapes (a file with certificate and key, (certificate, key), (certificate, key,
  password)), without httpx's DeprecationWarning.

A certificate failure becomes `TLSFailure` (a `ConnectFailed`: nothing was sent), which the client raises as
`TLSError` and never retries: another try meets the same certificate.
"""

from __future__ import annotations

import logging
import os
import ssl
from dataclasses import dataclass, field

from .. import arguments as check
from ..arguments import ClientCert
from ..errors import InvalidParameterError
from .base import ConnectFailed, Origin

__all__ = [
    "CertArg",
    "TLSConfig",
    "TLSFailure",
    "VerifyArg",
    "handshake_failure",
    "tls_connect_failure",
    "unanswered_note",
]

# What `verify=` and `cert=` take (httpx's shapes; paths may also be `os.PathLike`).
VerifyArg = bool | str | os.PathLike[str] | ssl.SSLContext
_Path = str | os.PathLike[str]
CertArg = _Path | tuple[_Path, _Path | None] | tuple[_Path, _Path | None, str | None]

log = logging.getLogger("vllm_devclient")

_CA_HELP = "pass verify= the CA certificate that signed it (CLI --cacert), or set SSL_CERT_FILE"
_SKIP = "verify=False (CLI --insecure) skips the check"
# OpenSSL's X509_V_ERR_* codes, by what a user would do about them.
_EXPIRED = {9, 10}  # not yet valid, expired
_WRONG_NAME = {62, 64}  # host name, IP address mismatch
_UNTRUSTED = {2, 18, 19, 20, 21}  # no issuer known, self-signed, unable to verify the leaf
# Alerts a server sends about the client's certificate (the reason OpenSSL reports for them).
_CLIENT_CERT_ALERTS = {
    "TLSV13_ALERT_CERTIFICATE_REQUIRED",
    "SSLV3_ALERT_BAD_CERTIFICATE",
    "SSLV3_ALERT_HANDSHAKE_FAILURE",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
    "SSLV3_ALERT_CERTIFICATE_EXPIRED",
    "SSLV3_ALERT_CERTIFICATE_REVOKED",
    "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE",
    "TLSV1_ALERT_UNKNOWN_CA",
    "TLSV1_ALERT_ACCESS_DENIED",
    "TLSV1_ALERT_DECRYPT_ERROR",
}
_NOT_TLS = {"WRONG_VERSION_NUMBER", "HTTP_REQUEST", "RECORD_LAYER_FAILURE"}


class TLSFailure(ConnectFailed):
    """The handshake failed over a certificate (the server's or ours), or the server does not speak TLS."""


@dataclass(frozen=True)
class TLSConfig:
    """A client's TLS settings, checked, with the environment's CA settings read (see the module's rules).

    `trust` says where the trusted CAs come from, for messages: "certifi's CA bundle", "SSL_CERT_FILE=...",
    "verify=...".
    """

    verify: bool | str | ssl.SSLContext = True
    cert: ClientCert | None = field(default=None, repr=False)  # holds the key's password
    trust: str = "certifi's CA bundle"

    @classmethod
    def of(cls, verify: object = True, cert: object = None) -> TLSConfig:
        checked = check.verify(verify)
        client = check.client_cert(cert)
        if isinstance(checked, ssl.SSLContext):
            if client is not None:
                raise InvalidParameterError(
                    "cert= cannot be added to verify=<ssl.SSLContext>: load the client certificate into your "
                    "context (context.load_cert_chain(...)), or pass verify= a CA path with cert="
                )
            return cls(checked, None, "verify=<ssl.SSLContext>")
        if checked is False:
            return cls(False, client, "nothing (verify=False)")
        if checked is True:
            return cls._from_environment(client)
        return cls(checked, client, f"verify={checked}")

    @classmethod
    def _from_environment(cls, client: ClientCert | None) -> TLSConfig:
        for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
            path = os.environ.get(name)
            if path:
                return cls(path, client, f"{name}={path}")
        return cls(True, client)

    @property
    def checks_server(self) -> bool:
        if isinstance(self.verify, ssl.SSLContext):
            return self.verify.verify_mode != ssl.CERT_NONE
        return self.verify is not False

    def refuse_pickling(self, owner: str) -> None:
        """TypeError when these settings cannot travel to another process (an SSLContext cannot)."""
        if isinstance(self.verify, ssl.SSLContext):
            raise TypeError(
                f"a {owner} made with verify=<ssl.SSLContext> cannot be pickled (an SSLContext does not "
                "travel): pass verify= the CA bundle's path, and cert=, instead"
            )

    def warn_if_unchecked(self, what: str) -> None:
        """Log the one warning a client (or fleet) gives when it will not check the certificates it meets."""
        if not self.checks_server:
            log.warning(
                "TLS certificate verification is off for %s (%s): the connection is encrypted, but anyone "
                "on the path can pose as the server",
                what,
                "verify=False" if self.verify is False else "an SSLContext that checks nothing",
            )

    def context(self) -> ssl.SSLContext:
        """The SSLContext these settings make (a new one each call: callers keep theirs)."""
        verify = self.verify
        if isinstance(verify, ssl.SSLContext):
            return verify
        try:
            if verify is False:
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            elif verify is True:
                import certifi

                ctx = ssl.create_default_context(cafile=certifi.where())
            elif os.path.isdir(verify):
                ctx = ssl.create_default_context(capath=verify)
            else:
                ctx = ssl.create_default_context(cafile=verify)
        except (OSError, ssl.SSLError) as exc:
            raise InvalidParameterError(
                f"cannot load the CA certificates of {self.trust}: {_reason(exc)} (fix it, or pass verify= "
                "a CA bundle)"
            ) from None
        if self.cert is not None:
            certfile, keyfile, password = self.cert
            try:
                ctx.load_cert_chain(certfile, keyfile, password)
            except (OSError, ssl.SSLError) as exc:
                raise InvalidParameterError(
                    f"cert=: cannot load the client certificate {certfile}"
                    + (f" with the key {keyfile}" if keyfile else "")
                    + f": {_reason(exc)} (a key that does not match, a wrong or missing password, "
                    "or a file that is not PEM)"
                ) from None
        return ctx


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def _ssl_error(exc: BaseException | None) -> ssl.SSLError | None:
    """The ssl error behind `exc` (libraries wrap it), if any."""
    for _ in range(8):
        if exc is None:
            return None
        # aiohttp's wrappers are ssl errors themselves, without the attributes: the original is inside.
        inner = getattr(exc, "certificate_error", None) or getattr(exc, "os_error", None)
        if isinstance(inner, ssl.SSLError):
            return inner
        if isinstance(exc, ssl.SSLError):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _client_cert_hint(tls: TLSConfig) -> str:
    if tls.cert is None:
        return "pass cert= a client certificate it accepts (CLI --cert)"
    return f"pass cert= a certificate its CA signed (CLI --cert; given: {tls.cert[0]})"


def handshake_failure(exc: BaseException, origin: Origin, tls: TLSConfig) -> ConnectFailed | None:
    """What a TLS error on the way to `origin` means (`exc` or an error it wraps), or None for no TLS error.

    Certificate failures are `TLSFailure`s naming the host, the reason and the setting that fixes them;
    other TLS errors (a handshake cut short) are plain `ConnectFailed`s, retried like any connect failure.
    """
    err = _ssl_error(exc)
    if err is None:
        return None
    host = origin.host_header
    if isinstance(err, ssl.SSLCertVerificationError):
        code, detail = err.verify_code, err.verify_message or _reason(err)
        if code in _EXPIRED:
            fix = f"the server needs a valid certificate; {_SKIP}"
            what = "is out of its validity period"
        elif code in _WRONG_NAME:
            fix = f"use a URL with a host name the certificate lists; {_SKIP}"
            what = f"is not valid for {origin.host}"
        elif code in _UNTRUSTED:
            fix = f"{_CA_HELP}; {_SKIP}"
            what = "is not signed by a CA this client trusts"
        else:
            fix = f"{_CA_HELP}; {_SKIP}"
            what = "was refused"
        return TLSFailure(f"TLS: the certificate of {host} {what} ({detail}; trusting {tls.trust}): {fix}")
    reason = err.reason or ""
    if reason in _CLIENT_CERT_ALERTS:
        did = "asks for a client certificate" if tls.cert is None else "refused this client's certificate"
        return TLSFailure(f"TLS: {host} {did} ({reason}): {_client_cert_hint(tls)}")
    if reason in _NOT_TLS:
        return TLSFailure(f"TLS: {host} does not answer TLS ({reason}): if it serves plain HTTP, use http://")
    note = unanswered_note(origin, tls) if "EOF" in reason else ""
    return ConnectFailed(f"the TLS handshake with {host} failed ({reason or err}){note}")


def tls_connect_failure(exc: BaseException, origin: Origin, tls: TLSConfig) -> ConnectFailed:
    """`handshake_failure` for an error known to come from TLS while connecting."""
    return handshake_failure(exc, origin, tls) or ConnectFailed(
        f"TLS with {origin.host_header} failed: {exc}"
    )


def unanswered_note(origin: Origin, tls: TLSConfig) -> str:
    """What to add when an https server closed or reset a new connection without a word: that is how a
    server that wants a client certificate refuses one when it sends no alert (uvicorn, so the Python
    frontend), or when its alert was lost to the reset that followed it."""
    if origin.scheme != "https":
        return ""
    return f" (a server that requires client certificates closes this way too: {_client_cert_hint(tls)})"
