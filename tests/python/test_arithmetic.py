"""Arithmetic as Cassandra 5.0 evaluates it (OperationFcts): + - * / % and unary minus on every
numeric type in selections, INSERT/UPDATE values and WHERE terms, literals and bind markers;
result type = the widest operand type (floating point wins; varint/decimal when unbounded);
Java wraparound for fixed-width integers; division by zero fails (FunctionFailure) with
Cassandra's message; timestamp/date +/- duration. Expected values are from Cassandra's own
OperationFctsTest where it has them."""

import datetime
import math
import struct
from decimal import Decimal

import pytest
from cassandra import FunctionFailure, InvalidRequest
from cassandra.util import Date

from rgtest import error_text


@pytest.fixture
def nums(session, keyspace):
    t = f"{keyspace}.nums"
    session.execute(f"CREATE TABLE {t} (a tinyint, b smallint, c int, d bigint, e float, f double, "
                    f"g varint, h decimal, PRIMARY KEY (a, b))")
    session.execute(f"INSERT INTO {t} (a, b, c, d, e, f, g, h) VALUES (1, 2, 3, 4, 5.5, 6.5, 7, 8.5)")
    return t


def result(session, q):
    rs = session.execute(q)
    row = rs.one()
    types = [t.typename for t in rs.response_future._col_types] if rs.response_future._col_types else None
    return tuple(row), types, list(rs.column_names)


def test_result_types_and_values(session, nums):
    row, types, names = result(
        session, f"SELECT a + a, b + a, c + a, d + a, e + a, f + a, g + a, h + a FROM {nums} WHERE a = 1 AND b = 2")
    assert names == ["a + a", "b + a", "c + a", "d + a", "e + a", "f + a", "g + a", "h + a"]
    assert types == ["tinyint", "smallint", "int", "bigint", "float", "double", "varint", "decimal"]
    assert row == (2, 3, 4, 5, 6.5, 7.5, 8, Decimal("9.5"))
    row, types, _ = result(
        session, f"SELECT a + e, d + e, g + e, h + e, c * h, a / c, e / c, h / c, c % b, e % c FROM {nums} WHERE a = 1 AND b = 2")
    assert types == ["float", "double", "decimal", "decimal", "decimal", "int", "float", "decimal", "int", "float"]
    assert row[:4] == (6.5, 9.5, Decimal("12.5"), Decimal("14.0"))
    assert str(row[4]) == "25.50"  # 3 as Java's BigDecimal.valueOf(3.0) times 8.5
    assert row[5] == 0  # integer division truncates
    assert row[6] == pytest.approx(1.8333334, rel=1e-7)
    assert str(row[7]) == "2.83333333333333333333333333333333"
    assert row[8:] == (1, 2.5)
    # negation, literals (int preferred for integers, double for floats)
    row, types, names = result(session, f"SELECT -a, -h, a + 1, e + 1, a + 5.5, 100 + 50, g * 2 FROM {nums} WHERE a = 1 AND b = 2")
    assert names == ["-a", "-h", "a + 1", "e + 1", "a + 5.5", "100 + 50", "g * 2"]
    assert types == ["tinyint", "decimal", "int", "float", "double", "int", "varint"]
    assert row == (-1, Decimal("-8.5"), 2, 6.5, 6.5, 150, 14)
    # a null operand gives null
    session.execute(f"UPDATE {nums} SET d = null WHERE a = 1 AND b = 2")
    row, _, _ = result(session, f"SELECT d + 1, -d, c + d FROM {nums} WHERE a = 1 AND b = 2")
    assert row == (None, None, None)


def test_fixed_width_integers_wrap(session, keyspace):
    t = f"{keyspace}.w"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, i int, b bigint, s smallint, y tinyint)")
    session.execute(f"INSERT INTO {t} (k, i, b, s, y) VALUES (0, 2147483647, -9223372036854775808, 32767, -128)")
    row, types, _ = result(session, f"SELECT i + i, b - b, b * b, b / b, s + s, y * y, -y, -b, b / -1 FROM {t} WHERE k = 0")
    assert types == ["int", "bigint", "bigint", "bigint", "smallint", "tinyint", "tinyint", "bigint", "bigint"]
    assert row == (-2, 0, 0, 1, -2, 0, -128, -2**63, -2**63)


@pytest.mark.parametrize("expr, message", [
    ("c / 0", "the operation 'int / int' failed: / by zero"),
    ("c % 0", "the operation 'int % int' failed: / by zero"),
    ("g / 0", "the operation 'varint / int' failed: BigInteger divide by zero"),
    ("h / 0", "the operation 'decimal / int' failed: Division by zero"),
])
def test_division_by_zero(session, nums, expr, message):
    with pytest.raises(FunctionFailure) as e:
        session.execute(f"SELECT {expr} FROM {nums} WHERE a = 1 AND b = 2")
    assert error_text(e.value) == message or message in str(e.value)


def test_floating_division_by_zero_is_infinite(session, nums):
    row, _, _ = result(session, f"SELECT e / 0, f / 0, f % 0, -f / 0 FROM {nums} WHERE a = 1 AND b = 2")
    assert row[0] == math.inf and row[1] == math.inf and math.isnan(row[2]) and row[3] == -math.inf


@pytest.mark.parametrize("expr, message", [
    ("1 + ?", "Ambiguous '+' operation with args 1 and ?: use type hint to disambiguate, example '(int) ?'"),
    ("a + v", "the '+' operation is not supported between a and v"),
    ("v + 1", "the '+' operation is not supported between v and 1"),
])
def test_unsupported_operands(session, keyspace, expr, message):
    session.execute(f"CREATE TABLE {keyspace}.u (a int PRIMARY KEY, v text)")
    with pytest.raises(InvalidRequest) as e:
        if "?" in expr:
            session.prepare(f"SELECT {expr} FROM {keyspace}.u")
        else:
            session.execute(f"SELECT {expr} FROM {keyspace}.u")
    assert message in str(e.value)


def test_terms_in_writes_and_where(session, keyspace):
    t = f"{keyspace}.tw"
    session.execute(f"CREATE TABLE {t} (k int, c tinyint, i int, b bigint, h decimal, f float, "
                    f"PRIMARY KEY (k, c))")
    session.execute(f"INSERT INTO {t} (k, c, i, b, h, f) VALUES (1 + 1, 1 + 1, 2147483647 + 1, 10 * 3, 1.5 + 1, -(2.5))")
    r = session.execute(f"SELECT k, c, i, b, h, f FROM {t} WHERE k = 4 - 2 AND c = 2 * 1").one()
    assert tuple(r) == (2, 2, -2147483648, 30, Decimal("2.5"), -2.5)
    session.execute(f"UPDATE {t} SET b = 7 % 4, i = -(5) WHERE k = 2 AND c = 1 + 1")
    r = session.execute(f"SELECT i, b FROM {t} WHERE k = 2 AND c = 2").one()
    assert tuple(r) == (-5, 3)
    # bind markers take the receiver's type
    ins = session.prepare(f"INSERT INTO {t} (k, c, b) VALUES (?, ? + 1, ? * 2)")
    assert [c.type.typename for c in ins.column_metadata] == ["int", "tinyint", "bigint"]
    session.execute(ins, [3, 4, 2**40])
    assert tuple(session.execute(f"SELECT c, b FROM {t} WHERE k = 3").one()) == (5, 2**41)
    sel = session.prepare(f"SELECT b FROM {t} WHERE k = ? + 1 AND c = ?")
    assert [c.type.typename for c in sel.column_metadata] == ["int", "tinyint"]
    assert session.execute(sel, [2, 5]).one().b == 2**41
    # division by zero in a value fails the write; nothing is written
    with pytest.raises(FunctionFailure):
        session.execute(f"INSERT INTO {t} (k, c, i) VALUES (9, 1, 1 / 0)")
    assert session.execute(f"SELECT * FROM {t} WHERE k = 9").one() is None
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"INSERT INTO {t} (k, c, i) VALUES (9, 1, 1 + 'x')")


def test_temporal_arithmetic(session, keyspace):
    t = f"{keyspace}.tm"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, ts timestamp, d date)")
    session.execute(f"INSERT INTO {t} (k, ts, d) VALUES (0, '2024-01-31 10:00:00+0000' + 1mo, '2024-03-01' - 1d)")
    r = session.execute(f"SELECT ts, d, ts - 2h, ts + 1d2h, d + 1y FROM {t} WHERE k = 0").one()
    assert r[0] == datetime.datetime(2024, 2, 29, 10, 0)
    assert r[1] == Date(datetime.date(2024, 2, 29))
    assert r[2] == datetime.datetime(2024, 2, 29, 8, 0)
    assert r[3] == datetime.datetime(2024, 3, 1, 12, 0)
    assert r[4] == Date(datetime.date(2025, 2, 28))
    # current time arithmetic in a write
    session.execute(f"INSERT INTO {t} (k, ts, d) VALUES (1, currentTimestamp() - 2h, currentDate() + 1d)")
    r = session.execute(f"SELECT ts, d FROM {t} WHERE k = 1").one()
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    assert abs((now - datetime.timedelta(hours=2) - r.ts).total_seconds()) < 60
    assert r.d.date() in (now.date() + datetime.timedelta(days=1), now.date() + datetime.timedelta(days=2))
    # and in a WHERE term
    got = [r.k for r in session.execute(f"SELECT k FROM {t} WHERE ts > currentTimestamp() - 3h ALLOW FILTERING")]
    assert got == [1]
    with pytest.raises(FunctionFailure) as e:
        session.execute(f"SELECT d + 1h FROM {t} WHERE k = 0")
    assert "The duration must have a day precision. Was: 1h" in str(e.value)
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"SELECT ts * 1h FROM {t} WHERE k = 0")
    assert "the '*' operation is not supported between ts and 1h" in str(e.value)


def test_string_concatenation(session, keyspace):
    t = f"{keyspace}.sc"
    session.execute(f"CREATE TABLE {t} (a text, b ascii, c text, PRIMARY KEY (a, b, c))")
    session.execute(f"INSERT INTO {t} (a, b, c) VALUES ('जॉन', 'Doe', 'जॉन' + ' ' + 'Doe')")
    row, types, names = result(
        session, f"SELECT a + ' ' + a, a + b, b + b, c FROM {t} WHERE a = 'जॉन' AND b = 'Doe' AND c = 'जॉन Doe'")
    assert names == ["a + ' ' + a", "a + b", "b + b", "c"]
    assert types == ["varchar", "varchar", "ascii", "varchar"]
    assert row == ("जॉन जॉन", "जॉनDoe", "DoeDoe", "जॉन Doe")
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"SELECT a - b FROM {t}")
    assert "the '-' operation is not supported between a and b" in str(e.value)
