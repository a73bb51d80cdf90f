"""Serving certificates: a directory's pair, or a self-signed one made at start.

A directory holds `tls.crt` and `tls.key`, as a cert-manager Secret mounts them. Without
one, a pair is made for `localhost` and 127.0.0.1, signed by itself: its certificate is
its own CA bundle, which is what a local API server is given to call a webhook on
loopback."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path

CERT_FILE, KEY_FILE = "tls.crt", "tls.key"


def tls_context(cert_dir: Path | None, work_dir: Path) -> ssl.SSLContext:
    """The serving context: `cert_dir`'s tls.crt/tls.key, or a self-signed pair written
    to `work_dir`."""
    if cert_dir is not None:
        cert, key = cert_dir / CERT_FILE, cert_dir / KEY_FILE
    else:
        cert, key = self_signed(work_dir)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context


def self_signed(
    directory: Path, common_name: str = "captf-metrics", days: int = 365
) -> tuple[Path, Path]:
    """A key and a certificate for localhost and 127.0.0.1, signed by that key (so usable
    as its own CA), written to `directory` as tls.crt and tls.key (0600)."""
    # cryptography is imported here, not at module level: it costs about 10 MiB of
    # resident memory for the process's whole life, and only a self-signed serving
    # certificate needs it.
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    sans = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        # A CA bundle must hold a CA: Go's verifier refuses a leaf as its own root.
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / CERT_FILE, directory / KEY_FILE
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path
