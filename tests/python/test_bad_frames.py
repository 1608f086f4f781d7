"""Malformed or hostile input on raw sockets: the server answers with protocol errors or
closes that one connection, and never stops serving other connections."""

import random
import struct

import pytest

import cqlwire
from cqlwire import Conn, assert_server_healthy, ready_connection

TIMEOUT = 10.0


@pytest.fixture
def healthy(server):
    """Call to check the server is alive and serves a brand-new connection."""
    def check():
        assert server.running(), f"the server process died (exit code {server.proc.returncode})"
        assert_server_healthy(server.host, server.port)
    return check


def expect_protocol_error_or_close(conn, timeout=TIMEOUT):
    """The server must either answer with a protocol ERROR or close the connection, within
    `timeout` seconds. Returns the ERROR frames received (possibly none)."""
    frames = conn.wait_closed(timeout=timeout)
    for f in frames:
        assert f.opcode == cqlwire.ERROR, f"expected only ERROR frames before the close, got {f!r}"
        code, _ = f.error()
        assert code == cqlwire.ERR_PROTOCOL, f"expected a protocol error (0x000A), got {code:#06x}"
    return frames


def test_options_then_startup_is_ready(server):
    """The baseline the other tests rely on: OPTIONS -> SUPPORTED, STARTUP -> READY."""
    with Conn(server.host, server.port, timeout=TIMEOUT) as c:
        supported = c.options(stream=3)
        assert "CQL_VERSION" in supported and supported["CQL_VERSION"]
        assert "COMPRESSION" in supported
        assert not any(k.startswith("SCYLLA") for k in supported), "SCYLLA_* keys switch drivers to shard-aware mode"
        f = c.startup(stream=4, cql_version=supported["CQL_VERSION"][0])
        assert f.opcode == cqlwire.READY
        assert f.version == 0x84
        f = c.query("SELECT key FROM system.local", stream=300)
        assert f.opcode == cqlwire.RESULT and f.stream == 300


@pytest.mark.parametrize("opcode", [0x04, 0x08, 0x11, 0x42, 0x7F, 0xFF])
def test_unknown_opcode_gets_protocol_error(server, healthy, opcode):
    with Conn(server.host, server.port, timeout=TIMEOUT) as c:
        c.send_frame(opcode, b"", stream=17)
        f = c.read_frame()
        assert f.opcode == cqlwire.ERROR, f
        assert f.stream == 17
        assert f.version == 0x84
        code, msg = f.error()
        assert code == cqlwire.ERR_PROTOCOL, (hex(code), msg)
    healthy()


def test_unknown_opcode_after_startup(server, healthy):
    with ready_connection(server.host, server.port, timeout=TIMEOUT) as c:
        c.send_frame(0x7E, b"\x00\x01", stream=23)
        f = c.read_response(23)
        assert f.opcode == cqlwire.ERROR
        assert f.error()[0] == cqlwire.ERR_PROTOCOL
    healthy()


@pytest.mark.parametrize("length", [0x7FFFFFFF, 256 * 1024 * 1024 + 1, -1, -0x80000000])
def test_huge_or_negative_body_length(server, healthy, length):
    with Conn(server.host, server.port, timeout=TIMEOUT) as c:
        # the header and a little of the promised body
        c.send_maybe_refused(cqlwire.header(cqlwire.QUERY, length, stream=5) + b"SELECT")
        frames = expect_protocol_error_or_close(c)
        for f in frames:
            assert f.stream in (5, 0, -1)
    healthy()


def test_frame_over_configured_limit(server_factory):
    srv = server_factory(settings={"limits.max_frame_bytes": 65536})
    # a frame under the limit works
    with ready_connection(srv.host, srv.port, timeout=TIMEOUT) as c:
        q = "SELECT key FROM system.local WHERE key = '" + "x" * 40000 + "'"
        f = c.query(q, stream=2)
        assert f.opcode == cqlwire.RESULT, f
    # one declaring more than the limit is refused without waiting for the body
    with ready_connection(srv.host, srv.port, timeout=TIMEOUT) as c:
        c.send_maybe_refused(cqlwire.header(cqlwire.QUERY, 2 * 1024 * 1024, stream=9) + b"SELECT")
        expect_protocol_error_or_close(c)
    assert srv.running()
    assert_server_healthy(srv.host, srv.port)


GARBAGE = {
    "http": b"GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8\r\n\r\n",
    "tls-hello": bytes.fromhex("16030100a5010000a10303") + bytes(range(32)) * 5,
    "random": b"\xff" + random.Random(1).randbytes(4095),
    "zeros": b"\x00" * 512,
    "response-bit": cqlwire.frame(cqlwire.OPTIONS, version=0x84) + b"\x84" * 64,
}


@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_garbage_closes_only_that_connection(server, healthy, name):
    # an established connection, ready before the garbage arrives on another one
    bystander = ready_connection(server.host, server.port, timeout=TIMEOUT)
    try:
        with Conn(server.host, server.port, timeout=TIMEOUT) as c:
            c.send_maybe_refused(GARBAGE[name])
            expect_protocol_error_or_close(c)
        f = bystander.query("SELECT key FROM system.local", stream=11)
        assert f.opcode == cqlwire.RESULT
    finally:
        bystander.close()
    healthy()


@pytest.mark.parametrize("version", [0x42, 0x41, 0x06, 0x07, 0x3F])
def test_unsupported_version_gets_error_the_driver_understands(server, healthy, version):
    with Conn(server.host, server.port, timeout=TIMEOUT) as c:
        c.send(cqlwire.header(cqlwire.OPTIONS, 0, stream=3, version=version))
        f = c.read_frame()
        assert f.opcode == cqlwire.ERROR, f
        assert f.stream == 3, "the error must come on the request's stream"
        assert f.version & 0x80, "a response frame"
        assert (f.version & 0x7F) in (3, 4, 5), f"answer with a version the client knows, got {f.version:#04x}"
        code, msg = f.error()
        assert code == cqlwire.ERR_PROTOCOL
        # the Python driver only downgrades on this exact lower-case phrase
        assert "unsupported protocol version" in msg, msg
    healthy()


def test_v5_options_is_answered(server, healthy):
    """Whether or not v5 is offered, a v5 OPTIONS gets an answer (SUPPORTED, or the
    'unsupported protocol version' error that makes drivers fall back to v4)."""
    with Conn(server.host, server.port, timeout=TIMEOUT) as c:
        c.send(cqlwire.header(cqlwire.OPTIONS, 0, stream=0, version=5))
        f = c.read_frame()
        if f.opcode == cqlwire.SUPPORTED:
            assert f.version == 0x85
        else:
            assert f.opcode == cqlwire.ERROR
            code, msg = f.error()
            assert code == cqlwire.ERR_PROTOCOL and "unsupported protocol version" in msg
    healthy()


@pytest.mark.parametrize("cut", [1, 4, 8, 9, 20])
def test_truncated_frame_then_close(server, healthy, cut):
    body = cqlwire.query_body("SELECT key FROM system.local")
    data = cqlwire.frame(cqlwire.QUERY, body, stream=1)
    with Conn(server.host, server.port, timeout=TIMEOUT) as c:
        c.options()
        c.send(data[:cut])
    healthy()


def test_truncated_body_declared_longer_then_close(server, healthy):
    with ready_connection(server.host, server.port, timeout=TIMEOUT) as c:
        c.send(cqlwire.header(cqlwire.QUERY, 1000, stream=1) + b"\x00\x00\x00\x10SELECT")
    healthy()


def test_malformed_bodies(server, healthy):
    """Well-framed requests whose bodies are nonsense get an ERROR (any code), not a crash."""
    cases = [
        (cqlwire.STARTUP, b"\xff\xff"),                          # string map claiming 65535 entries
        (cqlwire.STARTUP, cqlwire.string_map({"CQL_VERSION": "3.0.0", "COMPRESSION": "zstd-unknown"})),
        (cqlwire.QUERY, b"\x7f\xff\xff\xff"),                     # long string longer than the body
        (cqlwire.QUERY, cqlwire.long_string("SELECT key FROM system.local")),  # no consistency/flags
        (cqlwire.QUERY, struct.pack(">i", 3) + b"\xed\xb3\xbf" + b"\x00\x01\x00"),  # invalid UTF-8 query
        (cqlwire.PREPARE, b""),
        (cqlwire.EXECUTE, struct.pack(">H", 16) + b"\x00" * 16 + b"\x00\x01\x00"),  # unknown prepared id
        (cqlwire.REGISTER, struct.pack(">H", 1) + cqlwire.string("NO_SUCH_EVENT")),
    ]
    for i, (opcode, body) in enumerate(cases):
        with Conn(server.host, server.port, timeout=TIMEOUT) as c:
            if opcode != cqlwire.STARTUP:
                assert c.startup().opcode == cqlwire.READY
            c.send_frame(opcode, body, stream=40 + i)
            try:
                f = c.read_response(40 + i)
            except cqlwire.Closed:
                f = None  # closing the connection is acceptable too
            if f is not None:
                assert f.opcode == cqlwire.ERROR, (i, f)
        assert server.running(), f"server died on malformed body case {i}"
    healthy()


def test_many_streams_interleaved(server):
    """Responses carry the request's stream id, even when many are in flight."""
    with ready_connection(server.host, server.port, timeout=TIMEOUT) as c:
        streams = list(range(1, 200)) + [32767, 12345]
        c.send(b"".join(cqlwire.frame(cqlwire.QUERY, cqlwire.query_body("SELECT key FROM system.local"), stream=s)
                        for s in streams))
        seen = []
        while len(seen) < len(streams):
            f = c.read_frame()
            if f.stream == -1:
                continue
            assert f.opcode == cqlwire.RESULT, f
            seen.append(f.stream)
        assert sorted(seen) == sorted(streams)
