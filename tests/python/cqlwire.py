"""A tiny hand-rolled CQL native protocol v4 client, for tests that must send exactly
the bytes they want (bad frames, pre-auth requests, unsupported versions).

Only what the tests need: frame building, reading frames off a socket, and parsing the
few response bodies they look at. Spec: doc/native_protocol_v4.spec in apache/cassandra.
"""

import socket
import struct
import time
from typing import NamedTuple

# Opcodes
ERROR = 0x00
STARTUP = 0x01
READY = 0x02
AUTHENTICATE = 0x03
OPTIONS = 0x05
SUPPORTED = 0x06
QUERY = 0x07
RESULT = 0x08
PREPARE = 0x09
EXECUTE = 0x0A
REGISTER = 0x0B
EVENT = 0x0C
BATCH = 0x0D
AUTH_CHALLENGE = 0x0E
AUTH_RESPONSE = 0x0F
AUTH_SUCCESS = 0x10

OPCODE_NAMES = {
    ERROR: "ERROR", STARTUP: "STARTUP", READY: "READY", AUTHENTICATE: "AUTHENTICATE",
    OPTIONS: "OPTIONS", SUPPORTED: "SUPPORTED", QUERY: "QUERY", RESULT: "RESULT",
    PREPARE: "PREPARE", EXECUTE: "EXECUTE", REGISTER: "REGISTER", EVENT: "EVENT", BATCH: "BATCH",
    AUTH_CHALLENGE: "AUTH_CHALLENGE", AUTH_RESPONSE: "AUTH_RESPONSE", AUTH_SUCCESS: "AUTH_SUCCESS",
}

# Error codes
ERR_SERVER = 0x0000
ERR_PROTOCOL = 0x000A
ERR_BAD_CREDENTIALS = 0x0100
ERR_SYNTAX = 0x2000
ERR_UNAUTHORIZED = 0x2100
ERR_INVALID = 0x2200

# RESULT kinds
RESULT_VOID = 1
RESULT_ROWS = 2
RESULT_SET_KEYSPACE = 3
RESULT_PREPARED = 4
RESULT_SCHEMA_CHANGE = 5

CONSISTENCY_ONE = 0x0001

HEADER_LEN = 9


class Frame(NamedTuple):
    version: int
    flags: int
    stream: int
    opcode: int
    body: bytes
    # The custom payload (flag 0x04) as a dict, or None.
    payload: dict = None

    @property
    def opname(self):
        return OPCODE_NAMES.get(self.opcode, hex(self.opcode))

    def error(self):
        """(code, message) of an ERROR frame."""
        assert self.opcode == ERROR, f"expected an ERROR frame, got {self.opname}: {self.body[:200]!r}"
        return parse_error(self.body)

    def __repr__(self):
        return (f"Frame(version={self.version:#04x}, flags={self.flags:#04x}, stream={self.stream}, "
                f"opcode={self.opname}, body={self.body[:120]!r}{'...' if len(self.body) > 120 else ''})")


# ---------------------------------------------------------------------------- encoding

def header(opcode, length, stream=0, version=4, flags=0):
    """A 9-byte v3+ frame header. `length` is written as given (may be a lie)."""
    return struct.pack(">BBhBi", version, flags, stream, opcode, length)


def frame(opcode, body=b"", stream=0, version=4, flags=0):
    return header(opcode, len(body), stream=stream, version=version, flags=flags) + body


def short(n):
    return struct.pack(">H", n)


def string(s):
    b = s.encode("utf-8")
    return short(len(b)) + b


def long_string(s):
    b = s.encode("utf-8")
    return struct.pack(">i", len(b)) + b


def string_map(d):
    out = short(len(d))
    for k, v in d.items():
        out += string(k) + string(v)
    return out


def bytes_(b):
    if b is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(b)) + b


def startup_body(cql_version="3.0.0", **options):
    opts = {"CQL_VERSION": cql_version}
    opts.update(options)
    return string_map(opts)


def query_body(query, consistency=CONSISTENCY_ONE, flags=0):
    return long_string(query) + short(consistency) + bytes([flags])


def prepare_body(query):
    return long_string(query)


def execute_body(prepared_id, values, consistency=CONSISTENCY_ONE):
    """An EXECUTE body: the prepared id, the consistency, flags VALUES, the values as [bytes]."""
    body = short(len(prepared_id)) + prepared_id + short(consistency) + bytes([0x01])
    return body + short(len(values)) + b"".join(bytes_(v) for v in values)


def auth_response_body(user, password):
    token = b"\x00" + user.encode() + b"\x00" + password.encode()
    return bytes_(token)


# ---------------------------------------------------------------------------- decoding

class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError(f"body too short: need {n} bytes at {self.pos}, have {len(self.data)}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int(self):
        return struct.unpack(">i", self.take(4))[0]

    def short(self):
        return struct.unpack(">H", self.take(2))[0]

    def string(self):
        return self.take(self.short()).decode("utf-8")

    def short_bytes(self):
        return self.take(self.short())

    def bytes(self):
        n = self.int()
        return None if n < 0 else self.take(n)

    def string_list(self):
        return [self.string() for _ in range(self.short())]

    def string_multimap(self):
        return {self.string(): self.string_list() for _ in range(self.short())}


def parse_error(body):
    r = Reader(body)
    code = r.int()
    message = r.string()
    return code, message


def parse_supported(body):
    return Reader(body).string_multimap()


def parse_authenticate(body):
    return Reader(body).string()


def split_extras(flags, body):
    """(custom payload dict or None, message body) of a response: the body without the tracing
    id (flag 0x02), warnings (0x08) and custom payload (0x04) that precede it, in that order.
    (Compression is never negotiated by this client.)"""
    r = Reader(body)
    if flags & 0x02:
        r.take(16)
    if flags & 0x08:
        r.string_list()
    payload = None
    if flags & 0x04:
        payload = {}
        for _ in range(r.short()):
            k = r.string()
            payload[k] = r.bytes()
    return payload, body[r.pos:]


def strip_extras(flags, body):
    """The message body of a response without its tracing id, warnings and custom payload."""
    return split_extras(flags, body)[1]


def result_kind(body):
    return Reader(body).int()


# ---------------------------------------------------------------------------- connection

class Closed(Exception):
    """The peer closed the connection (EOF or reset)."""


class Conn:
    def __init__(self, host, port, timeout=10.0, ssl_context=None):
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            sock = ssl_context.wrap_socket(sock, server_hostname=host)
        self.sock = sock
        self.timeout = timeout

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        self.sock.sendall(data)

    def send_maybe_refused(self, data):
        """Send bytes the server may reject by closing the connection mid-way (that is then
        not an error here: the caller checks how the server reacted)."""
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def send_frame(self, opcode, body=b"", stream=0, version=4, flags=0):
        self.send(frame(opcode, body, stream=stream, version=version, flags=flags))

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except (ConnectionResetError, BrokenPipeError) as e:
                raise Closed(f"connection reset after {len(buf)}/{n} bytes: {e}") from e
            if not chunk:
                raise Closed(f"EOF after {len(buf)}/{n} bytes")
            buf += chunk
        return buf

    def read_frame(self):
        """The next frame (events on stream -1 included). Raises Closed on EOF/reset and
        socket.timeout if nothing complete arrives within the timeout."""
        version, flags, stream, opcode, length = struct.unpack(">BBhBi", self._recv_exact(HEADER_LEN))
        assert 0 <= length <= 256 * 1024 * 1024, f"response frame declares body length {length}"
        payload, body = split_extras(flags, self._recv_exact(length))
        return Frame(version, flags, stream, opcode, body, payload)

    def read_response(self, stream):
        """The next frame on `stream`, skipping server-pushed events."""
        while True:
            f = self.read_frame()
            if f.stream == -1 and f.opcode == EVENT:
                continue
            assert f.stream == stream, f"response on stream {f.stream}, expected {stream}: {f!r}"
            return f

    def request(self, opcode, body=b"", stream=1, version=4):
        self.send_frame(opcode, body, stream=stream, version=version)
        return self.read_response(stream)

    def options(self, stream=1):
        f = self.request(OPTIONS, stream=stream)
        assert f.opcode == SUPPORTED, f"OPTIONS answered with {f!r}"
        return parse_supported(f.body)

    def startup(self, stream=1, **options):
        return self.request(STARTUP, startup_body(**options), stream=stream)

    def query(self, cql, stream=1):
        return self.request(QUERY, query_body(cql), stream=stream)

    def prepare(self, cql, stream=1):
        return self.request(PREPARE, prepare_body(cql), stream=stream)

    def prepared_id(self, cql, stream=1):
        """PREPAREs `cql` and returns its id."""
        f = self.prepare(cql, stream=stream)
        assert f.opcode == RESULT, f"PREPARE answered with {f!r}"
        r = Reader(f.body)
        assert r.int() == RESULT_PREPARED
        return r.short_bytes()

    def wait_closed(self, timeout=10.0):
        """Read until the server closes the connection; return the frames seen before that.
        Fails (AssertionError) if the connection is still open after `timeout` seconds."""
        frames = []
        deadline = time.monotonic() + timeout
        buf = b""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"server did not close the connection within {timeout}s; "
                    f"frames so far: {frames!r}, pending bytes: {buf[:64]!r}")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return frames
            except socket.timeout:
                continue
            if not chunk:
                return frames
            buf += chunk
            while len(buf) >= HEADER_LEN:
                version, flags, stream, opcode, length = struct.unpack(">BBhBi", buf[:HEADER_LEN])
                if len(buf) < HEADER_LEN + length:
                    break
                frames.append(Frame(version, flags, stream, opcode,
                                    strip_extras(flags, buf[HEADER_LEN:HEADER_LEN + length])))
                buf = buf[HEADER_LEN + length:]


def ready_connection(host, port, timeout=10.0, ssl_context=None, user=None, password=None):
    """A connection through OPTIONS + STARTUP (+ PLAIN auth if user is given), ready for QUERY."""
    c = Conn(host, port, timeout=timeout, ssl_context=ssl_context)
    c.options()
    f = c.startup()
    if f.opcode == AUTHENTICATE:
        assert user is not None, "server asked for authentication but no credentials were given"
        f = c.request(AUTH_RESPONSE, auth_response_body(user, password))
        assert f.opcode == AUTH_SUCCESS, f"AUTH_RESPONSE answered with {f!r}"
    else:
        assert f.opcode == READY, f"STARTUP answered with {f!r}"
    return c


def assert_server_healthy(host, port, ssl_context=None, user=None, password=None):
    """A brand-new connection can handshake and run a query against system.local."""
    with ready_connection(host, port, ssl_context=ssl_context, user=user, password=password) as c:
        f = c.query("SELECT release_version FROM system.local WHERE key = 'local'", stream=7)
        assert f.opcode == RESULT, f"query on a fresh connection answered with {f!r}"
        assert result_kind(f.body) == RESULT_ROWS

