"""TLS on the native port (tls.enabled, tls.cert, tls.key), with a self-signed certificate
made here by the `cryptography` package."""

import datetime
import ipaddress
import ssl

import pytest
from cassandra.cluster import Cluster, NoHostAvailable
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import cqlwire


@pytest.fixture(scope="module")
def cert_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "ringgate tests")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                       critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path = d / "cert.pem"
    key_path = d / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path, cert.public_bytes(serialization.Encoding.DER)


@pytest.fixture
def tls_server(server_factory, cert_files):
    cert_path, key_path, _ = cert_files
    config = f'[tls]\nenabled = true\ncert = "{cert_path}"\nkey = "{key_path}"\n'
    return server_factory(config=config)


def unverified_context():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def test_driver_connects_over_tls(tls_server, cluster_factory):
    c = cluster_factory(tls_server, ssl_context=unverified_context())
    s = c.connect()
    assert c.protocol_version in (4, 5)
    assert s.execute("SELECT key FROM system.local").one().key == "local"
    s.execute("CREATE KEYSPACE tlsks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE tlsks.t (id int PRIMARY KEY, v text)")
    big = "tls " * 100_000  # a value larger than one TLS record and one v5 segment
    ins = s.prepare("INSERT INTO tlsks.t (id, v) VALUES (?, ?)")
    for i in range(20):
        s.execute(ins, (i, f"{i}{big}"))
    got = {r.id: r.v for r in s.execute("SELECT id, v FROM tlsks.t")}
    assert got == {i: f"{i}{big}" for i in range(20)}


def test_driver_verifies_the_configured_certificate(tls_server, cluster_factory, cert_files):
    cert_path, _, cert_der = cert_files
    ctx = ssl.create_default_context(cafile=str(cert_path))  # verification and hostname check on
    c = cluster_factory(tls_server, ssl_context=ctx)
    assert c.connect().execute("SELECT key FROM system.local").one().key == "local"
    # the raw handshake presents exactly that certificate
    with cqlwire.Conn(tls_server.host, tls_server.port, ssl_context=unverified_context()) as conn:
        assert conn.sock.getpeercert(binary_form=True) == cert_der
        assert "CQL_VERSION" in conn.options()


def test_plaintext_client_is_refused(tls_server, cluster_factory):
    c = Cluster(contact_points=[tls_server.host], port=tls_server.port, connect_timeout=5)
    try:
        with pytest.raises(NoHostAvailable):
            c.connect()
    finally:
        c.shutdown()
    # the server is unharmed
    assert tls_server.running()
    s = cluster_factory(tls_server, ssl_context=unverified_context()).connect()
    assert s.execute("SELECT key FROM system.local").one().key == "local"


def test_cqlsh_over_tls(tls_server, cqlsh):
    r = cqlsh(["--ssl", "-e", "SELECT key, cluster_name FROM system.local"], server=tls_server,
              env={"SSL_VALIDATE": "false"})
    assert r.returncode == 0, r
    assert "(1 rows)" in r.stdout, r
    # the same with validation turned off in cqlshrc instead of the environment. (cqlsh 6.2.2
    # with driver 3.30 builds a PROTOCOL_TLS context that never verifies, so validation *on*
    # would prove nothing; the driver test above verifies the certificate instead.)
    r = cqlsh(["--ssl", "-e", "SELECT key FROM system.local"], server=tls_server,
              cqlshrc="[ssl]\nvalidate = false\n")
    assert r.returncode == 0, r
    assert "(1 rows)" in r.stdout, r

