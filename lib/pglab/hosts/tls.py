"""TLS for a run: a certificate authority made for it, one server certificate per host.

Why: TLS costs throughput (handshakes, encryption on every byte of WAL and results), so a deployment
says whether it is on, and the run records it. When it is on, every client, daemon and replication
connection uses ``sslmode=verify-full``: a benchmark that crosses a network must know it talks to its
own server, not to whatever answers at that address. The CA and keys are generated here, per run (P-256
keys, with ``cryptography``; nothing is downloaded); the keys are written through ``Host.write_text``
(stdin, never a command line), never appear in a repr, and go with the run's workspace.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass, field

from pglab.hosts.base import Host

VALID_DAYS = 30


def _key() -> object:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: object) -> str:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,  # type: ignore[attr-defined]
                             serialization.NoEncryption()).decode()


@dataclass
class RunCA:
    """The run's certificate authority. ``key_pem`` is never shown (repr) and never leaves this process
    except into files of mode 0600 that ``install_*`` writes."""

    cert_pem: str
    key_pem: str = field(repr=False)

    @classmethod
    def create(cls, run_label: str) -> RunCA:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import NameOID

        key = _key()
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"pglab run CA {run_label}"[:64])])
        now = dt.datetime.now(dt.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                .public_key(key.public_key())  # type: ignore[attr-defined]
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=VALID_DAYS))
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                             key_encipherment=False, data_encipherment=False, key_agreement=False,
                                             key_cert_sign=True, crl_sign=True, encipher_only=False,
                                             decipher_only=False), critical=True)
                .sign(key, hashes.SHA256()))  # type: ignore[arg-type]
        return cls(cert.public_bytes(serialization.Encoding.PEM).decode(), _pem_key(key))

    def server_cert(self, addresses: list[str], name: str) -> tuple[str, str]:
        """(certificate PEM, key PEM) for a server reached at ``addresses`` (IP SANs: verify-full checks them)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        ca_cert = x509.load_pem_x509_certificate(self.cert_pem.encode())
        ca_key = serialization.load_pem_private_key(self.key_pem.encode(), password=None)
        key = _key()
        sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
        if "127.0.0.1" in addresses:
            sans.append(x509.DNSName("localhost"))
        now = dt.datetime.now(dt.timezone.utc)
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name[:64])]))
                .issuer_name(ca_cert.subject).public_key(key.public_key())  # type: ignore[attr-defined]
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=VALID_DAYS))
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256()))  # type: ignore[arg-type]
        return cert.public_bytes(serialization.Encoding.PEM).decode(), _pem_key(key)


def install_server(host: Host, directory: str, ca: RunCA, addresses: list[str], owner: str) -> dict[str, str]:
    """Certificate, key (0600, owned by the server user ``owner``: PostgreSQL refuses a key others can
    read) and the CA in ``directory`` on ``host``; returns the server settings that use them."""
    cert, key = ca.server_cert(addresses, f"pglab server {host.name}")
    host.mkdir(directory, 0o755, owner=owner)
    host.write_text(f"{directory}/server.crt", cert, 0o644, owner=owner)
    host.write_text(f"{directory}/server.key", key, 0o600, owner=owner)
    host.write_text(f"{directory}/root.crt", ca.cert_pem, 0o644, owner=owner)
    return {"ssl": "on", "ssl_cert_file": f"{directory}/server.crt", "ssl_key_file": f"{directory}/server.key",
            "ssl_ca_file": f"{directory}/root.crt", "ssl_min_protocol_version": "TLSv1.2"}


def install_client(host: Host, directory: str, ca: RunCA, owner: str | None = None) -> str:
    """The run's CA certificate for clients on ``host`` (servers' own connections included); its path."""
    host.mkdir(directory, 0o755, owner=owner)
    host.write_text(f"{directory}/root.crt", ca.cert_pem, 0o644, owner=owner)
    return f"{directory}/root.crt"


def client_params(root_crt_path: str) -> dict[str, str]:
    """libpq keywords for verify-full against the run's CA (for psycopg or a conninfo string)."""
    return {"sslmode": "verify-full", "sslrootcert": root_crt_path}
