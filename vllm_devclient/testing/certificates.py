"""Certificates for TLS tests, made on the spot: a private CA, what it signed, and what it should not trust.

    from vllm_devclient.testing.certificates import make_certificates

    certs = make_certificates(tmp_path)          # PEM files under tmp_path
    DevClient(url, verify=certs.ca, cert=(certs.client, certs.client_key))

Every file is PEM. `server` is valid for 127.0.0.1, ::1 and localhost (what a test server on loopback is
reached by); `ca_folder` holds the CA under its OpenSSL hash name (how `SSL_CERT_DIR` and a `verify=`
folder are read); `expired` ended yesterday; `wrong_host` is valid for `WRONG_HOST` only; `client` is made
for client authentication (mTLS); `stranger` is a client certificate of another CA, which servers refuse.
Keys are EC P-256 (quick to make, accepted by OpenSSL and rustls alike). Needs the `cryptography` package
(the `testing` extra).
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CLIENT_NAME", "KEY_PASSWORD", "WRONG_HOST", "Certificates", "make_certificates"]

WRONG_HOST = "elsewhere.invalid"
CLIENT_NAME = "vllm-devclient test client"
# The password of `client_key_encrypted` (the (cert, key, password) shape of `cert=`).
KEY_PASSWORD = "client-key-password"

_DAY = datetime.timedelta(days=1)
_Key = ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class Certificates:
    """Paths of the PEM files `make_certificates` wrote."""

    ca: Path
    ca_folder: Path
    server: Path
    server_key: Path
    expired: Path
    expired_key: Path
    wrong_host: Path
    wrong_host_key: Path
    client: Path
    client_key: Path
    client_key_encrypted: Path
    client_combined: Path  # certificate and key in one file (the one-path shape of `cert=`)
    stranger: Path
    stranger_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _ca(common_name: str, now: datetime.datetime) -> tuple[x509.Certificate, _Key]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _DAY)
        .not_valid_after(now + 30 * _DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    issuer: tuple[x509.Certificate, _Key],
    common_name: str,
    *,
    names: list[x509.GeneralName],
    usage: x509.ObjectIdentifier,
    not_before: datetime.datetime,
    not_after: datetime.datetime,
) -> tuple[x509.Certificate, _Key]:
    ca_cert, ca_key = issuer
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def _hashed_folder(folder: Path, ca: x509.Certificate, common_name: str) -> Path:
    """`folder` with the CA as `<subject hash>.0`: OpenSSL's X509_NAME_hash, SHA-1 of the subject in its
    canonical form (values as lower-case UTF8Strings, the outer SEQUENCE left out), for a one-CN subject."""
    der = _name(" ".join(common_name.split()).lower()).public_bytes()
    header = 2 if der[1] < 0x80 else 2 + (der[1] & 0x7F)
    digest = hashlib.sha1(der[header:]).digest()
    folder.mkdir(exist_ok=True)
    (folder / f"{int.from_bytes(digest[:4], 'little'):08x}.0").write_bytes(
        ca.public_bytes(serialization.Encoding.PEM)
    )
    return folder


def _write(directory: Path, stem: str, pair: tuple[x509.Certificate, _Key]) -> tuple[Path, Path]:
    cert, key = pair
    cert_path, key_path = directory / f"{stem}.pem", directory / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(_key_bytes(key, serialization.NoEncryption()))
    key_path.chmod(0o600)
    return cert_path, key_path


def _key_bytes(key: _Key, encryption: serialization.KeySerializationEncryption) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def make_certificates(directory: str | Path) -> Certificates:
    """Write a CA and the certificates above into `directory` (made if missing); their paths."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_name = "vllm-devclient test CA"
    ca = _ca(ca_name, now)
    loopback: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
        x509.DNSName("localhost"),
    ]
    server_auth, client_auth = ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH
    valid = {"not_before": now - _DAY, "not_after": now + 30 * _DAY}
    (root / "ca.pem").write_bytes(ca[0].public_bytes(serialization.Encoding.PEM))
    server = _write(root, "server", _leaf(ca, "127.0.0.1", names=loopback, usage=server_auth, **valid))
    expired = _write(
        root,
        "expired",
        _leaf(
            ca,
            "127.0.0.1",
            names=loopback,
            usage=server_auth,
            not_before=now - 30 * _DAY,
            not_after=now - _DAY,
        ),
    )
    wrong = _write(
        root,
        "wrong-host",
        _leaf(ca, WRONG_HOST, names=[x509.DNSName(WRONG_HOST)], usage=server_auth, **valid),
    )
    client_pair = _leaf(ca, CLIENT_NAME, names=[], usage=client_auth, **valid)
    client = _write(root, "client", client_pair)
    encrypted = root / "client-encrypted.key"
    encrypted.write_bytes(
        _key_bytes(client_pair[1], serialization.BestAvailableEncryption(KEY_PASSWORD.encode()))
    )
    combined = root / "client-combined.pem"
    combined.write_bytes(client[0].read_bytes() + client[1].read_bytes())
    stranger = _write(
        root, "stranger", _leaf(_ca("another CA", now), "stranger", names=[], usage=client_auth, **valid)
    )
    return Certificates(
        ca=root / "ca.pem",
        ca_folder=_hashed_folder(root / "ca-folder", ca[0], ca_name),
        server=server[0],
        server_key=server[1],
        expired=expired[0],
        expired_key=expired[1],
        wrong_host=wrong[0],
        wrong_host_key=wrong[1],
        client=client[0],
        client_key=client[1],
        client_key_encrypted=encrypted,
        client_combined=combined,
        stranger=stranger[0],
        stranger_key=stranger[1],
    )
