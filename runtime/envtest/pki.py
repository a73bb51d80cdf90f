"""The certificates and keys a throwaway control plane needs, made with `cryptography`.

One CA signs the API server's serving certificate (for 127.0.0.1 and localhost)
an admin client certificate in group system:masters, which RBAC lets do
anything, and a client certificate for kube-controller-manager under the user name
its bootstrap RBAC role is bound to. A separate key pair signs and verifies service-account tokens.
ECDSA P-256 throughout: generation takes microseconds, and kube-apiserver
accepts it for TLS, client certificates and ES256 tokens."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Long enough for any test session or local run, short enough to be obviously throwaway.
_VALIDITY = dt.timedelta(days=7)
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files, all inside one directory."""

    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_signing_key: Path
    sa_public_key: Path
    controller_manager_cert: Path
    controller_manager_key: Path


def write_pki(directory: Path) -> Pki:
    """Generate every certificate and key into `directory` (which must exist)."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _ca_certificate(ca_key)
    pki = Pki(
        ca_cert=directory / "ca.crt",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        sa_signing_key=directory / "sa.key",
        sa_public_key=directory / "sa.pub",
        controller_manager_cert=directory / "controller-manager.crt",
        controller_manager_key=directory / "controller-manager.key",
    )
    _write(pki.ca_cert, ca.public_bytes(serialization.Encoding.PEM))
    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving = _leaf(
        ca,
        ca_key,
        serving_key,
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        ExtendedKeyUsageOID.SERVER_AUTH,
        x509.SubjectAlternativeName(
            [
                x509.DNSName("localhost"),
                x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")),
            ]
        ),
    )
    _write_pair(pki.serving_cert, pki.serving_key, serving, serving_key)
    admin_key = ec.generate_private_key(ec.SECP256R1())
    admin_name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            x509.NameAttribute(NameOID.COMMON_NAME, "envtest-admin"),
        ]
    )
    admin = _leaf(ca, ca_key, admin_key, admin_name, ExtendedKeyUsageOID.CLIENT_AUTH, None)
    _write_pair(pki.admin_cert, pki.admin_key, admin, admin_key)
    # The user RBAC's bootstrap policy binds to system:kube-controller-manager: the
    # controller manager gets exactly the rights it has in a real cluster, no more.
    kcm_key = ec.generate_private_key(ec.SECP256R1())
    kcm_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CONTROLLER_MANAGER_USER)])
    kcm = _leaf(ca, ca_key, kcm_key, kcm_name, ExtendedKeyUsageOID.CLIENT_AUTH, None)
    _write_pair(pki.controller_manager_cert, pki.controller_manager_key, kcm, kcm_key)
    sa_key = ec.generate_private_key(ec.SECP256R1())
    _write(pki.sa_signing_key, _private_pem(sa_key))
    public = sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _write(pki.sa_public_key, public)
    return pki


def _ca_certificate(key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "captf-envtest-ca")])
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def _leaf(
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    san: x509.SubjectAlternativeName | None,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if san is not None:
        builder = builder.add_extension(san, critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write_pair(
    cert_path: Path, key_path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> None:
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    _write(key_path, _private_pem(key))


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)
