//! Tests of the value layer. Expected values come from Cassandra's documented behaviour and
//! sources (messages, formats), from hand derivations of the encodings (VInt, two's
//! complement) and from oracles written independently of the implementation.

use std::cmp::Ordering;
use std::sync::Arc;

use num_bigint::BigInt;
use serde_json::json;

use super::*;
use crate::cql::ast::Literal;
use crate::cql::types::{CqlType, UdtDef};

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

fn udt_point() -> Arc<UdtDef> {
    Arc::new(UdtDef {
        keyspace: "ks".into(),
        name: "point".into(),
        fields: vec![
            ("x".into(), CqlType::Int),
            ("Label".into(), CqlType::Text),
            (
                "tags".into(),
                CqlType::Frozen(Box::new(CqlType::Set(Box::new(CqlType::Text)))),
            ),
        ],
    })
}

fn ty(s: &str) -> CqlType {
    CqlType::parse(s, &|name| (name == "point").then(udt_point)).unwrap()
}

fn int(s: &str) -> Literal {
    Literal::Integer(s.into())
}
fn float(s: &str) -> Literal {
    Literal::Float(s.into())
}
fn string(s: &str) -> Literal {
    Literal::String(s.into())
}

fn lit(t: &str, l: Literal) -> Result<Vec<u8>, ValueError> {
    literal_to_bytes(&ty(t), &l)
}

fn ok(t: &str, l: Literal) -> Vec<u8> {
    lit(t, l.clone()).unwrap_or_else(|e| panic!("{t} {l:?}: {e}"))
}

fn err(t: &str, l: Literal) -> String {
    match lit(t, l.clone()) {
        Ok(v) => panic!("{t} {l:?} should fail, got {v:?}"),
        Err(e) => e.to_string(),
    }
}

fn verr(t: &str, v: &[u8]) -> String {
    validate(&ty(t), v)
        .expect_err(&format!("{t} {v:?} should not validate"))
        .to_string()
}

fn vok(t: &str, v: &[u8]) {
    validate(&ty(t), v).unwrap_or_else(|e| panic!("{t} {v:?}: {e}"));
}

fn hexs(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn i32b(v: i32) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}
fn i64b(v: i64) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

fn key(t: &CqlType, v: &[u8], desc: bool) -> Vec<u8> {
    let mut out = Vec::new();
    encode_key(t, v, desc, &mut out);
    out
}

fn cmp(t: &str, a: &[u8], b: &[u8]) -> Ordering {
    compare(&ty(t), a, b)
}

fn dec(unscaled: i64, scale: i32) -> Vec<u8> {
    let mut v = scale.to_be_bytes().to_vec();
    v.extend(BigInt::from(unscaled).to_signed_bytes_be());
    v
}

// ---------------------------------------------------------------------------------------------
// literals
// ---------------------------------------------------------------------------------------------

#[test]
fn integer_literals_with_ranges() {
    assert_eq!(ok("tinyint", int("-128")), vec![0x80]);
    assert_eq!(ok("tinyint", int("127")), vec![0x7F]);
    assert_eq!(err("tinyint", int("128")), "Unable to make byte from '128'");
    assert_eq!(ok("smallint", int("-32768")), vec![0x80, 0x00]);
    assert_eq!(ok("smallint", int("32767")), vec![0x7F, 0xFF]);
    assert_eq!(
        err("smallint", int("32768")),
        "Unable to make short from '32768'"
    );
    assert_eq!(ok("int", int("-2147483648")), vec![0x80, 0, 0, 0]);
    assert_eq!(ok("int", int("2147483647")), vec![0x7F, 0xFF, 0xFF, 0xFF]);
    assert_eq!(ok("int", int("+7")), i32b(7));
    assert_eq!(
        err("int", int("2147483648")),
        "Unable to make int from '2147483648'"
    );
    assert_eq!(err("int", int("abc")), "Unable to make int from 'abc'");
    assert_eq!(ok("bigint", int("-9223372036854775808")), i64b(i64::MIN));
    assert_eq!(ok("bigint", int("9223372036854775807")), i64b(i64::MAX));
    assert_eq!(
        err("bigint", int("9223372036854775808")),
        "Unable to make long from '9223372036854775808'"
    );
    assert_eq!(ok("counter", int("-5")), i64b(-5));
    assert_eq!(ok("counter", int("9223372036854775807")), i64b(i64::MAX));
    assert_eq!(
        err("counter", int("-9223372036854775809")),
        "Unable to make long from '-9223372036854775809'"
    );
    assert_eq!(
        lit("counter", float("1.0")).unwrap_err().for_column("c"),
        "Invalid FLOAT constant (1.0) for \"c\" of type counter"
    );
    // messages without a column are passed through unchanged
    assert_eq!(
        lit("int", int("x")).unwrap_err().for_column("c"),
        "Unable to make int from 'x'"
    );
    // varint: minimal two's complement
    assert_eq!(ok("varint", int("0")), vec![0x00]);
    assert_eq!(ok("varint", int("127")), vec![0x7F]);
    assert_eq!(ok("varint", int("128")), vec![0x00, 0x80]);
    assert_eq!(ok("varint", int("-128")), vec![0x80]);
    assert_eq!(ok("varint", int("-129")), vec![0xFF, 0x7F]);
    assert_eq!(ok("varint", int("256")), vec![0x01, 0x00]);
    assert_eq!(
        ok("varint", int("18446744073709551616")),
        vec![0x01, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(err("varint", int("1x")), "unable to make int from '1x'");
}

#[test]
fn float_literals() {
    assert_eq!(ok("float", float("1.5")), 1.5f32.to_be_bytes().to_vec());
    assert_eq!(ok("float", int("3")), 3f32.to_be_bytes().to_vec());
    assert_eq!(
        ok("float", float("-2e10")),
        (-2e10f32).to_be_bytes().to_vec()
    );
    assert!(f32::from_be_bytes(ok("float", float("NaN")).try_into().unwrap()).is_nan());
    assert_eq!(
        ok("float", float("Infinity")),
        f32::INFINITY.to_be_bytes().to_vec()
    );
    assert_eq!(
        ok("float", float("-Infinity")),
        f32::NEG_INFINITY.to_be_bytes().to_vec()
    );
    // Java rounds to +-Infinity rather than failing
    assert_eq!(
        ok("float", float("1e39")),
        f32::INFINITY.to_be_bytes().to_vec()
    );
    assert_eq!(ok("double", float("0.1")), 0.1f64.to_be_bytes().to_vec());
    assert_eq!(ok("double", int("-42")), (-42f64).to_be_bytes().to_vec());
    assert_eq!(
        ok("double", float("-0.0")),
        (-0.0f64).to_be_bytes().to_vec()
    );
    assert_eq!(
        err("double", float("1e")),
        "Unable to make double from '1e'"
    );
    assert_eq!(
        err("float", float("inf")),
        "Unable to make float from 'inf'"
    );
}

#[test]
fn decimal_literals_keep_their_scale() {
    assert_eq!(ok("decimal", float("1.50")), dec(150, 2));
    assert_eq!(ok("decimal", float("1.5")), dec(15, 1));
    assert_eq!(ok("decimal", float("1E+3")), dec(1, -3));
    assert_eq!(ok("decimal", float("1e3")), dec(1, -3));
    assert_eq!(ok("decimal", float("-1.23E-12")), dec(-123, 14));
    assert_eq!(ok("decimal", float("0.00")), dec(0, 2));
    assert_eq!(ok("decimal", int("10")), dec(10, 0));
    assert_eq!(ok("decimal", float(".5")), dec(5, 1));
    assert_eq!(ok("decimal", float("5.")), dec(5, 0));
    // 128 needs two bytes in two's complement
    assert_eq!(ok("decimal", float("1.28")), vec![0, 0, 0, 2, 0x00, 0x80]);
    assert_eq!(
        err("decimal", float("NaN")),
        "unable to make BigDecimal from 'NaN'"
    );
    assert_eq!(
        err("decimal", float("1e2147483649")),
        "unable to make BigDecimal from '1e2147483649'"
    );
}

#[test]
fn text_blob_boolean_literals() {
    assert_eq!(ok("text", string("héllo")), "héllo".as_bytes());
    assert_eq!(ok("varchar", string("")), b"");
    assert_eq!(ok("ascii", string("abc")), b"abc");
    assert_eq!(
        err("ascii", string("é")),
        "Invalid ASCII character in string literal: java.nio.charset.UnmappableCharacterException: Input length = 1"
    );
    assert_eq!(ok("blob", Literal::Blob(vec![1, 2])), vec![1, 2]);
    assert_eq!(ok("boolean", Literal::Boolean(true)), vec![1]);
    assert_eq!(ok("boolean", Literal::Boolean(false)), vec![0]);
    // a one-byte hex constant is an exact match for tinyint in Cassandra
    assert_eq!(ok("tinyint", Literal::Blob(vec![5])), vec![5]);
    assert_eq!(
        err("tinyint", Literal::Blob(vec![5, 6])),
        "Expected 1 byte for a tinyint (2)"
    );
}

#[test]
fn constants_of_the_wrong_kind() {
    let e = lit("int", string("abc")).unwrap_err();
    assert_eq!(
        e.for_column("col"),
        "Invalid STRING constant (abc) for \"col\" of type int"
    );
    assert_eq!(
        lit("int", float("1.5")).unwrap_err().for_column("c"),
        "Invalid FLOAT constant (1.5) for \"c\" of type int"
    );
    assert_eq!(
        lit("text", int("1")).unwrap_err().for_column("t"),
        "Invalid INTEGER constant (1) for \"t\" of type text"
    );
    assert_eq!(
        lit("blob", string("x")).unwrap_err().for_column("b"),
        "Invalid STRING constant (x) for \"b\" of type blob"
    );
    assert_eq!(
        lit("uuid", string("550e8400-e29b-41d4-a716-446655440000"))
            .unwrap_err()
            .for_column("u"),
        "Invalid STRING constant (550e8400-e29b-41d4-a716-446655440000) for \"u\" of type uuid"
    );
    assert_eq!(
        lit("int", Literal::Blob(vec![1]))
            .unwrap_err()
            .for_column("c"),
        "Invalid HEX constant (0x01) for \"c\" of type int"
    );
    assert_eq!(
        lit("boolean", int("1")).unwrap_err().for_column("c"),
        "Invalid INTEGER constant (1) for \"c\" of type boolean"
    );
    assert_eq!(
        lit("list<int>", int("1")).unwrap_err().for_column("l"),
        "Invalid INTEGER constant (1) for \"l\" of type list<int>"
    );
    assert_eq!(
        lit("int", Literal::Duration("1h".into()))
            .unwrap_err()
            .for_column("c"),
        "Invalid DURATION constant (1h) for \"c\" of type int"
    );
    assert!(matches!(
        lit("int", Literal::Null),
        Err(ValueError::Null(_))
    ));
    assert_eq!(
        lit("counter", Literal::Null).unwrap_err().to_string(),
        "Invalid null value for counter increment/decrement"
    );
    // frozen is transparent
    assert_eq!(ok("frozen<int>", int("1")), i32b(1));
}

#[test]
fn uuid_literals() {
    let u = "550e8400-e29b-41d4-a716-446655440000";
    assert_eq!(
        ok("uuid", Literal::Uuid(u.into())),
        hexs("550e8400e29b41d4a716446655440000")
    );
    assert_eq!(
        ok("uuid", Literal::Uuid(u.to_uppercase())),
        hexs("550e8400e29b41d4a716446655440000")
    );
    let t = "6bddc89a-5644-11e4-97fc-56847afe9799";
    assert_eq!(
        ok("timeuuid", Literal::Uuid(t.into())),
        hexs("6bddc89a564411e497fc56847afe9799")
    );
    assert_eq!(ok("uuid", Literal::Uuid(t.into())).len(), 16);
    assert_eq!(
        err("timeuuid", Literal::Uuid(u.into())),
        "TimeUUID supports only version 1 UUIDs"
    );
    assert_eq!(
        err(
            "uuid",
            Literal::Uuid("550e8400-e29b-41d4-a716-44665544000".into())
        ),
        "Unable to make UUID from '550e8400-e29b-41d4-a716-44665544000'"
    );
    assert_eq!(
        err("timeuuid", Literal::Uuid("zz".into())),
        "Unknown timeuuid representation: zz"
    );
}

#[test]
fn inet_literals() {
    assert_eq!(ok("inet", string("127.0.0.1")), vec![127, 0, 0, 1]);
    let mut v6 = vec![0u8; 16];
    v6[15] = 1;
    assert_eq!(ok("inet", string("::1")), v6);
    assert_eq!(ok("inet", string("[::1]")), v6);
    // Java turns IPv4-mapped IPv6 addresses into IPv4 addresses
    assert_eq!(ok("inet", string("::ffff:10.1.2.3")), vec![10, 1, 2, 3]);
    assert_eq!(ok("inet", string("")), Vec::<u8>::new());
    assert_eq!(
        ok("inet", string("2001:db8::ff00:42:8329")),
        hexs("20010db8000000000000ff0000428329")
    );
    assert_eq!(
        err("inet", string("300.1.1.1")),
        "Unable to make inet address from '300.1.1.1'"
    );
    assert_eq!(
        err("inet", string("xyzz")),
        "Unable to make inet address from 'xyzz'"
    );
}

#[test]
fn timestamp_formats() {
    // expected values computed with Python's datetime (UTC unless an offset is given)
    let cases: &[(&str, i64)] = &[
        ("2024-01-02", 1704153600000),
        ("2024-01-02Z", 1704153600000),
        ("2024-01-02+0000", 1704153600000),
        ("2024-01-02 UTC", 1704153600000),
        ("2024-01-02 03:04", 1704164640000),
        ("2024-01-02T03:04", 1704164640000),
        ("2024-01-02 03:04:05", 1704164645000),
        ("2024-01-02 03:04:05.678", 1704164645678),
        ("2024-01-02T03:04:05.678", 1704164645678),
        ("2024-01-02T03:04:05.678Z", 1704164645678),
        ("2024-01-02 03:04:05.678+0000", 1704164645678),
        ("2024-01-02 03:04:05.678 +0000", 1704164645678),
        ("2024-01-02 03:04:05.678+00:00", 1704164645678),
        ("2024-01-02 03:04:05.678 GMT", 1704164645678),
        ("2024-01-02 03:04:05.678 UTC+01:00", 1704161045678),
        ("2024-01-02 03:04:05.678+0100", 1704161045678),
        ("2024-01-02 03:04:05.678+01:00", 1704161045678),
        ("2024-01-02 03:04:05.678+01", 1704161045678),
        ("2024-01-02T03:04:05.678-0530", 1704184445678),
        ("2024-01-02T03:04:05.678-05:30", 1704184445678),
        // fractions are truncated to milliseconds
        ("2024-01-02 03:04:05.6789", 1704164645678),
        ("2024-01-02 03:04:05.678999999", 1704164645678),
        ("2024-01-02 03:04:05.6", 1704164645600),
        // one-digit fields in the date-time forms
        ("2024-1-2 3:4:5", 1704164645000),
        // Java's smart resolver clamps the day to the month
        ("2021-02-30 10:00", 1614506400000),
        ("2024-02-29", 1709164800000),
        ("2024-01-02 24:00", 1704240000000),
        ("1969-12-31 23:59:59.999", -1),
        ("0001-01-01", -62135596800000),
        ("9999-12-31 23:59:59.999", 253402300799999),
        // raw milliseconds
        ("1704153600000", 1704153600000),
        ("-5", -5),
    ];
    for (text, expected) in cases {
        assert_eq!(parse_timestamp(text).unwrap(), *expected, "{text}");
        assert_eq!(ok("timestamp", string(text)), i64b(*expected), "{text}");
    }
    assert_eq!(ok("timestamp", int("1704153600000")), i64b(1704153600000));
    assert_eq!(ok("timestamp", string("")), Vec::<u8>::new());
    let now = parse_timestamp("NOW").unwrap();
    assert!(now > 1_700_000_000_000);
    for bad in [
        "2024-13-01",
        "2024-01-32",
        "2024-01-02 25:00",
        "2024-01-02 03:60",
        "2024-01-02 03:04:05.1234567890",
        "2024-01-02T03:04+25:00",
        "2024-1-2",
        "24-01-02",
        "2024/01/02",
        "abcd",
        "2024-01-02 03:04 Europe/Paris",
    ] {
        assert_eq!(
            parse_timestamp(bad).unwrap_err().to_string(),
            format!("Unable to parse a date/time from '{bad}'")
        );
    }
    assert_eq!(
        parse_timestamp("99999999999999999999")
            .unwrap_err()
            .to_string(),
        "Unable to make long (for date) from: '99999999999999999999'"
    );
}

#[test]
fn date_literals() {
    assert_eq!(
        ok("date", string("1970-01-01")),
        0x8000_0000u32.to_be_bytes().to_vec()
    );
    assert_eq!(
        ok("date", string("2024-01-02")),
        2147503372u32.to_be_bytes().to_vec()
    );
    assert_eq!(
        ok("date", string("1987-03-23")),
        2147489938u32.to_be_bytes().to_vec()
    );
    assert_eq!(
        ok("date", string("1969-12-31")),
        0x7FFF_FFFFu32.to_be_bytes().to_vec()
    );
    assert_eq!(ok("date", int("0")), vec![0, 0, 0, 0]);
    assert_eq!(ok("date", int("4294967295")), vec![0xFF; 4]);
    assert_eq!(
        ok("date", string("2147483648")),
        0x8000_0000u32.to_be_bytes().to_vec()
    );
    // the extremes of the date type (days of i32::MIN and i32::MAX)
    assert_eq!(ok("date", string("-5877641-06-23")), vec![0, 0, 0, 0]);
    assert_eq!(ok("date", string("5881580-07-11")), vec![0xFF; 4]);
    assert_eq!(
        err("date", string("5881580-07-12")),
        "Input date 5881580-07-12 is greater than max supported date 5881580-07-11"
    );
    assert_eq!(
        err("date", string("-5877641-06-22")),
        "Input date -5877641-06-22 is less than min supported date -5877641-06-23"
    );
    assert_eq!(
        err("date", int("4294967296")),
        "Unable to make unsigned int (for date) from: '4294967296'"
    );
    assert_eq!(
        err("date", int("-1")),
        "Unable to make unsigned int (for date) from: '-1'"
    );
    assert_eq!(
        err("date", string("2021-02-29")),
        "Unable to coerce '2021-02-29' to a formatted date (long)"
    );
    assert_eq!(
        err("date", string("xyz")),
        "Unable to coerce 'xyz' to a formatted date (long)"
    );
    assert_eq!(
        err("date", string("")),
        "Unable to coerce '' to a formatted date (long)"
    );
}

#[test]
fn time_literals() {
    assert_eq!(ok("time", string("00:00:00")), i64b(0));
    assert_eq!(ok("time", string("03:04:05")), i64b(11_045_000_000_000));
    assert_eq!(ok("time", string("03:04:05.1")), i64b(11_045_100_000_000));
    assert_eq!(
        ok("time", string("07:35:07.000111222")),
        i64b(27_307_000_111_222)
    );
    assert_eq!(
        ok("time", string(" 23:59:59.999999999 ")),
        i64b(86_399_999_999_999)
    );
    assert_eq!(ok("time", string("1:2:3")), i64b(3_723_000_000_000));
    assert_eq!(ok("time", int("86399999999999")), i64b(86_399_999_999_999));
    assert_eq!(
        err("time", int("86400000000000")),
        "Unable to make long (for time) from: '86400000000000'"
    );
    assert_eq!(
        err("time", int("-1")),
        "Unable to make long (for time) from: '-1'"
    );
    for bad in [
        "24:00:00",
        "12:60:00",
        "12:00:60",
        "12:00",
        "12:00:00.",
        "12:00:00.1234567890",
        "xyz",
        "",
    ] {
        assert_eq!(
            err("time", string(bad)),
            format!("(TimeType) Unable to coerce '{bad}' to a formatted time (long)"),
            "{bad}"
        );
    }
}

#[test]
fn duration_literal_forms_and_bytes() {
    fn d(t: &str) -> Vec<u8> {
        ok("duration", Literal::Duration(t.into()))
    }
    // months 14, days 25, nanoseconds 18367008009010; zig-zag VInts derived by hand:
    // 14 -> 28 = 0x1c, 25 -> 50 = 0x32, 36734016018020 -> 7 bytes with prefix 0xfc
    assert_eq!(d("1y2mo3w4d5h6m7s8ms9us10ns"), hexs("1c32fc2168cdf9d664"));
    assert_eq!(d("1Y2MO3W4D5H6M7S8MS9US10NS"), hexs("1c32fc2168cdf9d664"));
    assert_eq!(d("1y2mo3w4d5h6m7s8ms9µs10ns"), hexs("1c32fc2168cdf9d664"));
    // 1h = 3600000000000 ns -> zig-zag 7200000000000 = 0x068c61714000 -> fc 06 8c 61 71 40 00
    assert_eq!(d("1h"), hexs("0000fc068c61714000"));
    assert_eq!(d("-1d"), vec![0x00, 0x01, 0x00]);
    assert_eq!(d("P2W"), vec![0x00, 0x1c, 0x00]);
    assert_eq!(d("P1Y2M3DT4H5M6S"), hexs("1c06fc1ac003cfe800"));
    assert_eq!(d("P0001-02-03T04:05:06"), hexs("1c06fc1ac003cfe800"));
    assert_eq!(d("-P1Y2M3DT4H5M6S"), hexs("1b05fc1ac003cfe7ff"));
    assert_eq!(d("PT0S"), vec![0, 0, 0]);
    assert_eq!(d("P1M"), vec![0x02, 0, 0]);
    assert_eq!(d("PT1M"), d("1m"));
    assert_eq!(d("12µs"), d("12us"));
    assert_eq!(
        parse_duration("1y2mo3w4d5h6m7s8ms9us10ns").unwrap(),
        DurationValue {
            months: 14,
            days: 25,
            nanoseconds: 18_367_008_009_010
        }
    );
    // largest values: months 2^31-1 (5-byte VInt), nanoseconds 2^63-1 (9-byte VInt)
    assert_eq!(
        d("2147483647mo9223372036854775807ns"),
        hexs("f0fffffffe00fffffffffffffffffe")
    );
    let e = |t: &str| err("duration", Literal::Duration(t.into()));
    assert_eq!(
        e("1h2h"),
        "Invalid duration. The hours are specified multiple times"
    );
    assert_eq!(
        e("1m1h"),
        "Invalid duration. The minutes should be after hours"
    );
    assert_eq!(e("1x"), "Unable to convert '1x' to a duration");
    assert_eq!(e("-xyz"), "Unable to convert 'xyz' to a duration");
    assert_eq!(e("P1H"), "Unable to convert 'P1H' to a duration");
    assert_eq!(e("P1Y2W"), "Unable to convert 'P1Y2W' to a duration");
    assert_eq!(
        e("P01-02-03T04:05:06"),
        "Unable to convert 'P01-02-03T04:05:06' to a duration"
    );
    assert_eq!(
        e("2147483648mo"),
        "Invalid duration. The total number of months must be less or equal to 2147483647"
    );
    assert_eq!(
        e("178956971y"),
        "Invalid duration. The total number of months must be less or equal to 2147483647"
    );
    // an integer constant is assignable to duration but never parses
    assert_eq!(
        err("duration", int("12")),
        "Unable to convert '12' to a duration"
    );
}

// ---------------------------------------------------------------------------------------------
// validation
// ---------------------------------------------------------------------------------------------

#[test]
fn validation_of_fixed_size_types() {
    vok("int", &[]);
    vok("int", &[0; 4]);
    assert_eq!(verr("int", &[0; 3]), "Expected 4 or 0 byte int (3)");
    vok("bigint", &[]);
    assert_eq!(verr("bigint", &[0; 4]), "Expected 8 or 0 byte long (4)");
    assert_eq!(verr("counter", &[0; 9]), "Expected 8 or 0 byte long (9)");
    assert_eq!(verr("smallint", &[]), "Expected 2 bytes for a smallint (0)");
    assert_eq!(verr("tinyint", &[]), "Expected 1 byte for a tinyint (0)");
    assert_eq!(
        verr("tinyint", &[0, 0, 0, 1]),
        "Expected 1 byte for a tinyint (4)"
    );
    vok("boolean", &[]);
    vok("boolean", &[7]);
    assert_eq!(verr("boolean", &[0, 0]), "Expected 1 or 0 byte value (2)");
    vok("float", &[]);
    assert_eq!(
        verr("float", &[0; 8]),
        "Expected 4 or 0 byte value for a float (8)"
    );
    assert_eq!(
        verr("double", &[0; 4]),
        "Expected 8 or 0 byte value for a double (4)"
    );
    vok("timestamp", &[]);
    assert_eq!(
        verr("timestamp", &[0; 4]),
        "Expected 8 or 0 byte long for date (4)"
    );
    assert_eq!(verr("date", &[]), "Expected 4 byte long for date (0)");
    assert_eq!(verr("time", &[0; 4]), "Expected 8 byte long for time (4)");
    vok("uuid", &[]);
    vok("uuid", &[0; 16]);
    assert_eq!(verr("uuid", &[0; 15]), "UUID should be 16 or 0 bytes (15)");
    vok("timeuuid", &hexs("6bddc89a564411e497fc56847afe9799"));
    vok("timeuuid", &[]);
    assert_eq!(
        verr("timeuuid", &hexs("550e8400e29b41d4a716446655440000")),
        "Invalid version for TimeUUID type: 0x5"
    );
    assert_eq!(
        verr("timeuuid", &[0; 4]),
        "UUID should be 16 or 0 bytes (4)"
    );
    vok("decimal", &[]);
    vok("decimal", &dec(1, 0));
    assert_eq!(
        verr("decimal", &[0; 3]),
        "Expected 0 or at least 4 bytes (3)"
    );
    vok("varint", &[]);
    vok("varint", &[0, 0, 1]);
    vok("inet", &[]);
    vok("inet", &[1, 2, 3, 4]);
    vok("inet", &[0; 16]);
    assert_eq!(
        verr("inet", &[1, 2, 3]),
        "Expected 4 or 16 byte inetaddress; got 010203"
    );
}

#[test]
fn validation_of_text() {
    vok("ascii", b"hello\x7f");
    assert_eq!(verr("ascii", "é".as_bytes()), "Invalid byte for ascii: -61");
    vok("text", "héllo, 世界, 🎉".as_bytes());
    vok("text", b"");
    // Cassandra's validator accepts the modified UTF-8 null
    vok("text", &[0x41, 0xC0, 0x80]);
    for bad in [
        &[0xC3][..],               // truncated
        &[0x80],                   // stray continuation byte
        &[0xC1, 0x81],             // overlong
        &[0xE0, 0x80, 0x80],       // overlong three-byte form
        &[0xF0, 0x80, 0x80, 0x80], // overlong four-byte form
        &[0xF8, 0x80, 0x80, 0x80], // not a lead byte
        &[0xFF],
        &[0xE2, 0x82],
    ] {
        assert_eq!(verr("text", bad), "String didn't validate.", "{bad:?}");
    }
}

#[test]
fn validation_of_durations() {
    vok(
        "duration",
        &encode_duration(DurationValue {
            months: 1,
            days: 2,
            nanoseconds: 3,
        }),
    );
    assert_eq!(
        verr("duration", &[0, 0]),
        "Expected at least 3 bytes for a duration (2)"
    );
    assert_eq!(
        verr("duration", &[]),
        "Expected at least 3 bytes for a duration (0)"
    );
    // months 2^31 (zig-zag 2^32): 5-byte VInt f1 00 00 00 00
    assert_eq!(
        verr("duration", &hexs("f1000000000000")),
        "The duration months must be a 32 bits integer but was: 2147483648"
    );
    // days 1 (0x02) with months -1 (0x01)
    assert_eq!(
        verr("duration", &[0x01, 0x02, 0x00]),
        "The duration months, days and nanoseconds must be all of the same sign (-1, 1, 0)"
    );
    assert_eq!(decode_duration(&[0x02, 0x04, 0x06]).unwrap(), (1, 2, 3));
}

#[test]
fn validation_of_collections() {
    let l = encode_list(&[Some(&i32b(1)), Some(&i32b(2))]);
    vok("list<int>", &l);
    vok("frozen<list<int>>", &l);
    vok("list<int>", &encode_list(&[]));
    assert_eq!(verr("list<int>", &[]), "Not enough bytes to read a list");
    assert_eq!(
        verr("list<int>", &[0, 0, 0]),
        "Not enough bytes to read a list"
    );
    assert_eq!(verr("set<int>", &[]), "Not enough bytes to read a set");
    assert_eq!(verr("map<int, int>", &[]), "Not enough bytes to read a map");
    // "test" as a list: count 0x74657374, no element bytes
    assert_eq!(
        verr("list<text>", b"test"),
        "Not enough bytes to read a list"
    );
    assert_eq!(
        verr("list<int>", &i32b(-1)),
        "The data cannot be deserialized as a list"
    );
    assert_eq!(
        verr("set<int>", &i32b(-1)),
        "The data cannot be deserialized as a set"
    );
    // Long.MAX_VALUE as a set: huge count, then a null element
    assert_eq!(
        verr("set<text>", &i64b(i64::MAX)),
        "Null value read when not allowed"
    );
    assert_eq!(
        verr("map<text, text>", &i64b(i64::MAX)),
        "Null value read when not allowed"
    );
    assert_eq!(
        verr("list<int>", &encode_list(&[None])),
        "Null value read when not allowed"
    );
    assert_eq!(
        verr("list<int>", &encode_list(&[Some(&[0, 0, 1])])),
        "Expected 4 or 0 byte int (3)"
    );
    let mut trailing = l.clone();
    trailing.push(0);
    assert_eq!(
        verr("list<int>", &trailing),
        "Unexpected extraneous bytes after list value"
    );
    let m = encode_map(&CqlType::Int, &[(&i32b(1), b"a")]);
    vok("map<int, text>", &m);
    assert_eq!(verr("map<int, int>", &m), "Expected 4 or 0 byte int (1)");
    let mut mt = m.clone();
    mt.extend([1, 2]);
    assert_eq!(
        verr("map<int, text>", &mt),
        "Unexpected extraneous bytes after map value"
    );
    // a hostile count does not make validation allocate or loop for long
    assert_eq!(
        verr("list<int>", &i32b(i32::MAX)),
        "Not enough bytes to read a list"
    );
    // nested
    let inner = encode_list(&[Some(&i32b(1))]);
    vok("list<frozen<list<int>>>", &encode_list(&[Some(&inner)]));
    assert_eq!(
        verr(
            "list<frozen<list<int>>>",
            &encode_list(&[Some(&[0, 0, 0, 1])])
        ),
        "Not enough bytes to read a list"
    );
}

#[test]
fn validation_of_tuples_udts_vectors() {
    let t = "frozen<tuple<int, text>>";
    vok(t, &encode_tuple(&[Some(&i32b(1)), Some(b"a")]));
    vok(t, &encode_tuple(&[Some(&i32b(1))])); // fewer components
    vok(t, &encode_tuple(&[None, None]));
    vok(t, &[]);
    assert_eq!(
        verr(t, &encode_tuple(&[Some(&i32b(1)), Some(b"a"), None])),
        "Invalid remaining data after end of tuple value"
    );
    assert_eq!(
        verr(t, &[0, 0]),
        "Not enough bytes to read size of 0th component"
    );
    assert_eq!(
        verr(t, &[0, 0, 0, 4, 1]),
        "Not enough bytes to read 0th component"
    );
    assert_eq!(
        verr(t, &encode_tuple(&[Some(&[1])])),
        "Expected 4 or 0 byte int (1)"
    );
    let u = "frozen<point>";
    vok(u, &encode_udt(&[Some(&i32b(1)), None]));
    assert_eq!(
        verr(u, &encode_udt(&[Some(&[1])])),
        "Failure validating the 0th field x; Expected 4 or 0 byte int (1)"
    );
    assert_eq!(
        verr(u, &[0, 0, 0, 4, 0, 0, 0, 1, 0]),
        "Not enough bytes to read size of 1th field Label"
    );
    assert_eq!(
        verr(u, &encode_udt(&[None, None, None, None])),
        "Invalid remaining data after end of UDT value"
    );
    let v = "vector<float, 3>";
    let f: Vec<u8> = [1.0f32, 2.0, 3.0]
        .iter()
        .flat_map(|x| x.to_be_bytes())
        .collect();
    vok(v, &f);
    assert_eq!(verr(v, &[]), "Invalid empty vector value");
    assert_eq!(
        verr(v, &f[..8]),
        "Not enough bytes to read a vector<float, 3>"
    );
    let mut long = f.clone();
    long.extend([0; 4]);
    assert_eq!(
        verr(v, &long),
        "Unexpected 4 extraneous bytes after vector<float, 3> value"
    );
    let vt = "vector<text, 2>";
    let good = encode_vector(&CqlType::Text, &[b"ab", b""]);
    assert_eq!(good, vec![2, b'a', b'b', 0]);
    vok(vt, &good);
    assert_eq!(
        verr(vt, &[2, b'a', b'b']),
        "Not enough bytes to read a vector<text, 2>"
    );
    assert_eq!(
        verr(vt, &[5, b'a']),
        "Not enough bytes to read a vector<text, 2>"
    );
}

// ---------------------------------------------------------------------------------------------
// comparators, hand-written expectations
// ---------------------------------------------------------------------------------------------

#[test]
fn numeric_comparators() {
    use Ordering::*;
    assert_eq!(cmp("int", &i32b(-1), &i32b(0)), Less);
    assert_eq!(cmp("int", &i32b(i32::MIN), &i32b(i32::MAX)), Less);
    assert_eq!(cmp("int", &[], &i32b(i32::MIN)), Less);
    assert_eq!(cmp("int", &[], &[]), Equal);
    assert_eq!(cmp("bigint", &i64b(-2), &i64b(-1)), Less);
    assert_eq!(cmp("timestamp", &i64b(-1), &i64b(1)), Less);
    assert_eq!(cmp("tinyint", &[0xFF], &[0x01]), Less);
    assert_eq!(cmp("smallint", &[0x80, 0], &[0x7F, 0xFF]), Less);
    // varint: -1 < 0 < 1 < 256, with different byte lengths, and padding ignored
    let vs = [vec![0xFF], vec![0x00], vec![0x01], vec![0x01, 0x00]];
    for w in vs.windows(2) {
        assert_eq!(cmp("varint", &w[0], &w[1]), Less, "{:?}", w);
    }
    assert_eq!(cmp("varint", &[0xFF, 0x7F], &[0x80]), Less); // -129 < -128
    assert_eq!(cmp("varint", &[0x00, 0x01], &[0x01]), Equal);
    assert_eq!(cmp("varint", &[0xFF, 0xFF], &[0xFF]), Equal);
    assert_eq!(cmp("varint", &[], &[0x80]), Less);
    // decimal: by value
    assert_eq!(cmp("decimal", &dec(15, 1), &dec(125, 2)), Greater); // 1.5 > 1.25
    assert_eq!(cmp("decimal", &dec(10, 1), &dec(100, 2)), Equal); // 1.0 == 1.00
    assert_eq!(cmp("decimal", &dec(1, -3), &dec(999, 0)), Greater); // 1E+3 > 999
    assert_eq!(cmp("decimal", &dec(-15, 1), &dec(-125, 2)), Less); // -1.5 < -1.25
    assert_eq!(cmp("decimal", &dec(0, 5), &dec(0, -5)), Equal);
    assert_eq!(cmp("decimal", &dec(-1, 100), &dec(0, 0)), Less);
    assert_eq!(cmp("decimal", &[], &dec(-1, 0)), Less);
    // floats: -0.0 < 0.0 < Infinity < NaN, NaNs equal
    let f = |x: f32| x.to_be_bytes().to_vec();
    assert_eq!(cmp("float", &f(-0.0), &f(0.0)), Less);
    assert_eq!(cmp("float", &f(0.0), &f(f32::NAN)), Less);
    assert_eq!(cmp("float", &f(f32::INFINITY), &f(f32::NAN)), Less);
    assert_eq!(cmp("float", &f(f32::NEG_INFINITY), &f(-1e30)), Less);
    assert_eq!(
        cmp("float", &0xFFC0_0001u32.to_be_bytes(), &f(f32::NAN)),
        Equal
    );
    let d = |x: f64| x.to_be_bytes().to_vec();
    assert_eq!(cmp("double", &d(-0.0), &d(0.0)), Less);
    assert_eq!(cmp("double", &d(1e300), &d(f64::NAN)), Less);
    assert_eq!(cmp("double", &d(-2.5), &d(-2.25)), Less);
    // booleans
    assert_eq!(cmp("boolean", &[0], &[1]), Less);
    assert_eq!(cmp("boolean", &[1], &[2]), Equal);
    assert_eq!(cmp("boolean", &[], &[0]), Less);
}

#[test]
fn byte_order_comparators() {
    use Ordering::*;
    assert_eq!(cmp("text", b"a", b"b"), Less);
    assert_eq!(cmp("text", b"ab", b"a"), Greater);
    assert_eq!(cmp("text", "é".as_bytes(), b"z"), Greater); // unsigned bytes, not UTF-16
    assert_eq!(cmp("blob", &[0x7F], &[0x80]), Less);
    assert_eq!(cmp("inet", &[10, 0, 0, 1], &[0; 16]), Greater);
    assert_eq!(
        cmp("date", &[0x7F, 0xFF, 0xFF, 0xFF], &[0x80, 0, 0, 0]),
        Less
    );
    assert_eq!(cmp("time", &i64b(1), &i64b(2)), Less);
}

/// A version 1 uuid with the given 60-bit timestamp and clock/node bytes.
fn v1(ts: u64, lsb: [u8; 8]) -> Vec<u8> {
    let time_low = (ts & 0xFFFF_FFFF) as u32;
    let time_mid = ((ts >> 32) & 0xFFFF) as u16;
    let time_hi = ((ts >> 48) & 0x0FFF) as u16 | 0x1000;
    let mut v = Vec::new();
    v.extend(time_low.to_be_bytes());
    v.extend(time_mid.to_be_bytes());
    v.extend(time_hi.to_be_bytes());
    v.extend(lsb);
    v
}

#[test]
fn uuid_comparators() {
    use Ordering::*;
    // byte order and time order disagree: time_low of `a` is larger, but `b` is later
    let a = v1(0x0000_0001_FFFF_FFFF, [0x80; 8]);
    let b = v1(0x0000_0002_0000_0000, [0x80; 8]);
    assert_eq!(a.cmp(&b), Greater);
    assert_eq!(cmp("timeuuid", &a, &b), Less);
    assert_eq!(cmp("uuid", &a, &b), Less);
    // same time: timeuuid compares the clock/node bytes signed, uuid unsigned
    let c = v1(5, [0x7F, 0, 0, 0, 0, 0, 0, 0]);
    let d = v1(5, [0x80, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(cmp("timeuuid", &c, &d), Greater);
    assert_eq!(cmp("uuid", &c, &d), Less);
    // uuid: version first (a v1 uuid sorts before any v4, whatever its bytes)
    let v4 = hexs("00000000000040008000000000000000");
    let late_v1 = v1(u64::MAX >> 4, [0xFF; 8]);
    assert_eq!(cmp("uuid", &late_v1, &v4), Less);
    assert_eq!(cmp("uuid", &[], &v4), Less);
    // non-time uuids of the same version: unsigned bytes
    let v4a = hexs("7fffffffffff4fff8000000000000000");
    let v4b = hexs("80000000000040008000000000000000");
    assert_eq!(cmp("uuid", &v4a, &v4b), Less);
}

#[test]
fn composite_comparators() {
    use Ordering::*;
    let l = |xs: &[i32]| {
        let b: Vec<Vec<u8>> = xs.iter().map(|x| i32b(*x)).collect();
        encode_list(&b.iter().map(|x| Some(x.as_slice())).collect::<Vec<_>>())
    };
    let t = "frozen<list<int>>";
    assert_eq!(cmp(t, &l(&[1, 2]), &l(&[1, 3])), Less);
    assert_eq!(cmp(t, &l(&[1, 2]), &l(&[1, 2, 0])), Less);
    assert_eq!(cmp(t, &l(&[2]), &l(&[1, 9, 9])), Greater);
    assert_eq!(cmp(t, &l(&[]), &l(&[i32::MIN])), Less);
    assert_eq!(cmp(t, &[], &l(&[])), Less);
    let m = |kv: &[(i32, &str)]| {
        let b: Vec<(Vec<u8>, Vec<u8>)> = kv
            .iter()
            .map(|(k, v)| (i32b(*k), v.as_bytes().to_vec()))
            .collect();
        encode_map(
            &CqlType::Int,
            &b.iter()
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .collect::<Vec<_>>(),
        )
    };
    let mt = "frozen<map<int, text>>";
    assert_eq!(cmp(mt, &m(&[(1, "b")]), &m(&[(1, "c")])), Less);
    assert_eq!(cmp(mt, &m(&[(1, "z")]), &m(&[(2, "a")])), Less);
    assert_eq!(cmp(mt, &m(&[(1, "a")]), &m(&[(1, "a"), (2, "a")])), Less);
    let tt = "frozen<tuple<int, int, int>>";
    let tup = |c: &[Option<i32>]| {
        let b: Vec<Option<Vec<u8>>> = c.iter().map(|x| x.map(i32b)).collect();
        encode_tuple(&b.iter().map(|x| x.as_deref()).collect::<Vec<_>>())
    };
    assert_eq!(cmp(tt, &tup(&[Some(1)]), &tup(&[Some(1), None])), Equal);
    assert_eq!(
        cmp(tt, &tup(&[Some(1)]), &tup(&[Some(1), None, Some(5)])),
        Less
    );
    assert_eq!(
        cmp(tt, &tup(&[Some(1), None]), &tup(&[Some(1), Some(i32::MIN)])),
        Less
    );
    assert_eq!(
        cmp(tt, &tup(&[Some(2)]), &tup(&[Some(1), Some(9)])),
        Greater
    );
    assert_eq!(cmp(tt, &tup(&[None]), &tup(&[None, None, None])), Equal);
    assert_eq!(cmp(tt, &[], &tup(&[None])), Less);
    let vt = "vector<int, 2>";
    let vec2 = |a: i32, b: i32| [i32b(a), i32b(b)].concat();
    assert_eq!(cmp(vt, &vec2(-1, 5), &vec2(0, -5)), Less);
    assert_eq!(cmp(vt, &vec2(1, -5), &vec2(1, 5)), Less);
}

// ---------------------------------------------------------------------------------------------
// independent oracles (direct transcriptions of Cassandra's algorithms)
// ---------------------------------------------------------------------------------------------

mod oracle {
    use super::*;

    fn empty_first(a: &[u8], b: &[u8]) -> Option<Ordering> {
        match (a.is_empty(), b.is_empty()) {
            (true, true) => Some(Ordering::Equal),
            (true, false) => Some(Ordering::Less),
            (false, true) => Some(Ordering::Greater),
            _ => None,
        }
    }

    /// TimeUUIDType (pre-4.0 byte-wise form): timestamp bytes 6 (low nibble), 7, 4, 5, 0, 1,
    /// 2, 3 unsigned, then the whole value as *signed* bytes.
    fn timeuuid(a: &[u8], b: &[u8]) -> Ordering {
        for i in [6usize, 7, 4, 5, 0, 1, 2, 3] {
            let (x, y) = if i == 6 {
                (a[i] & 0xF, b[i] & 0xF)
            } else {
                (a[i], b[i])
            };
            if x != y {
                return x.cmp(&y);
            }
        }
        let sa: Vec<i8> = a.iter().map(|&x| x as i8).collect();
        let sb: Vec<i8> = b.iter().map(|&x| x as i8).collect();
        sa.cmp(&sb)
    }

    /// UUIDType (pre-4.0 form): version, timestamp bytes for v1, then unsigned bytes.
    fn uuid(a: &[u8], b: &[u8]) -> Ordering {
        let (va, vb) = (a[6] >> 4, b[6] >> 4);
        if va != vb {
            return va.cmp(&vb);
        }
        if va == 1 {
            for i in [6usize, 7, 4, 5, 0, 1, 2, 3] {
                let (x, y) = if i == 6 {
                    (a[i] & 0xF, b[i] & 0xF)
                } else {
                    (a[i], b[i])
                };
                if x != y {
                    return x.cmp(&y);
                }
            }
        }
        a.cmp(b)
    }

    fn decimal(a: &[u8], b: &[u8]) -> Ordering {
        let sa = i32::from_be_bytes(a[..4].try_into().unwrap()) as i64;
        let sb = i32::from_be_bytes(b[..4].try_into().unwrap()) as i64;
        let mut ua = BigInt::from_signed_bytes_be(&a[4..]);
        let mut ub = BigInt::from_signed_bytes_be(&b[4..]);
        // bring both to the larger scale (test values keep scales small)
        let s = sa.max(sb);
        ua *= BigInt::from(10).pow((s - sa) as u32);
        ub *= BigInt::from(10).pow((s - sb) as u32);
        ua.cmp(&ub)
    }

    fn java_float_cmp(x: f64, y: f64, xnan: bool, ynan: bool) -> Ordering {
        match (xnan, ynan) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => x.total_cmp(&y),
        }
    }

    /// Scalars only; composites are checked structurally by the key-order properties.
    pub fn compare(t: &CqlType, a: &[u8], b: &[u8]) -> Option<Ordering> {
        let t = t.unfrozen();
        if let Some(o) = empty_first(a, b) {
            return Some(o);
        }
        Some(match t {
            CqlType::Ascii
            | CqlType::Text
            | CqlType::Blob
            | CqlType::Inet
            | CqlType::Date
            | CqlType::Time => a.cmp(b),
            CqlType::Tinyint => (a[0] as i8).cmp(&(b[0] as i8)),
            CqlType::Smallint => {
                i16::from_be_bytes([a[0], a[1]]).cmp(&i16::from_be_bytes([b[0], b[1]]))
            }
            CqlType::Int => {
                i32::from_be_bytes(a.try_into().ok()?).cmp(&i32::from_be_bytes(b.try_into().ok()?))
            }
            CqlType::Bigint | CqlType::Timestamp | CqlType::Counter => {
                i64::from_be_bytes(a.try_into().ok()?).cmp(&i64::from_be_bytes(b.try_into().ok()?))
            }
            CqlType::Boolean => (a[0] != 0).cmp(&(b[0] != 0)),
            CqlType::Varint => {
                BigInt::from_signed_bytes_be(a).cmp(&BigInt::from_signed_bytes_be(b))
            }
            CqlType::Decimal => decimal(a, b),
            CqlType::Float => {
                let x = f32::from_be_bytes(a.try_into().ok()?);
                let y = f32::from_be_bytes(b.try_into().ok()?);
                java_float_cmp(x as f64, y as f64, x.is_nan(), y.is_nan())
            }
            CqlType::Double => {
                let x = f64::from_be_bytes(a.try_into().ok()?);
                let y = f64::from_be_bytes(b.try_into().ok()?);
                java_float_cmp(x, y, x.is_nan(), y.is_nan())
            }
            CqlType::Uuid => uuid(a, b),
            CqlType::Timeuuid => timeuuid(a, b),
            _ => return None,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// random values (deterministic)
// ---------------------------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn some_bytes(&mut self, min: usize, extra: u64, alphabet: &[u8]) -> Vec<u8> {
        let n = min + self.below(extra) as usize;
        self.bytes(n, alphabet)
    }
    fn bytes(&mut self, n: usize, alphabet: &[u8]) -> Vec<u8> {
        (0..n)
            .map(|_| alphabet[self.below(alphabet.len() as u64) as usize])
            .collect()
    }
}

const SMALL_BYTES: &[u8] = &[0x00, 0x01, 0x41, 0x42, 0x7F, 0x80, 0xFE, 0xFF];

fn gen(t: &CqlType, r: &mut Rng) -> Vec<u8> {
    let special = r.chance(25);
    match t.unfrozen() {
        CqlType::Ascii => r.some_bytes(0, 4, b"\x00ab\x7f"),
        CqlType::Text => {
            let pool = ["", "a", "ab", "b", "é", "\u{0}", "\u{0}a", "z", "世", "🎉"];
            let n = r.below(3);
            (0..n)
                .map(|_| pool[r.below(pool.len() as u64) as usize])
                .collect::<String>()
                .into_bytes()
        }
        CqlType::Blob | CqlType::Custom(_) => r.some_bytes(0, 5, SMALL_BYTES),
        CqlType::Duration => {
            if r.chance(20) {
                return r.some_bytes(0, 5, SMALL_BYTES);
            }
            let s = if r.chance(30) { -1 } else { 1 };
            encode_duration(DurationValue {
                months: s * r.below(30) as i32,
                days: s * r.below(400) as i32,
                nanoseconds: s as i64 * (r.below(1 << 40) as i64),
            })
        }
        CqlType::Inet => match r.below(3) {
            0 => Vec::new(),
            1 => r.bytes(4, SMALL_BYTES),
            _ => r.bytes(16, SMALL_BYTES),
        },
        CqlType::Tinyint
        | CqlType::Smallint
        | CqlType::Int
        | CqlType::Bigint
        | CqlType::Counter
        | CqlType::Timestamp
        | CqlType::Date
        | CqlType::Time => {
            let n = match t.unfrozen() {
                CqlType::Tinyint => 1,
                CqlType::Smallint => 2,
                CqlType::Int | CqlType::Date => 4,
                _ => 8,
            };
            let allows_empty = !matches!(
                t.unfrozen(),
                CqlType::Tinyint | CqlType::Smallint | CqlType::Date | CqlType::Time
            );
            if special && allows_empty && r.chance(30) {
                return Vec::new();
            }
            if matches!(t.unfrozen(), CqlType::Time) && !special {
                return (r.below(86_400_000_000_000) as i64).to_be_bytes().to_vec();
            }
            if special {
                let first = [0x00, 0x7F, 0x80, 0xFF][r.below(4) as usize];
                let rest = [0x00, 0xFF][r.below(2) as usize];
                let mut v = vec![rest; n];
                v[0] = first;
                return v;
            }
            r.bytes(n, SMALL_BYTES)
        }
        CqlType::Boolean => match r.below(5) {
            0 => Vec::new(),
            1 | 2 => vec![0],
            3 => vec![1],
            _ => vec![r.below(256) as u8],
        },
        CqlType::Float => {
            if special {
                let s = [
                    0.0f32,
                    -0.0,
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                    f32::NAN,
                    f32::MIN_POSITIVE,
                    -f32::MIN_POSITIVE,
                    f32::MAX,
                ];
                let mut v = s[r.below(s.len() as u64) as usize].to_be_bytes().to_vec();
                if r.chance(20) {
                    v = [0x7F, 0xC0, 0, 1].to_vec(); // a NaN with a payload
                }
                if r.chance(10) {
                    v = [0xFF, 0xFF, 0xFF, 0xFF].to_vec(); // a negative NaN
                }
                if r.chance(10) {
                    v = Vec::new();
                }
                return v;
            }
            ((r.below(2001) as f32 - 1000.0) / 8.0)
                .to_be_bytes()
                .to_vec()
        }
        CqlType::Double => {
            if special {
                let s = [
                    0.0f64,
                    -0.0,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                    f64::NAN,
                    1e-300,
                    -1e300,
                ];
                let mut v = s[r.below(s.len() as u64) as usize].to_be_bytes().to_vec();
                if r.chance(20) {
                    v = [0xFF, 0xF0, 0, 0, 0, 0, 0, 1].to_vec();
                }
                if r.chance(10) {
                    v = Vec::new();
                }
                return v;
            }
            ((r.below(2001) as f64 - 1000.0) / 16.0)
                .to_be_bytes()
                .to_vec()
        }
        CqlType::Uuid | CqlType::Timeuuid => {
            if special && r.chance(30) {
                return Vec::new();
            }
            let mut v = r.bytes(16, SMALL_BYTES);
            let version = if matches!(t.unfrozen(), CqlType::Timeuuid) {
                1
            } else {
                [1u8, 1, 4, 0, 2, 15][r.below(6) as usize]
            };
            v[6] = (v[6] & 0x0F) | (version << 4);
            v
        }
        CqlType::Varint => {
            if special && r.chance(30) {
                return Vec::new();
            }
            let mut v = r.some_bytes(1, 4, SMALL_BYTES);
            if r.chance(25) {
                // redundant sign extension
                let s = if v[0] & 0x80 != 0 { 0xFF } else { 0x00 };
                v.insert(0, s);
            }
            v
        }
        CqlType::Decimal => {
            if special && r.chance(30) {
                return Vec::new();
            }
            let scale = r.below(7) as i32 - 3;
            let mut unscaled = BigInt::from(r.below(2001) as i64 - 1000);
            if r.chance(30) {
                unscaled *= 100; // same values with other scales
            }
            let mut v = scale.to_be_bytes().to_vec();
            let mut u = unscaled.to_signed_bytes_be();
            if r.chance(15) {
                let s = if u[0] & 0x80 != 0 { 0xFF } else { 0x00 };
                u.insert(0, s);
            }
            v.extend(u);
            v
        }
        CqlType::List(e) | CqlType::Set(e) => {
            if special && r.chance(20) {
                return Vec::new();
            }
            let n = r.below(4);
            let items: Vec<Vec<u8>> = (0..n).map(|_| gen(e, r)).collect();
            if matches!(t.unfrozen(), CqlType::Set(_)) {
                return encode_set(e, &items.iter().map(|x| x.as_slice()).collect::<Vec<_>>());
            }
            encode_list(&items.iter().map(|x| Some(x.as_slice())).collect::<Vec<_>>())
        }
        CqlType::Map(k, v) => {
            let n = r.below(3);
            let items: Vec<(Vec<u8>, Vec<u8>)> = (0..n).map(|_| (gen(k, r), gen(v, r))).collect();
            encode_map(
                k,
                &items
                    .iter()
                    .map(|(a, b)| (a.as_slice(), b.as_slice()))
                    .collect::<Vec<_>>(),
            )
        }
        CqlType::Tuple(types) => gen_tuple(&types.iter().collect::<Vec<_>>(), r),
        CqlType::Udt(u) => gen_tuple(&u.fields.iter().map(|(_, t)| t).collect::<Vec<_>>(), r),
        CqlType::Vector(e, n) => {
            let elems: Vec<Vec<u8>> = (0..*n).map(|_| gen(e, r)).collect();
            encode_vector(e, &elems.iter().map(|x| x.as_slice()).collect::<Vec<_>>())
        }
        CqlType::Frozen(inner) => gen(inner, r),
    }
}

fn gen_tuple(types: &[&CqlType], r: &mut Rng) -> Vec<u8> {
    if r.chance(10) {
        return Vec::new();
    }
    let n = r.below(types.len() as u64 + 1) as usize;
    let comps: Vec<Option<Vec<u8>>> = types[..n]
        .iter()
        .map(|t| if r.chance(25) { None } else { Some(gen(t, r)) })
        .collect();
    encode_tuple(&comps.iter().map(|c| c.as_deref()).collect::<Vec<_>>())
}

fn clusterable_types() -> Vec<CqlType> {
    [
        "ascii",
        "text",
        "blob",
        "inet",
        "duration",
        "'org.example.Custom'",
        "tinyint",
        "smallint",
        "int",
        "bigint",
        "counter",
        "timestamp",
        "date",
        "time",
        "boolean",
        "float",
        "double",
        "uuid",
        "timeuuid",
        "varint",
        "decimal",
        "frozen<list<int>>",
        "frozen<set<text>>",
        "frozen<map<int, text>>",
        "frozen<list<frozen<list<varint>>>>",
        "frozen<map<text, frozen<list<double>>>>",
        "frozen<tuple<int, text, decimal>>",
        "frozen<tuple<frozen<tuple<int, int>>, uuid>>",
        "frozen<point>",
        "vector<float, 3>",
        "vector<text, 2>",
        "vector<decimal, 2>",
    ]
    .iter()
    .map(|s| ty(s))
    .collect()
}

// ---------------------------------------------------------------------------------------------
// key encoding properties
// ---------------------------------------------------------------------------------------------

#[test]
fn comparators_agree_with_independent_oracles() {
    let mut r = Rng(7);
    for t in clusterable_types() {
        let vals: Vec<Vec<u8>> = (0..80).map(|_| gen(&t, &mut r)).collect();
        for a in &vals {
            for b in &vals {
                if let Some(expected) = oracle::compare(&t, a, b) {
                    assert_eq!(compare(&t, a, b), expected, "{t}: {a:02x?} vs {b:02x?}");
                }
            }
        }
    }
}

#[test]
fn key_order_matches_compare_and_round_trips() {
    let mut r = Rng(42);
    for t in clusterable_types() {
        let vals: Vec<Vec<u8>> = (0..70).map(|_| gen(&t, &mut r)).collect();
        let asc: Vec<Vec<u8>> = vals.iter().map(|v| key(&t, v, false)).collect();
        let desc: Vec<Vec<u8>> = vals.iter().map(|v| key(&t, v, true)).collect();
        for (i, a) in vals.iter().enumerate() {
            // descending is the complement of ascending
            assert_eq!(desc[i], asc[i].iter().map(|b| !b).collect::<Vec<_>>());
            // round trip, and the decoder stops exactly at the end of the key
            for (k, d) in [(&asc[i], false), (&desc[i], true)] {
                let mut buf = k.clone();
                buf.extend_from_slice(b"\x00\xFFtail");
                let mut input = buf.as_slice();
                let back =
                    decode_key(&t, &mut input, d).unwrap_or_else(|e| panic!("{t} {a:02x?}: {e}"));
                assert_eq!(&back, a, "{t} desc={d}");
                assert_eq!(input, b"\x00\xFFtail", "{t} desc={d}");
            }
            for (j, b) in vals.iter().enumerate() {
                let c = compare(&t, a, b);
                let ka = asc[i].cmp(&asc[j]);
                match c {
                    Ordering::Equal => {
                        assert_eq!(ka == Ordering::Equal, a == b, "{t}: {a:02x?} vs {b:02x?}");
                    }
                    _ => assert_eq!(ka, c, "{t}: {a:02x?} vs {b:02x?}"),
                }
                assert_eq!(desc[i].cmp(&desc[j]), ka.reverse(), "{t} desc");
                // prefix-free
                if a != b {
                    assert!(
                        !asc[j].starts_with(&asc[i]),
                        "{t}: key of {a:02x?} prefixes {b:02x?}"
                    );
                }
            }
        }
    }
}

#[test]
fn composite_keys_compare_component_by_component() {
    let mut r = Rng(9);
    let types = clusterable_types();
    for round in 0..60 {
        let t1 = &types[r.below(types.len() as u64) as usize];
        let t2 = &types[r.below(types.len() as u64) as usize];
        let (d1, d2) = (round % 2 == 1, round % 3 == 1);
        let rows: Vec<(Vec<u8>, Vec<u8>)> = (0..25)
            .map(|_| {
                // few distinct first components so that the second one matters
                let a = if r.chance(50) {
                    gen(t1, &mut Rng(round))
                } else {
                    gen(t1, &mut r)
                };
                (a, gen(t2, &mut r))
            })
            .collect();
        let mut order_lens = Vec::new();
        let composite: Vec<Vec<u8>> = rows
            .iter()
            .map(|(a, b)| {
                let mut k = Vec::new();
                order_lens.push(encode_composite_key(&[(t1, a, d1), (t2, b, d2)], &mut k));
                k
            })
            .collect();
        let concatenated: Vec<Vec<u8>> = rows
            .iter()
            .map(|(a, b)| {
                let mut k = Vec::new();
                encode_key(t1, a, d1, &mut k);
                encode_key(t2, b, d2, &mut k);
                k
            })
            .collect();
        for (i, (a1, b1)) in rows.iter().enumerate() {
            let mut input = composite[i].as_slice();
            let back = decode_composite_key(&[(t1, d1), (t2, d2)], &mut input).unwrap();
            assert_eq!(back, vec![a1.clone(), b1.clone()], "{t1}/{t2}");
            assert!(input.is_empty());
            let mut input = concatenated[i].as_slice();
            assert_eq!(&decode_key(t1, &mut input, d1).unwrap(), a1);
            assert_eq!(&decode_key(t2, &mut input, d2).unwrap(), b1);
            assert!(input.is_empty());
            for (j, (a2, b2)) in rows.iter().enumerate() {
                let c1 = compare(t1, a1, a2);
                let c1 = if d1 { c1.reverse() } else { c1 };
                let c2 = compare(t2, b1, b2);
                let c2 = if d2 { c2.reverse() } else { c2 };
                let expected = c1.then(c2);
                let k = composite[i].cmp(&composite[j]);
                if expected != Ordering::Equal {
                    assert_eq!(k, expected, "{t1}/{t2}: composite");
                } else {
                    // the same row for Cassandra: same order part
                    assert_eq!(order_lens[i], order_lens[j]);
                    assert_eq!(composite[i][..order_lens[i]], composite[j][..order_lens[j]]);
                }
                assert_eq!(k == Ordering::Equal, (a1, b1) == (a2, b2));
                // plain concatenation agrees whenever the first columns are byte-identical
                // or differ for Cassandra
                let kc = concatenated[i].cmp(&concatenated[j]);
                if c1 != Ordering::Equal || (a1 == a2 && c2 != Ordering::Equal) {
                    assert_eq!(kc, expected, "{t1}/{t2}: concatenated");
                }
            }
        }
    }
}

#[test]
fn equal_values_with_different_bytes_do_not_decide_the_order() {
    // (1.0, 5) and (1.00, 3): Cassandra orders these rows by the int
    let t = [ty("decimal"), ty("int")];
    let key_of = |d: &[u8], i: i32| {
        let mut k = Vec::new();
        let n = encode_composite_key(&[(&t[0], d, false), (&t[1], &i32b(i), false)], &mut k);
        (k, n)
    };
    let (k1, n1) = key_of(&dec(10, 1), 5);
    let (k2, n2) = key_of(&dec(100, 2), 3);
    let (k3, n3) = key_of(&dec(100, 2), 5);
    assert!(k2 < k1);
    // (1.0, 5) and (1.00, 5) are the same row for Cassandra: same order part, distinct keys
    assert_eq!(k1[..n1], k3[..n3]);
    assert_ne!(k1, k3);
    assert_ne!(k1[..n1], k2[..n2]);
    // inside one value too: [65 padded, -1] < [65, 66] although 0x0041 sorts after 0x41
    let lt = ty("frozen<list<varint>>");
    let a = encode_list(&[Some(&[0x00, 0x41]), Some(&[0xFF])]);
    let b = encode_list(&[Some(&[0x41]), Some(&[0x42])]);
    assert_eq!(compare(&lt, &a, &b), Ordering::Less);
    assert!(key(&lt, &a, false) < key(&lt, &b, false));
    assert!(key(&lt, &a, true) > key(&lt, &b, true));
}

#[test]
fn key_encoding_examples() {
    // documented byte layouts, derived by hand
    assert_eq!(
        key(&CqlType::Int, &i32b(1), false),
        vec![0x01, 0x80, 0, 0, 1]
    );
    assert_eq!(
        key(&CqlType::Int, &i32b(-1), false),
        vec![0x01, 0x7F, 0xFF, 0xFF, 0xFF]
    );
    assert_eq!(key(&CqlType::Int, &[], false), vec![0x00]);
    assert_eq!(key(&CqlType::Int, &[], true), vec![0xFF]);
    assert_eq!(key(&CqlType::Text, b"a\x00b", false), b"a\x00\xFFb\x00\x00");
    assert_eq!(key(&CqlType::Text, b"", false), vec![0x00, 0x00]);
    // varint 256 = 01 00 -> positive, length 2, then no padding
    assert_eq!(
        key(&CqlType::Varint, &[0x01, 0x00], false),
        vec![0x02, 0x01, 0x02, 0x01, 0x00, 0x00]
    );
    // varint -1 padded once: negative, !uvar(1) = fe fe, magnitude ff, padding 1
    assert_eq!(
        key(&CqlType::Varint, &[0xFF, 0xFF], false),
        vec![0x01, 0xFE, 0xFE, 0xFF, 0x01, 0x01]
    );
    // decimal 1.50 = 0.15 x 10^1: positive, exponent 1 (sign bit flipped), digits 1 5 -> 2 6,
    // one trailing zero removed, no padding
    assert_eq!(
        key(&CqlType::Decimal, &dec(150, 2), false),
        vec![0x03, 0x80, 0, 0, 0, 0, 0, 0, 0x01, 0x02, 0x06, 0x00, 0x01, 0x01, 0x00]
    );
    // 1.0 and 1.00 compare equal but keep distinct keys that differ only after the order part
    let k10 = key(&CqlType::Decimal, &dec(10, 1), false);
    let k100 = key(&CqlType::Decimal, &dec(100, 2), false);
    assert_ne!(k10, k100);
    assert_eq!(k10[..11], k100[..11]);
    // a NaN key carries the original bits
    let nan = [0x7F, 0xC0, 0x00, 0x01];
    let k = key(&CqlType::Float, &nan, false);
    assert_eq!(
        k,
        vec![0x01, 0xFF, 0xC0, 0x00, 0x00, 0x7F, 0xC0, 0x00, 0x01]
    );
    // a list of two ints: present, (value, int key) twice, end
    let l = encode_list(&[Some(&i32b(1)), Some(&i32b(2))]);
    assert_eq!(
        key(&ty("frozen<list<int>>"), &l, false),
        vec![0x01, 0x02, 0x01, 0x80, 0, 0, 1, 0x02, 0x01, 0x80, 0, 0, 2, 0x00]
    );
    // (1, null) keeps its trailing null in the suffix only
    let t = ty("frozen<tuple<int, int>>");
    let one = encode_tuple(&[Some(&i32b(1))]);
    let one_null = encode_tuple(&[Some(&i32b(1)), None]);
    assert_eq!(
        key(&t, &one, false),
        vec![0x01, 0x02, 0x01, 0x80, 0, 0, 1, 0x00, 0x00]
    );
    assert_eq!(
        key(&t, &one_null, false),
        vec![0x01, 0x02, 0x01, 0x80, 0, 0, 1, 0x00, 0x01, 0x01]
    );
}

#[test]
fn corrupt_keys_are_errors_not_panics() {
    let mut r = Rng(3);
    for t in clusterable_types() {
        for _ in 0..200 {
            let n = r.below(12) as usize;
            let junk = r.bytes(n, SMALL_BYTES);
            let mut input = junk.as_slice();
            let _ = decode_key(&t, &mut input, r.chance(50));
        }
        let v = gen(&t, &mut r);
        let k = key(&t, &v, false);
        for cut in 0..k.len() {
            let mut input = &k[..cut];
            assert!(
                decode_key(&t, &mut input, false).is_err(),
                "{t}: truncated key decoded"
            );
        }
    }
    // an implausible padding count is refused instead of allocated
    let mut input: &[u8] = &[
        0x02, 0x01, 0x01, 0x01, 0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
    ];
    assert!(decode_key(&CqlType::Varint, &mut input, false).is_err());
}

#[test]
fn malformed_values_still_get_consistent_keys() {
    let t = ty("frozen<list<int>>");
    let bad = vec![0, 0, 0, 5, 1];
    let good = encode_list(&[Some(&i32b(7))]);
    assert_eq!(compare(&t, &good, &bad), Ordering::Less);
    assert!(key(&t, &good, false) < key(&t, &bad, false));
    let mut input = &key(&t, &bad, false)[..];
    assert_eq!(decode_key(&t, &mut input, false).unwrap(), bad);
    assert_eq!(
        compare(&CqlType::Int, &i32b(i32::MAX), &[1, 2, 3]),
        Ordering::Less
    );
}

// ---------------------------------------------------------------------------------------------
// builders and readers
// ---------------------------------------------------------------------------------------------

#[test]
fn set_and_map_builders_sort_and_deduplicate() {
    let s = encode_set(&CqlType::Int, &[&i32b(3), &i32b(-1), &i32b(3), &i32b(2)]);
    assert_eq!(
        s,
        encode_list(&[Some(&i32b(-1)), Some(&i32b(2)), Some(&i32b(3))])
    );
    // 1.0 and 1.00 are the same set element; the first one given is kept
    let d = encode_set(&CqlType::Decimal, &[&dec(100, 2), &dec(10, 1)]);
    assert_eq!(d, encode_list(&[Some(&dec(100, 2))]));
    let m = encode_map(&CqlType::Text, &[(b"b", b"1"), (b"a", b"2"), (b"b", b"3")]);
    assert_eq!(
        map_entries(&m).unwrap(),
        vec![(&b"a"[..], &b"2"[..]), (&b"b"[..], &b"3"[..])]
    );
    assert_eq!(&m[..4], &[0, 0, 0, 2]);
    let t = encode_tuple(&[Some(b"x"), None]);
    assert_eq!(t, vec![0, 0, 0, 1, b'x', 0xFF, 0xFF, 0xFF, 0xFF]);
    assert_eq!(tuple_components(&t).unwrap(), vec![Some(&b"x"[..]), None]);
    let l = encode_list(&[Some(b"ab"), None]);
    let elems: Vec<_> = collection_elements(&l)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(elems, vec![Some(&b"ab"[..]), None]);
    let huge = i32b(1_000_000);
    let mut it = collection_elements(&huge).unwrap();
    assert!(it.next().unwrap().is_err());
    assert!(!it.is_complete());
    let f = encode_vector(&CqlType::Float, &[&1f32.to_be_bytes(), &2f32.to_be_bytes()]);
    assert_eq!(vector_elements(&CqlType::Float, 2, &f).unwrap().len(), 2);
    assert!(vector_elements(&CqlType::Float, 3, &f).is_err());
}

// ---------------------------------------------------------------------------------------------
// CQL literals and JSON
// ---------------------------------------------------------------------------------------------

#[test]
fn cql_literal_output() {
    let p = |t: &str, v: &[u8]| to_cql_literal(&ty(t), v);
    assert_eq!(p("text", b"it's"), "'it''s'");
    assert_eq!(p("ascii", b""), "''");
    assert_eq!(p("blob", &[0xCA, 0xFE]), "0xcafe");
    assert_eq!(p("blob", &[]), "0x");
    assert_eq!(p("boolean", &[1]), "true");
    assert_eq!(p("int", &i32b(-5)), "-5");
    assert_eq!(p("int", &[]), "blobAsInt(0x)");
    assert_eq!(p("varint", &[0xFF, 0x7F]), "-129");
    assert_eq!(p("decimal", &dec(150, 2)), "1.50");
    assert_eq!(p("decimal", &dec(1, -3)), "1E+3");
    assert_eq!(p("float", &1.5f32.to_be_bytes()), "1.5");
    assert_eq!(p("double", &1e20f64.to_be_bytes()), "1.0E20");
    assert_eq!(p("double", &f64::NAN.to_be_bytes()), "NaN");
    assert_eq!(p("double", &f64::NEG_INFINITY.to_be_bytes()), "-Infinity");
    assert_eq!(
        p("timestamp", &i64b(1704164645678)),
        "'2024-01-02 03:04:05.678000+0000'"
    );
    assert_eq!(
        p("timestamp", &i64b(-1)),
        "'1969-12-31 23:59:59.999000+0000'"
    );
    assert_eq!(p("date", &2147503372u32.to_be_bytes()), "'2024-01-02'");
    assert_eq!(p("date", &[0, 0, 0, 0]), "0");
    assert_eq!(p("time", &i64b(27_307_000_111_222)), "'07:35:07.000111222'");
    assert_eq!(
        p("uuid", &hexs("550e8400e29b41d4a716446655440000")),
        "550e8400-e29b-41d4-a716-446655440000"
    );
    assert_eq!(p("inet", &[127, 0, 0, 1]), "'127.0.0.1'");
    let mut v6 = [0u8; 16];
    v6[15] = 1;
    assert_eq!(p("inet", &v6), "'::1'");
    assert_eq!(
        p(
            "duration",
            &ok("duration", Literal::Duration("P1Y1M2DT10H5M".into()))
        ),
        "1y1mo2d10h5m"
    );
    assert_eq!(
        p(
            "duration",
            &ok("duration", Literal::Duration("-12µs".into()))
        ),
        "-12us"
    );
    assert_eq!(p("duration", &[0, 0, 0]), "0s");
    let l = encode_list(&[Some(b"a"), Some(b"b'c")]);
    assert_eq!(p("list<text>", &l), "['a', 'b''c']");
    assert_eq!(p("set<text>", &l), "{'a', 'b''c'}");
    let m = encode_map(&CqlType::Text, &[(b"k", &i32b(1))]);
    assert_eq!(p("map<text, int>", &m), "{'k': 1}");
    let t = encode_tuple(&[Some(&i32b(1)), None]);
    assert_eq!(p("frozen<tuple<int, text>>", &t), "(1, null)");
    let u = encode_udt(&[Some(&i32b(1)), Some(b"x")]);
    assert_eq!(p("frozen<point>", &u), "{x: 1, \"Label\": 'x', tags: null}");
    let v: Vec<u8> = [1.0f32, 2.5].iter().flat_map(|x| x.to_be_bytes()).collect();
    assert_eq!(p("vector<float, 2>", &v), "[1.0, 2.5]");
    assert_eq!(p("list<int>", &[0, 0, 0, 9]), "0x00000009");
}

#[test]
fn json_output_matches_cassandra() {
    // expectations from Cassandra's JsonTest.testToJsonFct
    let j = |t: &str, v: &[u8]| to_json(&ty(t), v);
    assert_eq!(j("ascii", b"ascii text"), "\"ascii text\"");
    assert_eq!(j("ascii", b""), "\"\"");
    assert_eq!(j("bigint", &i64b(123123123123)), "123123123123");
    assert_eq!(j("bigint", &i64b(-123123123123)), "-123123123123");
    assert_eq!(j("blob", &i32b(1)), "\"0x00000001\"");
    assert_eq!(j("blob", &[]), "\"0x\"");
    assert_eq!(j("boolean", &[1]), "true");
    assert_eq!(j("date", &2147489938u32.to_be_bytes()), "\"1987-03-23\"");
    assert_eq!(
        j("decimal", &ok("decimal", float("123123.123123"))),
        "123123.123123"
    );
    assert_eq!(
        j("decimal", &ok("decimal", float("-1.23E-12"))),
        "-1.23E-12"
    );
    assert_eq!(
        j("double", &123123.123123f64.to_be_bytes()),
        "123123.123123"
    );
    assert_eq!(j("double", &123123f64.to_be_bytes()), "123123.0");
    assert_eq!(j("double", &f64::NAN.to_be_bytes()), "null");
    assert_eq!(j("float", &123.123f32.to_be_bytes()), "123.123");
    assert_eq!(j("float", &123123f32.to_be_bytes()), "123123.0");
    assert_eq!(j("inet", &[127, 0, 0, 1]), "\"127.0.0.1\"");
    let mut v6 = [0u8; 16];
    v6[15] = 1;
    assert_eq!(j("inet", &v6), "\"0:0:0:0:0:0:0:1\"");
    assert_eq!(j("int", &i32b(-123123)), "-123123");
    assert_eq!(j("smallint", &(-32768i16).to_be_bytes()), "-32768");
    assert_eq!(j("tinyint", &[0x80]), "-128");
    assert_eq!(j("text", "\u{8422}".as_bytes()), "\"\u{8422}\"");
    assert_eq!(j("text", b"\x00"), "\"\\u0000\"");
    assert_eq!(j("text", b"a\"b\\"), "\"a\\\"b\\\\\"");
    assert_eq!(j("time", &i64b(123)), "\"00:00:00.000000123\"");
    assert_eq!(
        j("timestamp", &i64b(1388534400000)),
        "\"2014-01-01 00:00:00.000Z\""
    );
    assert_eq!(
        j("timestamp", &i64b(1704164645678)),
        "\"2024-01-02 03:04:05.678Z\""
    );
    assert_eq!(
        j("timeuuid", &hexs("6bddc89a564411e497fc56847afe9799")),
        "\"6bddc89a-5644-11e4-97fc-56847afe9799\""
    );
    assert_eq!(
        j(
            "varint",
            &BigInt::parse_bytes(b"123123123123123123123", 10)
                .unwrap()
                .to_signed_bytes_be()
        ),
        "123123123123123123123"
    );
    let l = encode_list(&[Some(&i32b(1)), Some(&i32b(2)), Some(&i32b(3))]);
    assert_eq!(j("list<int>", &l), "[1, 2, 3]");
    let m = encode_map(&CqlType::Ascii, &[(b"a", &i32b(1)), (b"b", &i32b(2))]);
    assert_eq!(j("map<ascii, int>", &m), "{\"a\": 1, \"b\": 2}");
    let mi = encode_map(&CqlType::Int, &[(&i32b(1), b"x")]);
    assert_eq!(j("map<int, text>", &mi), "{\"1\": \"x\"}");
    let tu = encode_tuple(&[
        Some(&i32b(1)),
        Some(b"foobar"),
        Some(&hexs("6bddc89a564411e497fc56847afe9799")),
    ]);
    assert_eq!(
        j("frozen<tuple<int, ascii, uuid>>", &tu),
        "[1, \"foobar\", \"6bddc89a-5644-11e4-97fc-56847afe9799\"]"
    );
    let tn = encode_tuple(&[Some(&i32b(1)), Some(b"foobar"), None]);
    assert_eq!(
        j("frozen<tuple<int, ascii, uuid>>", &tn),
        "[1, \"foobar\", null]"
    );
    let u = encode_udt(&[Some(&i32b(1)), Some(b"x")]);
    assert_eq!(
        j("frozen<point>", &u),
        "{\"x\": 1, \"\\\"Label\\\"\": \"x\", \"tags\": null}"
    );
    assert_eq!(
        j(
            "duration",
            &ok("duration", Literal::Duration("12µs".into()))
        ),
        "\"12us\""
    );
    assert_eq!(
        j(
            "duration",
            &ok("duration", Literal::Duration("P1Y1M2DT10H5M".into()))
        ),
        "\"1y1mo2d10h5m\""
    );
    assert_eq!(j("int", &[]), "\"\"");
    // before the Gregorian cutover Java prints Julian dates: 1582-10-14 (proleptic) is 1582-10-04
    assert_eq!(
        j("timestamp", &i64b(-12219379200000)),
        "\"1582-10-04 00:00:00.000Z\""
    );
}

#[test]
fn json_input_matches_cassandra() {
    // expectations from Cassandra's JsonTest.testFromJsonFct
    let f = |t: &str, v: serde_json::Value| from_json(&ty(t), &v);
    let e = |t: &str, v: serde_json::Value| f(t, v).unwrap_err().to_string();
    assert_eq!(
        f("ascii", json!("ascii \" text")).unwrap(),
        b"ascii \" text"
    );
    assert!(e("ascii", json!("\u{1fff}")).starts_with("Invalid ASCII character in string literal"));
    assert_eq!(
        e("ascii", json!(123)),
        "Expected an ascii string, but got a Integer: 123"
    );
    assert_eq!(
        f("bigint", json!(123123123123i64)).unwrap(),
        i64b(123123123123)
    );
    assert_eq!(
        f("bigint", json!("123123123123")).unwrap(),
        i64b(123123123123)
    );
    assert!(e("bigint", json!(9223372036854775808u64))
        .starts_with("Expected a bigint value, but got a"));
    assert!(e("bigint", json!(123.456)).starts_with("Expected a bigint value, but got a"));
    assert!(e("bigint", json!("abc")).starts_with("Unable to make long from"));
    assert!(e("bigint", json!(["abc"])).starts_with("Expected a bigint value, but got a"));
    assert_eq!(f("blob", json!("0x00000001")).unwrap(), i32b(1));
    assert!(e("blob", json!("xyzz")).starts_with("Value 'xyzz' is not a valid blob representation"));
    assert_eq!(
        e("blob", json!("123")),
        "Value '123' is not a valid blob representation: String representation of blob is missing 0x prefix: 123"
    );
    assert!(
        e("blob", json!("0x123")).starts_with("Value '0x123' is not a valid blob representation")
    );
    assert!(e("blob", json!(123)).starts_with("Value '123' is not a valid blob representation"));
    assert_eq!(f("boolean", json!(true)).unwrap(), vec![1]);
    assert_eq!(f("boolean", json!("false")).unwrap(), vec![0]);
    assert!(e("boolean", json!("abc")).starts_with("Unable to make boolean from"));
    assert_eq!(
        e("boolean", json!(123)),
        "Expected a boolean value, but got a Integer: 123"
    );
    assert_eq!(
        f("date", json!("1987-03-23")).unwrap(),
        2147489938u32.to_be_bytes().to_vec()
    );
    assert!(e("date", json!(123)).starts_with("Expected a string representation of a date"));
    assert!(e("date", json!("xyz")).starts_with("Unable to coerce 'xyz' to a formatted date"));
    assert_eq!(
        f("decimal", json!(123123.123123)).unwrap(),
        ok("decimal", float("123123.123123"))
    );
    assert_eq!(f("decimal", json!(123123)).unwrap(), dec(123123, 0));
    assert_eq!(f("decimal", json!("-1.23E-12")).unwrap(), dec(-123, 14));
    assert_eq!(
        e("decimal", json!("xyzz")),
        "Value 'xyzz' is not a valid representation of a decimal value"
    );
    assert_eq!(
        e("decimal", json!(true)),
        "Value 'true' is not a valid representation of a decimal value"
    );
    assert_eq!(
        f("double", json!(123123)).unwrap(),
        123123f64.to_be_bytes().to_vec()
    );
    assert_eq!(
        f("double", json!("123123")).unwrap(),
        123123f64.to_be_bytes().to_vec()
    );
    assert!(e("double", json!("xyzz")).starts_with("Unable to make double from"));
    assert!(e("double", json!(true)).starts_with("Expected a double value, but got"));
    assert_eq!(
        f("float", json!(123123.123123)).unwrap(),
        (123123.123123f64 as f32).to_be_bytes().to_vec()
    );
    assert!(e("float", json!(true)).starts_with("Expected a float value, but got a"));
    assert_eq!(f("inet", json!("::1")).unwrap().len(), 16);
    assert_eq!(
        e("inet", json!("xyzz")),
        "Unable to make inet address from 'xyzz'"
    );
    assert_eq!(
        e("inet", json!(123)),
        "Expected a string representation of an inet value, but got a Integer: 123"
    );
    assert_eq!(f("int", json!(123123)).unwrap(), i32b(123123));
    assert_eq!(f("int", json!("123123")).unwrap(), i32b(123123));
    assert_eq!(
        e("int", json!(2147483648u64)),
        "Expected an int value, but got a Long: 2147483648"
    );
    assert_eq!(
        e("int", json!(123.456)),
        "Expected an int value, but got a Double: 123.456"
    );
    assert!(e("int", json!("xyzz")).starts_with("Unable to make int from"));
    assert!(e("int", json!(true)).starts_with("Expected an int value, but got a"));
    assert_eq!(
        f("smallint", json!(32767)).unwrap(),
        32767i16.to_be_bytes().to_vec()
    );
    assert_eq!(
        e("smallint", json!(32768)),
        "Unable to make short from '32768'"
    );
    assert_eq!(
        e("smallint", json!(123.456)),
        "Unable to make short from '123.456'"
    );
    assert_eq!(
        e("smallint", json!(true)),
        "Expected a short value, but got a Boolean: true"
    );
    assert_eq!(f("tinyint", json!("127")).unwrap(), vec![127]);
    assert_eq!(e("tinyint", json!(128)), "Unable to make byte from '128'");
    assert_eq!(
        e("tinyint", json!(true)),
        "Expected a byte value, but got a Boolean: true"
    );
    assert_eq!(f("text", json!("\u{2013}")).unwrap(), "\u{2013}".as_bytes());
    assert_eq!(
        e("text", json!(123)),
        "Expected a UTF-8 string, but got a Integer: 123"
    );
    assert_eq!(
        f("time", json!("07:35:07.000111222")).unwrap(),
        i64b(27_307_000_111_222)
    );
    assert!(
        e("time", json!(123456)).starts_with("Expected a string representation of a time value")
    );
    assert!(e("time", json!("xyz"))
        .starts_with("(TimeType) Unable to coerce 'xyz' to a formatted time"));
    assert_eq!(
        f("timestamp", json!(123123123123i64)).unwrap(),
        i64b(123123123123)
    );
    assert_eq!(
        f("timestamp", json!("2014-01-01")).unwrap(),
        i64b(1388534400000)
    );
    assert_eq!(
        e("timestamp", json!(123.456)),
        "Expected a long or a datestring representation of a timestamp value, but got a Double: 123.456"
    );
    assert_eq!(
        f("timeuuid", json!("6BDDC89A-5644-11E4-97FC-56847AFE9799")).unwrap(),
        hexs("6bddc89a564411e497fc56847afe9799")
    );
    assert_eq!(
        e("timeuuid", json!("00000000-0000-0000-0000-000000000000")),
        "TimeUUID supports only version 1 UUIDs"
    );
    assert_eq!(
        e("timeuuid", json!(123)),
        "Expected a string representation of a timeuuid, but got a Integer: 123"
    );
    assert!(e("uuid", json!("00000000-0000-0000-zzzz-000000000000"))
        .starts_with("Unable to make UUID from"));
    assert_eq!(
        e("uuid", json!(123)),
        "Expected a string representation of a uuid, but got a Integer: 123"
    );
    assert_eq!(
        f("varint", json!("1234567890123456789012345678901234567890")).unwrap(),
        BigInt::parse_bytes(b"1234567890123456789012345678901234567890", 10)
            .unwrap()
            .to_signed_bytes_be()
    );
    assert_eq!(
        e("varint", json!(123123.123)),
        "Value '123123.123' is not a valid representation of a varint value"
    );
    assert_eq!(
        e("varint", json!("")),
        "Value '' is not a valid representation of a varint value"
    );
    assert_eq!(
        e("varint", json!(true)),
        "Value 'true' is not a valid representation of a varint value"
    );
    // collections
    assert_eq!(
        f("list<int>", json!([1, 2, 3])).unwrap(),
        encode_list(&[Some(&i32b(1)), Some(&i32b(2)), Some(&i32b(3))])
    );
    assert_eq!(
        f("list<int>", json!("[1, 2]")).unwrap(),
        encode_list(&[Some(&i32b(1)), Some(&i32b(2))])
    );
    assert_eq!(
        e("list<int>", json!(123)),
        "Expected a list, but got a Integer: 123"
    );
    assert!(e("list<int>", json!(["abc"])).starts_with("Unable to make int from"));
    assert_eq!(
        e("list<int>", json!([null])),
        "Invalid null element in list"
    );
    assert_eq!(
        f("set<int>", json!([3, 1, 3])).unwrap(),
        encode_list(&[Some(&i32b(1)), Some(&i32b(3))])
    );
    assert_eq!(
        e("set<uuid>", json!(123)),
        "Expected a list (representing a set), but got a Integer: 123"
    );
    assert_eq!(e("set<int>", json!([null])), "Invalid null element in set");
    assert_eq!(
        f("map<ascii, int>", json!({"b": 2, "a": 1})).unwrap(),
        encode_map(&CqlType::Ascii, &[(b"a", &i32b(1)), (b"b", &i32b(2))])
    );
    assert_eq!(
        f("map<int, text>", json!({"7": "x"})).unwrap(),
        encode_map(&CqlType::Int, &[(&i32b(7), b"x")])
    );
    assert_eq!(
        e("map<ascii, int>", json!(123)),
        "Expected a map, but got a Integer: 123"
    );
    assert_eq!(
        e("map<ascii, int>", json!({"a": null})),
        "Invalid null value in map"
    );
    let tt = "frozen<tuple<int, ascii, uuid>>";
    assert_eq!(
        f(tt, json!([1, null, "6bddc89a-5644-11e4-97fc-56847afe9799"])).unwrap(),
        encode_tuple(&[
            Some(&i32b(1)),
            None,
            Some(&hexs("6bddc89a564411e497fc56847afe9799"))
        ])
    );
    assert!(e(
        tt,
        json!([1, "a", "6bddc89a-5644-11e4-97fc-56847afe9799", 1])
    )
    .starts_with("Tuple contains extra items"));
    assert!(e(tt, json!([1, "foobar"])).starts_with("Tuple is missing items"));
    assert!(e(
        tt,
        json!(["not an int", "a", "6bddc89a-5644-11e4-97fc-56847afe9799"])
    )
    .starts_with("Unable to make int from"));
    let u = "frozen<point>";
    assert_eq!(
        f(u, json!({"X": 1, "\"Label\"": "l"})).unwrap(),
        encode_udt(&[Some(&i32b(1)), Some(b"l"), None])
    );
    assert_eq!(
        f(u, json!({"x": null})).unwrap(),
        encode_udt(&[None, None, None])
    );
    assert_eq!(
        e(u, json!({"label": "l"})),
        "Unknown field 'label' in value of user defined type point"
    );
    assert!(e(u, json!({"x": "foobar"})).starts_with("Unable to make int from"));
    assert_eq!(
        f("duration", json!("53us")).unwrap(),
        encode_duration(DurationValue {
            months: 0,
            days: 0,
            nanoseconds: 53_000
        })
    );
    assert_eq!(f("duration", json!("P2W")).unwrap(), vec![0, 0x1c, 0]);
    assert_eq!(
        e("duration", json!("xyz")),
        "Unable to convert 'xyz' to a duration"
    );
    let fv: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|x| x.to_be_bytes()).collect();
    assert_eq!(f("vector<float, 2>", json!([1, 2.0])).unwrap(), fv);
    assert_eq!(
        e("vector<float, 2>", json!([1])),
        "List had incorrect size: expected 2 but given 1; [1]"
    );
    assert!(matches!(f("int", json!(null)), Err(ValueError::Null(_))));
    // text round trip through JSON for every JSON-representable scalar type
    let mut r = Rng(11);
    for t in [
        "int",
        "bigint",
        "smallint",
        "tinyint",
        "text",
        "ascii",
        "boolean",
        "uuid",
        "timeuuid",
        "inet",
        "date",
        "time",
        "timestamp",
        "varint",
        "decimal",
        "blob",
        "double",
        "float",
        "frozen<list<int>>",
        "frozen<map<int, text>>",
        "frozen<tuple<int, text, decimal>>",
        "duration",
    ] {
        let t = ty(t);
        for _ in 0..50 {
            let v = gen(&t, &mut r);
            if validate(&t, &v).is_err() || v.is_empty() {
                continue;
            }
            if let CqlType::Float | CqlType::Double = t {
                if to_json(&t, &v) == "null" {
                    continue;
                }
            }
            if matches!(t, CqlType::Boolean) && v[0] > 1 {
                continue;
            }
            // Java prints pre-Gregorian instants in the Julian calendar, which the
            // timestamp parser (like Cassandra's) reads as Gregorian
            if matches!(t, CqlType::Timestamp)
                && !(-12219292800000..253402300800000)
                    .contains(&i64::from_be_bytes(v[..].try_into().unwrap()))
            {
                continue;
            }
            let text = to_json(&t, &v);
            if text == "\"\"" || (matches!(t, CqlType::Time) && text.starts_with("\"0x")) {
                continue;
            }
            let parsed: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{t} {text}: {e}"));
            let back = from_json(&t, &parsed).unwrap_or_else(|e| panic!("{t} {text}: {e}"));
            assert_eq!(compare(&t, &back, &v), Ordering::Equal, "{t}: {text}");
        }
    }
}

#[test]
fn cql_literals_parse_back() {
    // every scalar literal the printer emits is accepted by the literal parser for its type
    let mut r = Rng(5);
    for name in [
        "int",
        "bigint",
        "smallint",
        "tinyint",
        "text",
        "ascii",
        "boolean",
        "uuid",
        "timeuuid",
        "inet",
        "date",
        "time",
        "timestamp",
        "varint",
        "decimal",
        "blob",
        "double",
        "float",
        "duration",
    ] {
        let t = ty(name);
        for _ in 0..60 {
            let v = gen(&t, &mut r);
            if validate(&t, &v).is_err() || v.is_empty() {
                continue;
            }
            let text = to_cql_literal(&t, &v);
            if text.starts_with("blobAs") {
                continue; // no literal of its own (an out-of-range time)
            }
            let l = if let Some(s) = text.strip_prefix('\'') {
                Literal::String(s[..s.len() - 1].replace("''", "'"))
            } else if let Some(h) = text.strip_prefix("0x") {
                Literal::Blob(hexs(h))
            } else if text == "true" || text == "false" {
                Literal::Boolean(text == "true")
            } else if matches!(t, CqlType::Uuid | CqlType::Timeuuid) {
                Literal::Uuid(text.clone())
            } else if matches!(t, CqlType::Duration) {
                Literal::Duration(text.clone())
            } else if text.contains(['.', 'E']) || text.contains("NaN") || text.contains("Infinity")
            {
                Literal::Float(text.clone())
            } else {
                Literal::Integer(text.clone())
            };
            let back = literal_to_bytes(&t, &l).unwrap_or_else(|e| panic!("{name} {text}: {e}"));
            let same = match t {
                // ms precision: cqlsh prints microseconds, which are always zero
                CqlType::Boolean => (back[0] != 0) == (v[0] != 0),
                _ => compare(&t, &back, &v) == Ordering::Equal,
            };
            assert!(same, "{name}: {text} gave {back:02x?} for {v:02x?}");
        }
    }
}
