"""What one request can make the server do is bounded: errors quote at most a short piece of a
huge input, and IN restrictions may not combine to more than 10,000 keys (Cassandra's
in_select_cartesian_product guardrail)."""

import pytest
from cassandra import InvalidRequest
from cassandra.protocol import SyntaxException

from rgtest import error_text

HUGE = "x" * (10 << 20)


def server_message(exc):
    """The server's message alone (the driver wraps some in 'Error from server: ... message="..."')."""
    text = error_text(exc)
    return text.split('message="', 1)[1][:-1] if 'message="' in text else text


def assert_alive(session):
    assert session.execute("SELECT key FROM system.local").one().key == "local"


@pytest.mark.parametrize("query", [
    f"SELECT * FROM system.{HUGE}",
    f'SELECT * FROM system."{HUGE}"',
    f"SELECT {HUGE} FROM system.local",
    f"SELECT * FROM system.local WHERE {HUGE} = = 1",
    f"SELECT * FROM system.local WHERE key = '{HUGE}' = 1",
    f"SELECT * FROM system.local WHERE key = '{HUGE}{HUGE}' = 1",
])
def test_errors_quote_a_huge_input_only_in_part(session, query):
    with pytest.raises((InvalidRequest, SyntaxException)) as e:
        session.execute(query, timeout=60)
    msg = server_message(e.value)
    assert 0 < len(msg) <= 4096 + 3, len(msg)
    assert "xxxx" in msg and "..." in msg, msg[:300]
    assert_alive(session)


@pytest.fixture
def three_part_key(session, keyspace):
    session.execute(f"CREATE TABLE {keyspace}.k3 (a int, b int, c int, d int, v int, "
                    f"PRIMARY KEY ((a, b, c), d))")
    session.execute(f"INSERT INTO {keyspace}.k3 (a, b, c, d, v) VALUES (1, 2, 3, 4, 5)")
    return f"{keyspace}.k3"


def test_in_product_beyond_the_guardrail_is_refused(session, three_part_key):
    hundred = list(range(100))
    stmt = session.prepare(f"SELECT v FROM {three_part_key} WHERE a IN ? AND b IN ? AND c IN ?")
    with pytest.raises(InvalidRequest) as e:
        session.execute(stmt, (hundred, hundred, hundred))
    assert server_message(e.value) == (
        "Guardrail in_select_cartesian_product violated: Aborting query because the cartesian "
        "product of the IN restrictions on partition key produces 1000000 values, this exceeds "
        "fail threshold of 10000.")
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"UPDATE {three_part_key} SET v = 1 WHERE a = 1 AND b = 2 AND c = 3 "
                        f"AND d IN ({', '.join(map(str, range(10_001)))})")
    assert "IN restrictions on clustering key produces 10001 values" in error_text(e.value)
    # Within the guardrail it works.
    rows = session.execute(stmt, (hundred, hundred, [3])).all()
    assert [r.v for r in rows] == [5]
