//! Literal parsing and value validation: a CQL constant of some type is parsed to bytes, which
//! must then validate and print; arbitrary bytes are validated and printed for every type.
//!
//! The body of fuzz target `literal` (`fuzz_targets/literal.rs`), shared with its bounded run in
//! `cargo test` (`tests/fuzz_bounded.rs`).

use ringgate::cql::ast::Literal;
use ringgate::cql::types::CqlType;
use ringgate::cql::value;

/// Types covering every native kind and the nested shapes, parsed from Cassandra's type strings.
const TYPES: &[&str] = &[
    "ascii",
    "bigint",
    "blob",
    "boolean",
    "date",
    "decimal",
    "double",
    "duration",
    "float",
    "inet",
    "int",
    "smallint",
    "text",
    "time",
    "timestamp",
    "timeuuid",
    "tinyint",
    "uuid",
    "varint",
    "list<int>",
    "set<text>",
    "map<int, frozen<list<text>>>",
    "tuple<int, text, blob>",
    "vector<float, 3>",
    "frozen<map<text, tuple<int, frozen<set<bigint>>>>>",
];

/// Runs one input: returns, or panics on a finding.
pub fn run(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let ty = CqlType::parse(TYPES[pick as usize % TYPES.len()], &|_| None).expect("type");
    let text = String::from_utf8_lossy(rest).into_owned();
    for lit in [
        Literal::String(text.clone()),
        Literal::Integer(text.clone()),
        Literal::Float(text.clone()),
        Literal::Duration(text.clone()),
        Literal::Uuid(text),
        Literal::Blob(rest.to_vec()),
    ] {
        if let Ok(bytes) = value::literal_to_bytes(&ty, &lit) {
            assert!(value::validate(&ty, &bytes).is_ok(), "{ty}: {lit:?}");
            let _ = value::to_cql_literal(&ty, &bytes);
        }
    }
    if value::validate(&ty, rest).is_ok() {
        let _ = value::to_cql_literal(&ty, rest);
        let _ = value::to_json(&ty, rest);
        let _ = value::compare(&ty, rest, rest);
    }
}
