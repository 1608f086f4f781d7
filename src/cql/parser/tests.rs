//! Parser tests: every statement form with its tree, literals, bind markers, errors, and a
//! no-panic sweep over prefixes and mutations of valid statements.

use super::{parse, parse_many, SyntaxError};
use crate::cql::ast::*;

// ---- helpers ------------------------------------------------------------------------------

fn p(s: &str) -> Statement {
    match parse(s) {
        Ok(parsed) => parsed.statement,
        Err(e) => panic!("{s}\n  => {e}"),
    }
}

fn sel(s: &str) -> Select {
    match p(s) {
        Statement::Select(x) => x,
        other => panic!("not a select: {other:?}"),
    }
}

fn ins(s: &str) -> Insert {
    match p(s) {
        Statement::Insert(x) => x,
        other => panic!("not an insert: {other:?}"),
    }
}

fn upd(s: &str) -> Update {
    match p(s) {
        Statement::Update(x) => x,
        other => panic!("not an update: {other:?}"),
    }
}

fn del(s: &str) -> Delete {
    match p(s) {
        Statement::Delete(x) => x,
        other => panic!("not a delete: {other:?}"),
    }
}

fn table(s: &str) -> CreateTable {
    match p(s) {
        Statement::CreateTable(x) => x,
        other => panic!("not a create table: {other:?}"),
    }
}

fn desc(s: &str) -> Describe {
    match p(s) {
        Statement::Describe(x) => x,
        other => panic!("not a describe: {other:?}"),
    }
}

fn err(s: &str) -> SyntaxError {
    match parse(s) {
        Ok(parsed) => panic!("{s} parsed: {parsed:?}"),
        Err(e) => e,
    }
}

fn err_text(s: &str) -> String {
    err(s).to_string()
}

/// The term of `INSERT INTO t (a) VALUES (<s>)`.
fn term(s: &str) -> Term {
    let i = ins(&format!("INSERT INTO t (a) VALUES ({s})"));
    match i.values {
        InsertValues::Values { mut values, .. } => {
            assert_eq!(values.len(), 1, "{s}");
            values.pop().unwrap()
        }
        other => panic!("{other:?}"),
    }
}

/// The single selector expression of `SELECT <s> FROM t`.
fn selector(s: &str) -> SelectorExpr {
    match sel(&format!("SELECT {s} FROM t")).selection {
        Selection::List(mut l) => {
            assert_eq!(l.len(), 1, "{s}");
            let sel = l.pop().unwrap();
            assert_eq!(sel.alias, None);
            sel.expr
        }
        Selection::All => panic!("*"),
    }
}

/// The relations of `SELECT * FROM t WHERE <s>`.
fn rels(s: &str) -> Vec<Relation> {
    sel(&format!("SELECT * FROM t WHERE {s}")).where_clause
}

fn rel1(s: &str) -> Relation {
    let mut r = rels(s);
    assert_eq!(r.len(), 1, "{s}");
    r.pop().unwrap()
}

fn qn(name: &str) -> QualifiedName {
    QualifiedName {
        keyspace: None,
        name: name.to_string(),
    }
}

fn qks(ks: &str, name: &str) -> QualifiedName {
    QualifiedName {
        keyspace: Some(ks.to_string()),
        name: name.to_string(),
    }
}

fn int(s: &str) -> Term {
    Term::Literal(Literal::Integer(s.to_string()))
}

fn float(s: &str) -> Term {
    Term::Literal(Literal::Float(s.to_string()))
}

fn text(s: &str) -> Term {
    Term::Literal(Literal::String(s.to_string()))
}

fn bind(index: usize) -> Term {
    Term::Bind { index, name: None }
}

fn named(index: usize, name: &str) -> Term {
    Term::Bind {
        index,
        name: Some(name.to_string()),
    }
}

fn null() -> Term {
    Term::Literal(Literal::Null)
}

fn col(s: &str) -> SelectorExpr {
    SelectorExpr::Column(s.to_string())
}

fn sterm(t: Term) -> SelectorExpr {
    SelectorExpr::Term(t)
}

fn func(name: &str, args: Vec<Term>) -> Term {
    Term::Function {
        keyspace: None,
        name: name.to_string(),
        args,
    }
}

fn sfunc(name: &str, args: Vec<SelectorExpr>) -> SelectorExpr {
    SelectorExpr::Function {
        keyspace: None,
        name: name.to_string(),
        args,
    }
}

fn rel(column: &str, op: Operator, rhs: Term) -> Relation {
    Relation {
        lhs: RelationLhs::Column(column.to_string()),
        op,
        rhs,
    }
}

fn native(s: &str) -> TypeExpr {
    TypeExpr::Native(s.to_string())
}

fn bx<T>(t: T) -> Box<T> {
    Box::new(t)
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn lit_s(s: &str) -> Literal {
    Literal::String(s.to_string())
}

fn prop(name: &str, value: PropertyValue) -> (String, PropertyValue) {
    (name.to_string(), value)
}

fn cdef(name: &str, ty: TypeExpr) -> ColumnDef {
    ColumnDef {
        name: name.to_string(),
        ty,
        is_static: false,
    }
}

// ---- SELECT -------------------------------------------------------------------------------

#[test]
fn select_star() {
    assert_eq!(
        p("SELECT * FROM t"),
        Statement::Select(Select {
            table: qn("t"),
            json: false,
            distinct: false,
            selection: Selection::All,
            where_clause: vec![],
            group_by: vec![],
            order_by: vec![],
            per_partition_limit: None,
            limit: None,
            allow_filtering: false,
        })
    );
    assert_eq!(sel("select * from KS.Tab;").table, qks("ks", "tab"));
    assert_eq!(
        sel(r#"SELECT * FROM "MyKs"."MyTable""#).table,
        qks("MyKs", "MyTable")
    );
    assert_eq!(sel(r#"SELECT * FROM "a""b""#).table, qn("a\"b"));
    assert_eq!(
        sel("SELECT * FROM system.peers_v2").table,
        qks("system", "peers_v2")
    );
}

#[test]
fn select_json_and_distinct() {
    let s = sel("SELECT JSON * FROM t");
    assert!(s.json && !s.distinct);
    assert_eq!(s.selection, Selection::All);
    let s = sel("SELECT DISTINCT k FROM t");
    assert!(s.distinct && !s.json);
    let s = sel("SELECT JSON DISTINCT k, v FROM t");
    assert!(s.distinct && s.json);
    // As column names.
    let s = sel("SELECT json FROM t");
    assert!(!s.json);
    assert_eq!(
        s.selection,
        Selection::List(vec![Selector {
            expr: col("json"),
            alias: None
        }])
    );
    let s = sel("SELECT distinct, json FROM t");
    assert!(!s.distinct && !s.json);
    let s = sel("SELECT JSON json FROM t");
    assert!(s.json);
    assert_eq!(
        s.selection,
        Selection::List(vec![Selector {
            expr: col("json"),
            alias: None
        }])
    );
    let s = sel("SELECT json AS j FROM t");
    assert!(!s.json);
    assert_eq!(
        s.selection,
        Selection::List(vec![Selector {
            expr: col("json"),
            alias: Some("j".into())
        }])
    );
}

#[test]
fn selectors() {
    let s = sel(r#"SELECT a, B AS bee, "C" AS "Cee", count(*) AS n FROM t"#);
    assert_eq!(
        s.selection,
        Selection::List(vec![
            Selector {
                expr: col("a"),
                alias: None
            },
            Selector {
                expr: col("b"),
                alias: Some("bee".into())
            },
            Selector {
                expr: col("C"),
                alias: Some("Cee".into())
            },
            Selector {
                expr: SelectorExpr::CountAll,
                alias: Some("n".into())
            },
        ])
    );
    assert_eq!(selector("COUNT(*)"), SelectorExpr::CountAll);
    assert_eq!(selector("count(1)"), SelectorExpr::CountAll);
    assert_eq!(selector("count(a)"), sfunc("count", vec![col("a")]));
    assert_eq!(selector("count"), col("count"));
    assert_eq!(
        selector("token(a, b)"),
        sfunc("token", vec![col("a"), col("b")])
    );
    assert_eq!(selector("now()"), sfunc("now", vec![]));
    assert_eq!(
        selector("toJson(replication)"),
        sfunc("tojson", vec![col("replication")])
    );
    assert_eq!(
        selector("ks.myFn(a, 1)"),
        SelectorExpr::Function {
            keyspace: Some("ks".into()),
            name: "myfn".into(),
            args: vec![col("a"), sterm(int("1"))],
        }
    );
    assert_eq!(
        selector(r#""Ks"."F"()"#),
        SelectorExpr::Function {
            keyspace: Some("Ks".into()),
            name: "F".into(),
            args: vec![],
        }
    );
    assert_eq!(
        selector("writetime(v)"),
        SelectorExpr::WriteTime(bx(col("v")))
    );
    assert_eq!(
        selector("WRITETIME(v)"),
        SelectorExpr::WriteTime(bx(col("v")))
    );
    assert_eq!(
        selector("maxwritetime(v)"),
        SelectorExpr::MaxWriteTime(bx(col("v")))
    );
    assert_eq!(selector("ttl(v)"), SelectorExpr::Ttl(bx(col("v"))));
    assert_eq!(
        selector("writetime(m[1])"),
        SelectorExpr::WriteTime(bx(SelectorExpr::Element(bx(col("m")), int("1"))))
    );
    assert_eq!(
        selector("ttl(u.a)"),
        SelectorExpr::Ttl(bx(SelectorExpr::Field(bx(col("u")), "a".into())))
    );
    assert_eq!(
        selector("maxwritetime(s[1..])"),
        SelectorExpr::MaxWriteTime(bx(SelectorExpr::Slice(bx(col("s")), Some(int("1")), None)))
    );
    assert_eq!(selector("ttl"), col("ttl"));
    assert_eq!(selector("writetime"), col("writetime"));
    assert_eq!(
        selector("CAST(a AS text)"),
        SelectorExpr::Cast(bx(col("a")), native("text"))
    );
    assert_eq!(
        selector("cast(count(*) as bigint)"),
        SelectorExpr::Cast(bx(SelectorExpr::CountAll), native("bigint"))
    );
    assert_eq!(
        selector("u.field"),
        SelectorExpr::Field(bx(col("u")), "field".into())
    );
    assert_eq!(
        selector("u.a.b"),
        SelectorExpr::Field(
            bx(SelectorExpr::Field(bx(col("u")), "a".into())),
            "b".into()
        )
    );
    assert_eq!(
        selector("m['k']"),
        SelectorExpr::Element(bx(col("m")), text("k"))
    );
    assert_eq!(
        selector("m[1..3]"),
        SelectorExpr::Slice(bx(col("m")), Some(int("1")), Some(int("3")))
    );
    assert_eq!(
        selector("m[..3]"),
        SelectorExpr::Slice(bx(col("m")), None, Some(int("3")))
    );
    assert_eq!(
        selector("m['a'..]"),
        SelectorExpr::Slice(bx(col("m")), Some(text("a")), None)
    );
    assert_eq!(
        selector("m[?]"),
        SelectorExpr::Element(bx(col("m")), bind(0))
    );
    assert_eq!(
        selector("f(x).y[0]"),
        SelectorExpr::Element(
            bx(SelectorExpr::Field(
                bx(sfunc("f", vec![col("x")])),
                "y".into()
            )),
            int("0")
        )
    );
    assert_eq!(selector("1"), sterm(int("1")));
    assert_eq!(selector("'x'"), sterm(text("x")));
    assert_eq!(selector("null"), sterm(null()));
    assert_eq!(selector("?"), sterm(bind(0)));
    assert_eq!(selector(":v"), sterm(named(0, "v")));
    assert_eq!(selector("-1"), sterm(int("-1")));
    assert_eq!(selector("-a"), SelectorExpr::Negate(bx(col("a"))));
    assert_eq!(
        selector("a + b * 2"),
        SelectorExpr::Binary(
            BinaryOp::Add,
            bx(col("a")),
            bx(SelectorExpr::Binary(
                BinaryOp::Mul,
                bx(col("b")),
                bx(sterm(int("2")))
            ))
        )
    );
    assert_eq!(
        selector("(a + b) % 2"),
        SelectorExpr::Binary(
            BinaryOp::Mod,
            bx(SelectorExpr::Binary(
                BinaryOp::Add,
                bx(col("a")),
                bx(col("b"))
            )),
            bx(sterm(int("2")))
        )
    );
    assert_eq!(
        selector("a - 1 / c"),
        SelectorExpr::Binary(
            BinaryOp::Sub,
            bx(col("a")),
            bx(SelectorExpr::Binary(
                BinaryOp::Div,
                bx(sterm(int("1"))),
                bx(col("c"))
            ))
        )
    );
    assert_eq!(
        selector("(int) ?"),
        sterm(Term::TypeHint(native("int"), bx(bind(0))))
    );
    assert_eq!(
        selector("[1, 2]"),
        sterm(Term::List(vec![int("1"), int("2")]))
    );
    assert_eq!(
        selector("{1, 2}"),
        sterm(Term::Set(vec![int("1"), int("2")]))
    );
    assert_eq!(selector("{}"), sterm(Term::Set(vec![])));
    assert_eq!(
        selector("{'a': 1}"),
        sterm(Term::Map(vec![(text("a"), int("1"))]))
    );
    assert_eq!(
        selector("{a: 1}"),
        sterm(Term::Udt(vec![("a".into(), int("1"))]))
    );
    assert_eq!(
        selector("(1, 'a')"),
        sterm(Term::Tuple(vec![int("1"), text("a")]))
    );
    // Unreserved keywords as column names.
    for name in [
        "key",
        "type",
        "values",
        "keys",
        "filtering",
        "cluster",
        "users",
        "role",
        "static",
        "frozen",
        "list",
        "map",
        "tuple",
        "timestamp",
        "text",
        "date",
        "per",
        "partition",
    ] {
        assert_eq!(selector(name), col(name), "{name}");
    }
    assert!(parse("SELECT a[1] AS x FROM t").is_ok());
    assert_eq!(
        sel("SELECT (a) AS x FROM t").selection,
        Selection::List(vec![Selector {
            expr: col("a"),
            alias: Some("x".into())
        }])
    );
}

#[test]
fn where_relations() {
    assert_eq!(rel1("a = 1"), rel("a", Operator::Eq, int("1")));
    assert_eq!(rel1("a != 1"), rel("a", Operator::Ne, int("1")));
    assert_eq!(rel1("a < 1"), rel("a", Operator::Lt, int("1")));
    assert_eq!(rel1("a <= 1"), rel("a", Operator::Le, int("1")));
    assert_eq!(rel1("a > 1"), rel("a", Operator::Gt, int("1")));
    assert_eq!(rel1("a >= -1"), rel("a", Operator::Ge, int("-1")));
    assert_eq!(
        rel1("a IN (1, 2)"),
        rel("a", Operator::In, Term::List(vec![int("1"), int("2")]))
    );
    assert_eq!(rel1("a IN ()"), rel("a", Operator::In, Term::List(vec![])));
    assert_eq!(rel1("a IN ?"), rel("a", Operator::In, bind(0)));
    assert_eq!(rel1("a IN :list"), rel("a", Operator::In, named(0, "list")));
    assert_eq!(
        rel1("a IN (?, ?)"),
        rel("a", Operator::In, Term::List(vec![bind(0), bind(1)]))
    );
    assert_eq!(
        rel1("s CONTAINS 'x'"),
        rel("s", Operator::Contains, text("x"))
    );
    assert_eq!(
        rel1("m CONTAINS KEY 'x'"),
        rel("m", Operator::ContainsKey, text("x"))
    );
    assert_eq!(
        rel1("m contains key ?"),
        rel("m", Operator::ContainsKey, bind(0))
    );
    assert_eq!(rel1("a IS NOT NULL"), rel("a", Operator::IsNot, null()));
    assert_eq!(rel1("a LIKE 'ab%'"), rel("a", Operator::Like, text("ab%")));
    assert_eq!(
        rel1("m['k'] = 1"),
        Relation {
            lhs: RelationLhs::Element("m".into(), text("k")),
            op: Operator::Eq,
            rhs: int("1")
        }
    );
    assert_eq!(
        rel1("token(a, b) > token(1, 2)"),
        Relation {
            lhs: RelationLhs::Token(strs(&["a", "b"])),
            op: Operator::Gt,
            rhs: func("token", vec![int("1"), int("2")])
        }
    );
    assert_eq!(
        rel1("TOKEN(k) <= ?"),
        Relation {
            lhs: RelationLhs::Token(strs(&["k"])),
            op: Operator::Le,
            rhs: bind(0)
        }
    );
    assert_eq!(
        rel1("(c1, c2) > (1, 'a')"),
        Relation {
            lhs: RelationLhs::Tuple(strs(&["c1", "c2"])),
            op: Operator::Gt,
            rhs: Term::Tuple(vec![int("1"), text("a")])
        }
    );
    assert_eq!(
        rel1("(c1, c2) = ?"),
        Relation {
            lhs: RelationLhs::Tuple(strs(&["c1", "c2"])),
            op: Operator::Eq,
            rhs: bind(0)
        }
    );
    assert_eq!(
        rel1("(c1, c2) IN ((1, 2), (3, 4))"),
        Relation {
            lhs: RelationLhs::Tuple(strs(&["c1", "c2"])),
            op: Operator::In,
            rhs: Term::List(vec![
                Term::Tuple(vec![int("1"), int("2")]),
                Term::Tuple(vec![int("3"), int("4")])
            ])
        }
    );
    assert_eq!(
        rel1("(c1, c2) IN ?"),
        Relation {
            lhs: RelationLhs::Tuple(strs(&["c1", "c2"])),
            op: Operator::In,
            rhs: bind(0)
        }
    );
    assert_eq!(
        rel1("(c1, c2) IN (?, ?)"),
        Relation {
            lhs: RelationLhs::Tuple(strs(&["c1", "c2"])),
            op: Operator::In,
            rhs: Term::List(vec![bind(0), bind(1)])
        }
    );
    assert_eq!(
        rel1("(c1) IN ((1), (2))"),
        Relation {
            lhs: RelationLhs::Tuple(strs(&["c1"])),
            op: Operator::In,
            rhs: Term::List(vec![
                Term::Tuple(vec![int("1")]),
                Term::Tuple(vec![int("2")])
            ])
        }
    );
    assert_eq!(rel1("(a = 1)"), rel("a", Operator::Eq, int("1")));
    assert_eq!(
        rels("a = 1 AND b > 2 and (c < 3)"),
        vec![
            rel("a", Operator::Eq, int("1")),
            rel("b", Operator::Gt, int("2")),
            rel("c", Operator::Lt, int("3")),
        ]
    );
    assert_eq!(
        rel1("key = 'local'"),
        rel("key", Operator::Eq, text("local"))
    );
    assert_eq!(rel1(r#""" = 1"#), rel("", Operator::Eq, int("1")));
    assert_eq!(
        rel1("a = now()"),
        rel("a", Operator::Eq, func("now", vec![]))
    );
}

#[test]
fn select_clauses() {
    let s = sel(
        "SELECT a, b FROM ks.t WHERE a = ? GROUP BY a, b ORDER BY b DESC, c ASC, d \
         PER PARTITION LIMIT 2 LIMIT 10 ALLOW FILTERING;",
    );
    assert_eq!(s.table, qks("ks", "t"));
    assert_eq!(s.where_clause, vec![rel("a", Operator::Eq, bind(0))]);
    assert_eq!(s.group_by, strs(&["a", "b"]));
    assert_eq!(
        s.order_by,
        vec![
            ("b".to_string(), Order::Desc),
            ("c".to_string(), Order::Asc),
            ("d".to_string(), Order::Asc)
        ]
    );
    assert_eq!(s.per_partition_limit, Some(int("2")));
    assert_eq!(s.limit, Some(int("10")));
    assert!(s.allow_filtering);
    let s = sel("SELECT * FROM t LIMIT ?");
    assert_eq!(s.limit, Some(bind(0)));
    let s = sel("SELECT * FROM t PER PARTITION LIMIT :p LIMIT :l");
    assert_eq!(s.per_partition_limit, Some(named(0, "p")));
    assert_eq!(s.limit, Some(named(1, "l")));
}

#[test]
fn driver_and_cqlsh_queries() {
    let s = sel("SELECT * FROM system.local WHERE key='local'");
    assert_eq!(s.table, qks("system", "local"));
    assert_eq!(
        s.where_clause,
        vec![rel("key", Operator::Eq, text("local"))]
    );
    let s = sel(
        "SELECT keyspace_name, toJson(replication) AS replication FROM system_schema.keyspaces",
    );
    assert_eq!(
        s.selection,
        Selection::List(vec![
            Selector {
                expr: col("keyspace_name"),
                alias: None
            },
            Selector {
                expr: sfunc("tojson", vec![col("replication")]),
                alias: Some("replication".into())
            },
        ])
    );
    let parsed = parse("SELECT * FROM system_schema.tables WHERE keyspace_name IN ?").unwrap();
    assert_eq!(parsed.bind_count, 1);
    for q in [
        "SELECT * FROM system.peers_v2",
        "SELECT * FROM system.peers",
        "SELECT peer, data_center, host_id, preferred_ip, rack, release_version, rpc_address, schema_version, tokens FROM system.peers",
        "SELECT cluster_name, data_center, rack, tokens, partitioner, schema_version FROM system.local WHERE key='local'",
        "SELECT * FROM system_schema.columns WHERE keyspace_name = 'ks' AND table_name = 't';",
        "select release_version from system.local;;",
        "SELECT now() FROM system.local",
        "SELECT key, bootstrapped FROM system.local",
    ] {
        assert!(parse(q).is_ok(), "{q}: {:?}", parse(q));
    }
}

// ---- INSERT -------------------------------------------------------------------------------

#[test]
fn insert_values() {
    assert_eq!(
        ins("INSERT INTO ks.t (k, v) VALUES (1, 'a')"),
        Insert {
            table: qks("ks", "t"),
            values: InsertValues::Values {
                columns: strs(&["k", "v"]),
                values: vec![int("1"), text("a")],
            },
            if_not_exists: false,
            using: Using::default(),
        }
    );
    let i = ins("INSERT INTO t (k) VALUES (?) IF NOT EXISTS USING TTL 10 AND TIMESTAMP ?");
    assert!(i.if_not_exists);
    assert_eq!(
        i.using,
        Using {
            ttl: Some(int("10")),
            timestamp: Some(bind(1))
        }
    );
    let i = ins("INSERT INTO t (k) VALUES (1) USING TIMESTAMP 123456789");
    assert_eq!(i.using.timestamp, Some(int("123456789")));
    assert_eq!(i.using.ttl, None);
    let i = ins(r#"INSERT INTO t ("Key", key, "") VALUES (1, 2, 3)"#);
    assert_eq!(
        i.values,
        InsertValues::Values {
            columns: strs(&["Key", "key", ""]),
            values: vec![int("1"), int("2"), int("3")]
        }
    );
}

#[test]
fn insert_json() {
    assert_eq!(
        ins(r#"INSERT INTO t JSON '{"k": 1, "v": "it''s"}'"#).values,
        InsertValues::Json {
            value: text(r#"{"k": 1, "v": "it's"}"#),
            default_unset: false
        }
    );
    assert_eq!(
        ins("INSERT INTO t JSON ? DEFAULT UNSET").values,
        InsertValues::Json {
            value: bind(0),
            default_unset: true
        }
    );
    assert_eq!(
        ins("INSERT INTO t JSON :j DEFAULT NULL IF NOT EXISTS USING TTL 5").values,
        InsertValues::Json {
            value: named(0, "j"),
            default_unset: false
        }
    );
    assert_eq!(
        ins("INSERT INTO t JSON $${}$$").values,
        InsertValues::Json {
            value: text("{}"),
            default_unset: false
        }
    );
    // `json` as a column name.
    assert!(matches!(
        ins("INSERT INTO t (json) VALUES ('x')").values,
        InsertValues::Values { .. }
    ));
}

// ---- UPDATE -------------------------------------------------------------------------------

#[test]
fn update_assignments() {
    let u = upd(
        "UPDATE ks.t USING TTL 5 AND TIMESTAMP 10 SET a = 1, b = b + {2}, c = [3] + c, d = d - {'x'}, \
         e += 4, f -= 5, m['k'] = 'v', u.name = 'n', l[0] = ? WHERE k = ?",
    );
    assert_eq!(u.table, qks("ks", "t"));
    assert_eq!(
        u.using,
        Using {
            ttl: Some(int("5")),
            timestamp: Some(int("10"))
        }
    );
    assert_eq!(
        u.assignments,
        vec![
            Assignment::Set {
                column: "a".into(),
                value: int("1")
            },
            Assignment::Append {
                column: "b".into(),
                value: Term::Set(vec![int("2")])
            },
            Assignment::Prepend {
                column: "c".into(),
                value: Term::List(vec![int("3")])
            },
            Assignment::Remove {
                column: "d".into(),
                value: Term::Set(vec![text("x")])
            },
            Assignment::Append {
                column: "e".into(),
                value: int("4")
            },
            Assignment::Remove {
                column: "f".into(),
                value: int("5")
            },
            Assignment::SetElement {
                column: "m".into(),
                key: text("k"),
                value: text("v")
            },
            Assignment::SetField {
                column: "u".into(),
                field: "name".into(),
                value: text("n")
            },
            Assignment::SetElement {
                column: "l".into(),
                key: int("0"),
                value: bind(0)
            },
        ]
    );
    assert_eq!(u.where_clause, vec![rel("k", Operator::Eq, bind(1))]);
    assert_eq!(u.conditions, None);
    // Counters; no space before the number.
    let u = upd("UPDATE t SET c = c + 1, d = d -1 WHERE k = 0");
    assert_eq!(
        u.assignments,
        vec![
            Assignment::Append {
                column: "c".into(),
                value: int("1")
            },
            Assignment::Remove {
                column: "d".into(),
                value: int("1")
            },
        ]
    );
    let u = upd("UPDATE t SET c = c + -1 WHERE k = 0");
    assert_eq!(
        u.assignments,
        vec![Assignment::Append {
            column: "c".into(),
            value: int("-1")
        }]
    );
    // Functions and arithmetic are plain values.
    let u = upd("UPDATE t SET ts = toTimestamp(now()), n = 1 + 2 * 3 WHERE k = 0");
    assert_eq!(
        u.assignments,
        vec![
            Assignment::Set {
                column: "ts".into(),
                value: func("totimestamp", vec![func("now", vec![])])
            },
            Assignment::Set {
                column: "n".into(),
                value: Term::Binary(
                    BinaryOp::Add,
                    bx(int("1")),
                    bx(Term::Binary(BinaryOp::Mul, bx(int("2")), bx(int("3"))))
                )
            },
        ]
    );
    assert_eq!(
        err("UPDATE t SET a = b + 1 WHERE k = 0").message,
        "Only expressions of the form X = X +<value> are supported."
    );
    assert_eq!(
        err("UPDATE t SET a = [1] + b WHERE k = 0").message,
        "Only expressions of the form X = <value> + X are supported."
    );
    assert_eq!(
        err("UPDATE t SET a = 1, a = 2 WHERE k = 0").message,
        "Multiple incompatible setting of column a"
    );
    assert!(parse("UPDATE t SET m['a'] = 1, m['b'] = 2 WHERE k = 0").is_ok());
}

#[test]
fn update_conditions() {
    let u = upd("UPDATE t SET v = 1 WHERE k = 0 IF EXISTS");
    assert_eq!(u.conditions, Some(Conditions::IfExists));
    let u = upd(
        "UPDATE t SET v = 1 WHERE k = 0 IF v = 2 AND m['a'] != 'b' AND u.f > 3 AND w IN (1, 2) \
         AND x <= ? AND m['c'] IN ? AND u.g IN (4) AND exists = true AND s CONTAINS 5 AND m CONTAINS KEY 'k'",
    );
    let cond = |column: &str, element: Option<Term>, field: Option<&str>, op, value| Condition {
        column: column.into(),
        element,
        field: field.map(Into::into),
        op,
        value,
    };
    assert_eq!(
        u.conditions,
        Some(Conditions::Columns(vec![
            cond("v", None, None, Operator::Eq, int("2")),
            cond("m", Some(text("a")), None, Operator::Ne, text("b")),
            cond("u", None, Some("f"), Operator::Gt, int("3")),
            cond(
                "w",
                None,
                None,
                Operator::In,
                Term::List(vec![int("1"), int("2")])
            ),
            cond("x", None, None, Operator::Le, bind(0)),
            cond("m", Some(text("c")), None, Operator::In, bind(1)),
            cond(
                "u",
                None,
                Some("g"),
                Operator::In,
                Term::List(vec![int("4")])
            ),
            cond(
                "exists",
                None,
                None,
                Operator::Eq,
                Term::Literal(Literal::Boolean(true))
            ),
            cond("s", None, None, Operator::Contains, int("5")),
            cond("m", None, None, Operator::ContainsKey, text("k")),
        ]))
    );
}

// ---- DELETE -------------------------------------------------------------------------------

#[test]
fn delete_statements() {
    assert_eq!(
        del("DELETE FROM t WHERE k = 1"),
        Delete {
            table: qn("t"),
            targets: vec![],
            using: Using::default(),
            where_clause: vec![rel("k", Operator::Eq, int("1"))],
            conditions: None,
        }
    );
    let d = del("DELETE a, m['k'], u.f, l[?] FROM ks.t USING TIMESTAMP 42 WHERE k = ? IF a = 3");
    assert_eq!(
        d.targets,
        vec![
            DeleteTarget::Column("a".into()),
            DeleteTarget::Element("m".into(), text("k")),
            DeleteTarget::Field("u".into(), "f".into()),
            DeleteTarget::Element("l".into(), bind(0)),
        ]
    );
    assert_eq!(d.using.timestamp, Some(int("42")));
    assert_eq!(d.where_clause, vec![rel("k", Operator::Eq, bind(1))]);
    assert!(matches!(d.conditions, Some(Conditions::Columns(ref c)) if c.len() == 1));
    let d = del("DELETE FROM t WHERE k IN (1, 2) IF EXISTS");
    assert_eq!(d.conditions, Some(Conditions::IfExists));
    assert_eq!(
        err_text("DELETE FROM t USING TTL 5 WHERE k = 1"),
        "line 1:20 mismatched input 'TTL' expecting K_TIMESTAMP (DELETE FROM t USING [TTL]...)"
    );
}

// ---- BATCH --------------------------------------------------------------------------------

#[test]
fn batches() {
    let parsed = parse(
        "BEGIN BATCH USING TIMESTAMP 100
           INSERT INTO t (k, v) VALUES (?, ?);
           UPDATE t SET v = :v WHERE k = ?
           DELETE FROM t WHERE k = ?;
         APPLY BATCH;",
    )
    .unwrap();
    assert_eq!(parsed.bind_count, 5);
    let Statement::Batch(b) = parsed.statement else {
        panic!()
    };
    assert_eq!(b.kind, BatchKind::Logged);
    assert_eq!(b.using.timestamp, Some(int("100")));
    assert_eq!(b.statements.len(), 3);
    let Statement::Insert(i) = &b.statements[0] else {
        panic!()
    };
    assert_eq!(
        i.values,
        InsertValues::Values {
            columns: strs(&["k", "v"]),
            values: vec![bind(0), bind(1)]
        }
    );
    let Statement::Update(u) = &b.statements[1] else {
        panic!()
    };
    assert_eq!(
        u.assignments,
        vec![Assignment::Set {
            column: "v".into(),
            value: named(2, "v")
        }]
    );
    assert_eq!(u.where_clause, vec![rel("k", Operator::Eq, bind(3))]);
    let Statement::Delete(d) = &b.statements[2] else {
        panic!()
    };
    assert_eq!(d.where_clause, vec![rel("k", Operator::Eq, bind(4))]);

    let Statement::Batch(b) = p("BEGIN UNLOGGED BATCH APPLY BATCH") else {
        panic!()
    };
    assert_eq!(b.kind, BatchKind::Unlogged);
    assert!(b.statements.is_empty());
    let Statement::Batch(b) =
        p("begin counter batch update t set c = c + 1 where k = 1 apply batch")
    else {
        panic!()
    };
    assert_eq!(b.kind, BatchKind::Counter);
    assert_eq!(
        err_text("BEGIN BATCH SELECT * FROM t APPLY BATCH"),
        "line 1:12 mismatched input 'SELECT' expecting K_APPLY (BEGIN BATCH [SELECT]...)"
    );
}

// ---- keyspaces, USE -----------------------------------------------------------------------

#[test]
fn keyspace_statements() {
    assert_eq!(p("USE ks"), Statement::Use("ks".into()));
    assert_eq!(p(r#"use "MyKs";"#), Statement::Use("MyKs".into()));
    assert_eq!(
        p("CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1} \
           AND durable_writes = true AND cosmosdb_provisioned_throughput = 2000"),
        Statement::CreateKeyspace {
            name: "ks".into(),
            if_not_exists: true,
            properties: Properties {
                values: vec![
                    prop(
                        "replication",
                        PropertyValue::Map(vec![
                            (lit_s("class"), lit_s("SimpleStrategy")),
                            (lit_s("replication_factor"), Literal::Integer("1".into())),
                        ])
                    ),
                    prop("durable_writes", PropertyValue::Constant(Literal::Boolean(true))),
                    prop(
                        "cosmosdb_provisioned_throughput",
                        PropertyValue::Constant(Literal::Integer("2000".into()))
                    ),
                ],
                clustering_order: vec![],
                compact_storage: false,
            },
        }
    );
    assert_eq!(
        p("ALTER KEYSPACE IF EXISTS Ks WITH durable_writes = false"),
        Statement::AlterKeyspace {
            name: "ks".into(),
            if_exists: true,
            properties: Properties {
                values: vec![prop(
                    "durable_writes",
                    PropertyValue::Constant(Literal::Boolean(false))
                )],
                ..Properties::default()
            },
        }
    );
    assert_eq!(
        p("DROP KEYSPACE ks"),
        Statement::DropKeyspace {
            name: "ks".into(),
            if_exists: false
        }
    );
    assert_eq!(
        p("DROP KEYSPACE IF EXISTS ks"),
        Statement::DropKeyspace {
            name: "ks".into(),
            if_exists: true
        }
    );
    assert!(matches!(
        p("CREATE SCHEMA s WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 3}"),
        Statement::CreateKeyspace { .. }
    ));
    assert_eq!(
        err("CREATE KEYSPACE ks WITH a = 1 AND a = 2").message,
        "Multiple definition for property a"
    );
    assert_eq!(
        err("CREATE KEYSPACE ks WITH replication = {'class': ?}").message,
        "Invalid property value: ? for property: 'class' (bind variables are not supported in DDL queries)"
    );
    assert_eq!(
        err("USE ?").message,
        "Bind variables cannot be used for keyspace names"
    );
}

// ---- tables -------------------------------------------------------------------------------

#[test]
fn create_table_primary_keys() {
    let t = table("CREATE TABLE t (k int PRIMARY KEY, v text)");
    assert_eq!(t.name, qn("t"));
    assert!(!t.if_not_exists);
    assert_eq!(
        t.columns,
        vec![cdef("k", native("int")), cdef("v", native("text"))]
    );
    assert_eq!(t.partition_key, strs(&["k"]));
    assert!(t.clustering.is_empty());
    assert_eq!(t.properties, Properties::default());

    let t = table("CREATE TABLE IF NOT EXISTS ks.t (a int, b int, c int, PRIMARY KEY (a))");
    assert!(t.if_not_exists);
    assert_eq!(t.name, qks("ks", "t"));
    assert_eq!(t.partition_key, strs(&["a"]));

    let t = table("CREATE TABLE t (a int, b int, c int, PRIMARY KEY (a, b, c))");
    assert_eq!(t.partition_key, strs(&["a"]));
    assert_eq!(t.clustering, strs(&["b", "c"]));

    let t = table("CREATE COLUMNFAMILY t (a int, b int, c int, PRIMARY KEY ((a, b), c),)");
    assert_eq!(t.partition_key, strs(&["a", "b"]));
    assert_eq!(t.clustering, strs(&["c"]));

    let t = table(r#"CREATE TABLE t ("Key" int, s text static, PRIMARY KEY ("Key"))"#);
    assert_eq!(
        t.columns,
        vec![
            cdef("Key", native("int")),
            ColumnDef {
                name: "s".into(),
                ty: native("text"),
                is_static: true
            }
        ]
    );
    assert_eq!(
        err("CREATE TABLE t (a int PRIMARY KEY, b int, PRIMARY KEY (b))").message,
        "Multiple PRIMARY KEYs specified (exactly one required)"
    );
    assert_eq!(
        err("CREATE TABLE t (a int, b int)").message,
        "No PRIMARY KEY specifed for table 't' (exactly one required)"
    );
    let e = err("CREATE TABLE t (a int PRIMARY KEY, b int, a text)");
    assert_eq!(e.message, "Multiple definition of identifier a");
    assert_eq!((e.line, e.col), (1, 42));
}

#[test]
fn create_table_types_and_properties() {
    let t = table(
        "CREATE TABLE ks.t (
            k uuid,
            c1 timestamp,
            c2 varchar,
            l list<int>,
            s set<frozen<tuple<int, text>>>,
            m map<text, frozen<list<blob>>>,
            tu tuple<int, text, float>,
            v vector<float, 3>,
            u frozen<address>,
            u2 frozen<other.address>,
            cu 'org.apache.cassandra.db.marshal.DynamicCompositeType',
            d duration, dt date, tm time, ct counter, bi bigint, si smallint, ti tinyint,
            vi varint, dc decimal, db double, f float, i inet, b boolean, a ascii, tid timeuuid,
            PRIMARY KEY (k, c1, c2)
        ) WITH CLUSTERING ORDER BY (c1 DESC, c2 ASC)
          AND comment = 'it''s'
          AND compaction = {'class': 'LeveledCompactionStrategy', 'enabled': true}
          AND gc_grace_seconds = 864000
          AND bloom_filter_fp_chance = 0.01
          AND caching = {}
          AND speculative_retry = NONE
          AND default_time_to_live = -1
          AND COMPACT STORAGE",
    );
    let ty = |name: &str| {
        t.columns
            .iter()
            .find(|c| c.name == name)
            .unwrap()
            .ty
            .clone()
    };
    assert_eq!(ty("c2"), native("varchar"));
    assert_eq!(ty("l"), TypeExpr::List(bx(native("int"))));
    assert_eq!(
        ty("s"),
        TypeExpr::Set(bx(TypeExpr::Frozen(bx(TypeExpr::Tuple(vec![
            native("int"),
            native("text")
        ])))))
    );
    assert_eq!(
        ty("m"),
        TypeExpr::Map(
            bx(native("text")),
            bx(TypeExpr::Frozen(bx(TypeExpr::List(bx(native("blob"))))))
        )
    );
    assert_eq!(
        ty("tu"),
        TypeExpr::Tuple(vec![native("int"), native("text"), native("float")])
    );
    assert_eq!(ty("v"), TypeExpr::Vector(bx(native("float")), 3));
    assert_eq!(ty("u"), TypeExpr::Frozen(bx(TypeExpr::Udt(qn("address")))));
    assert_eq!(
        ty("u2"),
        TypeExpr::Frozen(bx(TypeExpr::Udt(qks("other", "address"))))
    );
    assert_eq!(
        ty("cu"),
        TypeExpr::Custom("org.apache.cassandra.db.marshal.DynamicCompositeType".into())
    );
    for n in [
        "duration", "date", "time", "counter", "bigint", "smallint", "tinyint", "varint",
        "decimal", "double", "float", "inet", "boolean", "ascii", "timeuuid",
    ] {
        assert!(t.columns.iter().any(|c| c.ty == native(n)), "{n}");
    }
    assert_eq!(t.partition_key, strs(&["k"]));
    assert_eq!(t.clustering, strs(&["c1", "c2"]));
    assert_eq!(
        t.properties,
        Properties {
            values: vec![
                prop("comment", PropertyValue::Constant(lit_s("it's"))),
                prop(
                    "compaction",
                    PropertyValue::Map(vec![
                        (lit_s("class"), lit_s("LeveledCompactionStrategy")),
                        (lit_s("enabled"), Literal::Boolean(true)),
                    ])
                ),
                prop(
                    "gc_grace_seconds",
                    PropertyValue::Constant(Literal::Integer("864000".into()))
                ),
                prop(
                    "bloom_filter_fp_chance",
                    PropertyValue::Constant(Literal::Float("0.01".into()))
                ),
                prop("caching", PropertyValue::Map(vec![])),
                prop("speculative_retry", PropertyValue::Constant(lit_s("NONE"))),
                prop(
                    "default_time_to_live",
                    PropertyValue::Constant(Literal::Integer("-1".into()))
                ),
            ],
            clustering_order: vec![("c1".into(), Order::Desc), ("c2".into(), Order::Asc)],
            compact_storage: true,
        }
    );
    // Unreserved keywords name tables and columns.
    let t = table(
        "CREATE TABLE type (key int, type text, ttl int, count int, values int, keys int, \
         json text, distinct int, filtering int, users int, role int, static int static, \
         frozen int, list int, map int, tuple int, cluster int, timestamp timestamp, \
         writetime int, cast int, exists int, options int, partition int, per int, \
         PRIMARY KEY (key, type))",
    );
    assert_eq!(t.name, qn("type"));
    assert_eq!(t.columns.len(), 24);
    assert!(t.columns.iter().any(|c| c.name == "static" && c.is_static));
    assert_eq!(t.partition_key, strs(&["key"]));
    // Reserved ones don't.
    assert!(parse("CREATE TABLE t (select int PRIMARY KEY)").is_err());
    assert!(parse("CREATE TABLE t (\"select\" int PRIMARY KEY)").is_ok());
}

#[test]
fn alter_drop_truncate_table() {
    let alter = |s: &str| match p(s) {
        Statement::AlterTable {
            name,
            if_exists,
            action,
            if_column_not_exists,
            if_column_exists,
        } => (
            name,
            if_exists,
            action,
            if_column_not_exists,
            if_column_exists,
        ),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        alter("ALTER TABLE ks.t ADD c int"),
        (
            qks("ks", "t"),
            false,
            AlterTableAction::Add(vec![cdef("c", native("int"))]),
            false,
            false
        )
    );
    assert_eq!(
        alter("ALTER TABLE IF EXISTS t ADD IF NOT EXISTS (c1 int, c2 set<text> static)"),
        (
            qn("t"),
            true,
            AlterTableAction::Add(vec![
                cdef("c1", native("int")),
                ColumnDef {
                    name: "c2".into(),
                    ty: TypeExpr::Set(bx(native("text"))),
                    is_static: true
                }
            ]),
            true,
            false
        )
    );
    assert_eq!(
        alter("ALTER TABLE t DROP c").2,
        AlterTableAction::Drop(strs(&["c"]), None)
    );
    assert_eq!(
        alter("ALTER TABLE t DROP c USING TIMESTAMP 42").2,
        AlterTableAction::Drop(strs(&["c"]), Some(42))
    );
    let a = alter("ALTER TABLE t DROP IF EXISTS (c1, c2)");
    assert_eq!(a.2, AlterTableAction::Drop(strs(&["c1", "c2"]), None));
    assert!(a.4);
    assert_eq!(
        alter("ALTER TABLE t RENAME a TO b AND c TO d").2,
        AlterTableAction::Rename(vec![("a".into(), "b".into()), ("c".into(), "d".into())])
    );
    assert_eq!(
        alter("ALTER TABLE t ALTER c TYPE blob").2,
        AlterTableAction::AlterType("c".into(), native("blob"))
    );
    assert_eq!(
        alter("ALTER COLUMNFAMILY t WITH comment = 'x' AND gc_grace_seconds = 0").2,
        AlterTableAction::With(Properties {
            values: vec![
                prop("comment", PropertyValue::Constant(lit_s("x"))),
                prop(
                    "gc_grace_seconds",
                    PropertyValue::Constant(Literal::Integer("0".into()))
                ),
            ],
            ..Properties::default()
        })
    );
    assert_eq!(
        p("DROP TABLE ks.t"),
        Statement::DropTable {
            name: qks("ks", "t"),
            if_exists: false
        }
    );
    assert_eq!(
        p("DROP COLUMNFAMILY IF EXISTS t"),
        Statement::DropTable {
            name: qn("t"),
            if_exists: true
        }
    );
    assert_eq!(p("TRUNCATE t"), Statement::Truncate(qn("t")));
    assert_eq!(
        p("TRUNCATE TABLE ks.t;"),
        Statement::Truncate(qks("ks", "t"))
    );
    assert_eq!(p("truncate columnfamily t"), Statement::Truncate(qn("t")));
}

// ---- types --------------------------------------------------------------------------------

#[test]
fn type_statements() {
    assert_eq!(
        p("CREATE TYPE IF NOT EXISTS ks.address (street text, zip int, \"Tags\" set<text>,)"),
        Statement::CreateType {
            name: qks("ks", "address"),
            if_not_exists: true,
            fields: vec![
                ("street".into(), native("text")),
                ("zip".into(), native("int")),
                ("Tags".into(), TypeExpr::Set(bx(native("text")))),
            ],
        }
    );
    let alter = |s: &str| match p(s) {
        Statement::AlterType {
            name,
            if_exists,
            action,
            if_field_not_exists,
            if_field_exists,
        } => (
            name,
            if_exists,
            action,
            if_field_not_exists,
            if_field_exists,
        ),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        alter("ALTER TYPE address ADD country text"),
        (
            qn("address"),
            false,
            AlterTypeAction::Add("country".into(), native("text")),
            false,
            false
        )
    );
    assert_eq!(
        alter("ALTER TYPE IF EXISTS ks.address ADD IF NOT EXISTS c text"),
        (
            qks("ks", "address"),
            true,
            AlterTypeAction::Add("c".into(), native("text")),
            true,
            false
        )
    );
    assert_eq!(
        alter("ALTER TYPE a RENAME IF EXISTS x TO y AND z TO w"),
        (
            qn("a"),
            false,
            AlterTypeAction::Rename(vec![("x".into(), "y".into()), ("z".into(), "w".into())]),
            false,
            true
        )
    );
    assert_eq!(
        alter("ALTER TYPE a ALTER f TYPE blob").2,
        AlterTypeAction::AlterField("f".into(), native("blob"))
    );
    assert_eq!(
        p("DROP TYPE IF EXISTS ks.address"),
        Statement::DropType {
            name: qks("ks", "address"),
            if_exists: true
        }
    );
    assert_eq!(
        err("CREATE TYPE byte (a int)").message,
        "Invalid (reserved) user type name byte"
    );
    assert!(parse("CREATE TYPE int (a int)").is_err());
    assert!(parse("CREATE TYPE key (a int)").is_ok());
}

// ---- indexes ------------------------------------------------------------------------------

#[test]
fn index_statements() {
    assert_eq!(
        p("CREATE INDEX ON t (v)"),
        Statement::CreateIndex {
            name: None,
            table: qn("t"),
            target: IndexTarget::Column("v".into()),
            if_not_exists: false,
            custom_class: None,
            properties: Properties::default(),
        }
    );
    let target = |s: &str| match p(s) {
        Statement::CreateIndex { target, .. } => target,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        target("CREATE INDEX i ON t (keys(m))"),
        IndexTarget::Keys("m".into())
    );
    assert_eq!(
        target("CREATE INDEX i ON t (VALUES(m))"),
        IndexTarget::Values("m".into())
    );
    assert_eq!(
        target("CREATE INDEX i ON t (entries(m))"),
        IndexTarget::Entries("m".into())
    );
    assert_eq!(
        target("CREATE INDEX i ON t (full(l))"),
        IndexTarget::Full("l".into())
    );
    assert_eq!(
        target("CREATE INDEX i ON t (keys)"),
        IndexTarget::Column("keys".into())
    );
    assert_eq!(
        target(r#"CREATE INDEX i ON t ("Values")"#),
        IndexTarget::Column("Values".into())
    );
    assert_eq!(
        p("CREATE CUSTOM INDEX IF NOT EXISTS idx ON ks.t (v) USING 'org.apache.cassandra.index.sasi.SASIIndex' \
           WITH OPTIONS = {'mode': 'CONTAINS'}"),
        Statement::CreateIndex {
            name: Some("idx".into()),
            table: qks("ks", "t"),
            target: IndexTarget::Column("v".into()),
            if_not_exists: true,
            custom_class: Some("org.apache.cassandra.index.sasi.SASIIndex".into()),
            properties: Properties {
                values: vec![prop(
                    "options",
                    PropertyValue::Map(vec![(lit_s("mode"), lit_s("CONTAINS"))])
                )],
                ..Properties::default()
            },
        }
    );
    assert!(matches!(
        p("CREATE INDEX i ON t (v) USING 'sai'"),
        Statement::CreateIndex { custom_class: Some(c), .. } if c == "sai"
    ));
    assert_eq!(
        err("CREATE CUSTOM INDEX ON t (v)").message,
        "CUSTOM index requires specifying the index class"
    );
    assert_eq!(
        p("DROP INDEX ks.idx"),
        Statement::DropIndex {
            name: qks("ks", "idx"),
            if_exists: false
        }
    );
    assert_eq!(
        p("DROP INDEX IF EXISTS idx"),
        Statement::DropIndex {
            name: qn("idx"),
            if_exists: true
        }
    );
}

// ---- DESCRIBE -----------------------------------------------------------------------------

#[test]
fn describe_forms() {
    let d = |s: &str| desc(s).target;
    assert_eq!(d("DESCRIBE KEYSPACES"), DescribeTarget::Keyspaces);
    assert_eq!(
        d("DESC KEYSPACE ks"),
        DescribeTarget::Keyspace(Some("ks".into()))
    );
    assert_eq!(
        d("DESC KEYSPACE \"Ks\""),
        DescribeTarget::Keyspace(Some("Ks".into()))
    );
    assert_eq!(d("DESC KEYSPACE"), DescribeTarget::Keyspace(None));
    let o = desc("DESC ONLY KEYSPACE k");
    assert_eq!(o.target, DescribeTarget::Keyspace(Some("k".into())));
    assert!(o.only && !o.with_internals);
    assert_eq!(d("DESC TABLES"), DescribeTarget::Tables);
    assert_eq!(d("DESC TABLE ks.t"), DescribeTarget::Table(qks("ks", "t")));
    assert_eq!(d("DESC TABLE t"), DescribeTarget::Table(qn("t")));
    assert_eq!(d("DESC COLUMNFAMILY t"), DescribeTarget::Table(qn("t")));
    assert_eq!(d("DESC COLUMNFAMILIES"), DescribeTarget::Tables);
    assert_eq!(d("DESC TYPES"), DescribeTarget::Types);
    assert_eq!(d("DESC TYPE t"), DescribeTarget::Type(qn("t")));
    assert_eq!(d("DESC TYPE ks.t"), DescribeTarget::Type(qks("ks", "t")));
    assert_eq!(d("DESC FUNCTIONS"), DescribeTarget::Functions);
    assert_eq!(
        d("DESC FUNCTION ks.f"),
        DescribeTarget::Function(qks("ks", "f"))
    );
    assert_eq!(d("DESC AGGREGATES"), DescribeTarget::Aggregates);
    assert_eq!(d("DESC AGGREGATE a"), DescribeTarget::Aggregate(qn("a")));
    assert_eq!(d("DESC INDEX i"), DescribeTarget::Index(qn("i")));
    assert_eq!(d("DESC INDEX ks.i"), DescribeTarget::Index(qks("ks", "i")));
    assert_eq!(
        d("DESC MATERIALIZED VIEW v"),
        DescribeTarget::MaterializedView(qn("v"))
    );
    assert_eq!(d("DESC SCHEMA"), DescribeTarget::Schema);
    assert_eq!(d("DESC FULL SCHEMA"), DescribeTarget::FullSchema);
    assert_eq!(d("DESC CLUSTER"), DescribeTarget::Cluster);
    assert_eq!(d("describe cluster;"), DescribeTarget::Cluster);
    assert_eq!(d("DESC name"), DescribeTarget::Name(qn("name")));
    assert_eq!(d("DESC ks.name"), DescribeTarget::Name(qks("ks", "name")));
    assert_eq!(d("DESC type"), DescribeTarget::Name(qn("type")));
    assert_eq!(d("DESC \"MyTable\""), DescribeTarget::Name(qn("MyTable")));
    let w = desc("DESCRIBE KEYSPACE ks WITH INTERNALS");
    assert!(w.with_internals);
    assert_eq!(w.target, DescribeTarget::Keyspace(Some("ks".into())));
    assert!(desc("DESC SCHEMA WITH INTERNALS").with_internals);
    assert!(desc("DESC KEYSPACE WITH INTERNALS").with_internals);
    assert!(desc("DESC ks.t WITH INTERNALS").with_internals);
}

// ---- literals and terms -------------------------------------------------------------------

#[test]
fn literal_kinds() {
    let lit = |s: &str| match term(s) {
        Term::Literal(l) => l,
        other => panic!("{s}: {other:?}"),
    };
    assert_eq!(lit("'it''s'"), lit_s("it's"));
    assert_eq!(lit("''"), lit_s(""));
    assert_eq!(
        lit("$$dollar 'quoted' $ text$$"),
        lit_s("dollar 'quoted' $ text")
    );
    assert_eq!(lit("'multi\nline'"), lit_s("multi\nline"));
    assert_eq!(lit("42"), Literal::Integer("42".into()));
    assert_eq!(lit("-42"), Literal::Integer("-42".into()));
    assert_eq!(lit("- 42"), Literal::Integer("-42".into()));
    assert_eq!(
        lit("123456789012345678901234567890"),
        Literal::Integer("123456789012345678901234567890".into())
    );
    assert_eq!(lit("1.5"), Literal::Float("1.5".into()));
    assert_eq!(lit("1e10"), Literal::Float("1e10".into()));
    assert_eq!(lit("-2.5E-3"), Literal::Float("-2.5E-3".into()));
    assert_eq!(lit("NaN"), Literal::Float("NaN".into()));
    assert_eq!(lit("-nan"), Literal::Float("NaN".into()));
    assert_eq!(lit("Infinity"), Literal::Float("Infinity".into()));
    assert_eq!(lit("-Infinity"), Literal::Float("-Infinity".into()));
    assert_eq!(lit("true"), Literal::Boolean(true));
    assert_eq!(lit("FALSE"), Literal::Boolean(false));
    assert_eq!(
        lit("550e8400-e29b-41d4-a716-446655440000"),
        Literal::Uuid("550e8400-e29b-41d4-a716-446655440000".into())
    );
    assert_eq!(lit("0xCAFE"), Literal::Blob(vec![0xca, 0xfe]));
    assert_eq!(lit("0x00ff10"), Literal::Blob(vec![0, 255, 16]));
    assert_eq!(lit("0x"), Literal::Blob(vec![]));
    for d in [
        "1h30m",
        "12mo3d",
        "1y2mo",
        "1µs",
        "1us",
        "3ns",
        "10ms",
        "P1DT2H",
        "P1W",
        "P0001-02-03T04:05:06",
        "PT0S",
    ] {
        assert_eq!(lit(d), Literal::Duration(d.into()), "{d}");
    }
    assert_eq!(lit("-2d"), Literal::Duration("-2d".into()));
    assert_eq!(lit("-P1D"), Literal::Duration("-P1D".into()));
    assert_eq!(lit("null"), Literal::Null);
    assert_eq!(lit("NULL"), Literal::Null);
}

#[test]
fn collection_and_function_terms() {
    assert_eq!(term("[]"), Term::List(vec![]));
    assert_eq!(
        term("[1, 2, 3]"),
        Term::List(vec![int("1"), int("2"), int("3")])
    );
    assert_eq!(term("{}"), Term::Set(vec![]));
    assert_eq!(term("{'a', 'b'}"), Term::Set(vec![text("a"), text("b")]));
    assert_eq!(
        term("{'a': 1, 'b': [2]}"),
        Term::Map(vec![
            (text("a"), int("1")),
            (text("b"), Term::List(vec![int("2")]))
        ])
    );
    assert_eq!(
        term("{1: {2: 3}}"),
        Term::Map(vec![(int("1"), Term::Map(vec![(int("2"), int("3"))]))])
    );
    assert_eq!(
        term(r#"{street: '1 Main', "Zip": 12345, key: ?}"#),
        Term::Udt(vec![
            ("street".into(), text("1 Main")),
            ("Zip".into(), int("12345")),
            ("key".into(), bind(0)),
        ])
    );
    assert_eq!(
        term("(1, 'a', null)"),
        Term::Tuple(vec![int("1"), text("a"), null()])
    );
    assert_eq!(term("((1))"), int("1"));
    assert_eq!(term("now()"), func("now", vec![]));
    assert_eq!(term("uuid()"), func("uuid", vec![]));
    assert_eq!(
        term("toTimestamp(now())"),
        func("totimestamp", vec![func("now", vec![])])
    );
    assert_eq!(
        term("blobAsInt(0x0000002a)"),
        func(
            "blobasint",
            vec![Term::Literal(Literal::Blob(vec![0, 0, 0, 42]))]
        )
    );
    assert_eq!(
        term("ks.f(1, ?)"),
        Term::Function {
            keyspace: Some("ks".into()),
            name: "f".into(),
            args: vec![int("1"), bind(0)]
        }
    );
    assert_eq!(
        term(r#""MyKs"."MyF"()"#),
        Term::Function {
            keyspace: Some("MyKs".into()),
            name: "MyF".into(),
            args: vec![]
        }
    );
    assert_eq!(term("token(1)"), func("token", vec![int("1")]));
    assert_eq!(term("(int) ?"), Term::TypeHint(native("int"), bx(bind(0))));
    assert_eq!(
        term("(bigint) -5"),
        Term::TypeHint(native("bigint"), bx(int("-5")))
    );
    assert_eq!(
        term("(list<frozen<map<int, text>>>) [{1: 'a'}]"),
        Term::TypeHint(
            TypeExpr::List(bx(TypeExpr::Frozen(bx(TypeExpr::Map(
                bx(native("int")),
                bx(native("text"))
            ))))),
            bx(Term::List(vec![Term::Map(vec![(int("1"), text("a"))])]))
        )
    );
    assert_eq!(
        term("(address) {street: 'x'}"),
        Term::TypeHint(
            TypeExpr::Udt(qn("address")),
            bx(Term::Udt(vec![("street".into(), text("x"))]))
        )
    );
    assert_eq!(term("-(1)"), int("-1"));
    assert_eq!(term("-?"), Term::Negate(bx(bind(0))));
    assert_eq!(term("-now()"), Term::Negate(bx(func("now", vec![]))));
    assert_eq!(
        term("1 + 2 * 3 - 4 / 5 % 6"),
        Term::Binary(
            BinaryOp::Sub,
            bx(Term::Binary(
                BinaryOp::Add,
                bx(int("1")),
                bx(Term::Binary(BinaryOp::Mul, bx(int("2")), bx(int("3"))))
            )),
            bx(Term::Binary(
                BinaryOp::Mod,
                bx(Term::Binary(BinaryOp::Div, bx(int("4")), bx(int("5")))),
                bx(int("6"))
            ))
        )
    );
    assert_eq!(
        term("(1 + 2) * 3"),
        Term::Binary(
            BinaryOp::Mul,
            bx(Term::Binary(BinaryOp::Add, bx(int("1")), bx(int("2")))),
            bx(int("3"))
        )
    );
    assert_eq!(
        term("1.5 * -2.0"),
        Term::Binary(BinaryOp::Mul, bx(float("1.5")), bx(float("-2.0")))
    );
    assert_eq!(
        term("1 - -2"),
        Term::Binary(BinaryOp::Sub, bx(int("1")), bx(int("-2")))
    );
    assert_eq!(
        term("? * 2"),
        Term::Binary(BinaryOp::Mul, bx(bind(0)), bx(int("2")))
    );
}

#[test]
fn bind_marker_numbering() {
    let parsed = parse(
        "SELECT * FROM t WHERE a = ? AND b = :b AND c IN (?, :c) AND d = :b AND token(k) > ? LIMIT ?",
    )
    .unwrap();
    assert_eq!(parsed.bind_count, 7);
    let Statement::Select(s) = parsed.statement else {
        panic!()
    };
    assert_eq!(
        s.where_clause
            .iter()
            .map(|r| r.rhs.clone())
            .collect::<Vec<_>>(),
        vec![
            bind(0),
            named(1, "b"),
            Term::List(vec![bind(2), named(3, "c")]),
            named(4, "b"),
            bind(5),
        ]
    );
    assert_eq!(s.limit, Some(bind(6)));
    let parsed = parse("SELECT ?, f(?) FROM t WHERE k = ?").unwrap();
    assert_eq!(parsed.bind_count, 3);
    let parsed = parse("UPDATE t USING TTL ? SET a = ?, m[?] = ? WHERE k = ? IF v = ?").unwrap();
    assert_eq!(parsed.bind_count, 6);
    let Statement::Update(u) = parsed.statement else {
        panic!()
    };
    assert_eq!(u.using.ttl, Some(bind(0)));
    assert_eq!(
        u.assignments[1],
        Assignment::SetElement {
            column: "m".into(),
            key: bind(2),
            value: bind(3)
        }
    );
    // Quoted marker names keep their case.
    assert_eq!(term(r#":"MyName""#), named(0, "MyName"));
    assert_eq!(term(":MyName"), named(0, "myname"));
    assert_eq!(parse("SELECT * FROM t").unwrap().bind_count, 0);
    // Type hints and failed speculation don't consume markers.
    assert_eq!(
        parse("INSERT INTO t (a, b) VALUES ((int) ?, (?, ?))")
            .unwrap()
            .bind_count,
        3
    );
}

// ---- several statements, comments ---------------------------------------------------------

#[test]
fn many_statements_and_comments() {
    let many = parse_many(
        "-- a comment
         USE ks; // another
         /* block
            comment */ SELECT * FROM t WHERE k = ?;
         ;
         INSERT INTO t (k) VALUES (?) ;
         DESC KEYSPACES",
    )
    .unwrap();
    assert_eq!(many.len(), 4);
    assert_eq!(many[0].statement, Statement::Use("ks".into()));
    assert_eq!(many[1].bind_count, 1);
    assert_eq!(many[2].bind_count, 1);
    assert!(matches!(many[3].statement, Statement::Describe(_)));
    assert!(parse_many("").unwrap().is_empty());
    assert!(parse_many(" ; -- nothing\n ;").unwrap().is_empty());
    assert_eq!(parse_many("USE a; USE b;").unwrap().len(), 2);
    assert_eq!(
        parse_many("USE a USE b").unwrap_err().to_string(),
        "line 1:6 mismatched input 'USE' expecting ';' (USE a [USE]...)"
    );
    assert_eq!(p("SELECT * FROM t; -- trailing"), p("SELECT * FROM t"));
    assert_eq!(p("SELECT * FROM t /* c */ ;;"), p("SELECT * FROM t"));
    assert_eq!(
        err_text("USE a; USE b"),
        "line 1:7 mismatched input 'USE' expecting EOF (USE a; [USE]...)"
    );
}

// ---- errors -------------------------------------------------------------------------------

#[test]
fn error_messages() {
    assert_eq!(
        err_text("SELEC * FROM t"),
        "line 1:0 no viable alternative at input 'SELEC' ([SELEC]...)"
    );
    assert_eq!(
        err_text("SELECT * zeppelin t"),
        "line 1:9 mismatched input 'zeppelin' expecting K_FROM (SELECT * [zeppelin]...)"
    );
    assert_eq!(
        err_text("SELECT * zeppelin"),
        "line 1:9 mismatched input 'zeppelin' expecting K_FROM (SELECT * [zeppelin])"
    );
    assert_eq!(
        err_text("SELECT * FROM"),
        "line 1:13 no viable alternative at input '<EOF>'"
    );
    assert_eq!(
        err_text("SELECT FROM t"),
        "line 1:7 no viable alternative at input 'FROM' (SELECT [FROM]...)"
    );
    assert_eq!(
        err_text("SELECT * FROM t WHERE a = 'abc"),
        "line 1:30 mismatched character '<EOF>' expecting '''"
    );
    assert_eq!(
        err_text("INSERT INTO t (a) VALUES (0xABC)"),
        "line 1:26 Invalid hex constant 0xABC: an odd number of hex digits"
    );
    assert_eq!(
        err_text("SELECT * FROM t WHERE a = 1 blah"),
        "line 1:28 mismatched input 'blah' expecting EOF (...t WHERE a = 1 [blah])"
    );
    // Only the last ten tokens (whitespace counts) before the offending one are shown.
    assert_eq!(
        err_text("SELECT a, b, c FROM t WHERE a = 1 AND b = 2 blah"),
        "line 1:44 mismatched input 'blah' expecting EOF (...1 AND b = 2 [blah])"
    );
    // Multi-line: position on the right line, lines joined in the snippet.
    assert_eq!(
        err_text("SELECT *\nFROM t\nWHERE a == 1"),
        "line 3:9 no viable alternative at input '=' (...FROM tWHERE a =[=]...)"
    );
    assert_eq!(
        err_text("INSERT INTO t (a) VALUES ('x' 'y')"),
        "line 1:30 mismatched input 'y' expecting ')' (... (a) VALUES ('x' ['y']...)"
    );
    assert_eq!(
        err_text("CREATE TABLE t (a int PRIMARY KEY) WITH"),
        "line 1:39 no viable alternative at input '<EOF>'"
    );
    assert_eq!(
        err_text(""),
        "line 1:0 no viable alternative at input '<EOF>'"
    );
    assert_eq!(
        err_text("SELECT * FROM t WHERE a = 1 & 2"),
        "line 1:28 no viable alternative at character '&'"
    );
    // A grammar error before a lexing error wins, as in Cassandra.
    assert_eq!(
        err_text("SELEC * FROM t WHERE a = 'abc"),
        "line 1:0 no viable alternative at input 'SELEC' ([SELEC]...)"
    );
    assert_eq!(
        err_text("SELECT * FROM t WHERE select = 1"),
        "line 1:22 no viable alternative at input 'select' (SELECT * FROM t WHERE [select]...)"
    );
    assert_eq!(
        err("SELECT * FROM ?").message,
        "Bind variables cannot be used for table names"
    );
    assert_eq!(
        err_text("CREATE TABLE t (a list<int PRIMARY KEY)"),
        "line 1:27 mismatched input 'PRIMARY' expecting '>' (... t (a list<int [PRIMARY]...)"
    );
    // Parsed, then refused by the query layer (`not_offered.rs`).
    assert!(matches!(
        parse("CREATE FUNCTION f() CALLED ON NULL INPUT RETURNS int LANGUAGE java AS 'x'")
            .map(|p| p.statement),
        Ok(Statement::NotOffered(NotOffered::CreateFunction))
    ));
    assert!(parse("SELECT * FROM t WHERE").is_err());
    assert!(parse("INSERT INTO t (a) VALUES ()").is_err());
    assert!(parse("SELECT * FROM t WHERE a IN ((1, 2)").is_err());
    assert!(parse("SELECT * FROM t WHERE (a, b) = ()").is_err());
    // The error converts to a std error.
    let e: Box<dyn std::error::Error> = Box::new(err("SELEC"));
    assert!(e.to_string().starts_with("line 1:0"));
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    for (open, close) in [("(", ")"), ("[", "]"), ("{", "}")] {
        let s = format!(
            "INSERT INTO t (a) VALUES ({}1{})",
            open.repeat(10_000),
            close.repeat(10_000)
        );
        assert!(parse(&s).is_err());
    }
    let s = format!(
        "SELECT * FROM t WHERE {}a = 1{}",
        "(".repeat(10_000),
        ")".repeat(10_000)
    );
    assert!(parse(&s).is_err());
    let s = format!(
        "SELECT {}a{} FROM t",
        "(".repeat(10_000),
        ")".repeat(10_000)
    );
    assert!(parse(&s).is_err());
    let s = format!("SELECT {}a FROM t", "-".repeat(10_000));
    assert!(parse(&s).is_err());
    let s = format!(
        "CREATE TABLE t (a {}int{} PRIMARY KEY)",
        "frozen<".repeat(10_000),
        ">".repeat(10_000)
    );
    assert!(parse(&s).is_err());
    // Reasonable nesting is fine.
    let s = format!(
        "INSERT INTO t (a) VALUES ({}1{})",
        "[".repeat(30),
        "]".repeat(30)
    );
    assert!(parse(&s).is_ok());
}

// ---- no panics ----------------------------------------------------------------------------

const VALID: &[&str] = &[
    "SELECT * FROM t",
    "SELECT JSON DISTINCT a, b AS c, count(*), writetime(v), ttl(v), CAST(x AS text), u.f, m['k'], m[1..2], m[..?], token(a, b), ks.f(1) FROM ks.t WHERE a = ? AND (b, c) > (1, 2) AND d IN (1, 2) AND e CONTAINS KEY 'k' AND f IS NOT NULL AND m['x'] = 1 GROUP BY a ORDER BY b DESC PER PARTITION LIMIT 1 LIMIT 10 ALLOW FILTERING;",
    "SELECT * FROM system.local WHERE key='local'",
    "SELECT keyspace_name, toJson(replication) AS replication FROM system_schema.keyspaces",
    "SELECT a + b * -c, (int) ?, [1, 2], {'a': 1}, {f: 1} FROM t WHERE token(k) > token(?) AND (a, b) IN ((1, 2), (3, 4))",
    "INSERT INTO t (a, b, c, d, e, f) VALUES (1, 'it''s', $$x$$, 0xCAFE, 1h30m, 550e8400-e29b-41d4-a716-446655440000) IF NOT EXISTS USING TTL 10 AND TIMESTAMP 5",
    "INSERT INTO t JSON '{\"a\": 1}' DEFAULT UNSET",
    "UPDATE t USING TTL 5 SET a = a + [1], b = {2} + b, c = c - {'x'}, d += 1, e -= 2, m['k'] = 'v', u.f = -1.5e3, g = toTimestamp(now()) WHERE k = 1 IF a = 1 AND m['k'] IN (1, 2)",
    "DELETE a, m['k'], u.f FROM t USING TIMESTAMP 1 WHERE k = 1 IF EXISTS",
    "BEGIN UNLOGGED BATCH USING TIMESTAMP 1 INSERT INTO t (a) VALUES (?); UPDATE t SET a = 1 WHERE k = 2 DELETE FROM t WHERE k = 3; APPLY BATCH",
    "USE \"MyKs\"",
    "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1} AND durable_writes = true",
    "ALTER KEYSPACE ks WITH durable_writes = false",
    "DROP KEYSPACE IF EXISTS ks",
    "CREATE TABLE IF NOT EXISTS ks.t (k int, c text, s set<frozen<tuple<int, text>>> static, v vector<float, 3>, m map<text, frozen<udt>>, PRIMARY KEY ((k), c)) WITH CLUSTERING ORDER BY (c DESC) AND comment = 'x' AND compaction = {'class': 'x'} AND COMPACT STORAGE",
    "ALTER TABLE t ADD IF NOT EXISTS (a int, b text)",
    "ALTER TABLE t DROP (a, b)",
    "ALTER TABLE t RENAME a TO b AND c TO d",
    "ALTER TABLE t ALTER a TYPE blob",
    "ALTER TABLE t WITH gc_grace_seconds = 0",
    "DROP TABLE IF EXISTS ks.t",
    "TRUNCATE TABLE t",
    "CREATE TYPE IF NOT EXISTS ks.addr (street text, zip int)",
    "ALTER TYPE addr ADD c text",
    "ALTER TYPE addr RENAME a TO b",
    "DROP TYPE addr",
    "CREATE CUSTOM INDEX IF NOT EXISTS i ON t (keys(m)) USING 'cls' WITH OPTIONS = {'a': 'b'}",
    "DROP INDEX IF EXISTS ks.i",
    "DESCRIBE KEYSPACE ks WITH INTERNALS",
    "DESC FULL SCHEMA",
    "DESC ONLY KEYSPACE k",
    "DESC MATERIALIZED VIEW v",
    "DESC ks.name",
    "CREATE MATERIALIZED VIEW v AS SELECT * FROM t WHERE a IS NOT NULL PRIMARY KEY (a)",
    "DROP FUNCTION IF EXISTS ks.f (int, frozen<list<text>>)",
    "CREATE TRIGGER IF NOT EXISTS tr ON ks.t USING 'cls'",
    "DROP TRIGGER tr ON t",
    "GRANT SELECT ON KEYSPACE ks TO r",
];

/// A small deterministic generator (xorshift) for the mutation sweep.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn char_boundaries(s: &str) -> Vec<usize> {
    s.char_indices().map(|(i, _)| i).chain([s.len()]).collect()
}

#[test]
fn valid_statements_parse() {
    for s in VALID {
        if let Err(e) = parse(s) {
            panic!("{s}\n  => {e}");
        }
    }
    let all = VALID.join(";\n");
    assert_eq!(parse_many(&all).unwrap().len(), VALID.len());
}

#[test]
fn no_panic_on_prefixes() {
    for s in VALID {
        for i in char_boundaries(s) {
            let _ = parse(&s[..i]);
            let _ = parse_many(&s[..i]);
        }
    }
}

#[test]
fn no_panic_on_mutations() {
    const PIECES: &[&str] = &[
        "'",
        "\"",
        "$$",
        "$",
        "-",
        "--",
        "/*",
        "*/",
        "//",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "<",
        ">",
        "=",
        "!=",
        "?",
        ":",
        ":x",
        ";",
        ".",
        "..",
        ",",
        "0x",
        "0xA",
        "1",
        "-1",
        "1.5e",
        "1h",
        "P",
        "P1",
        "é",
        "µs",
        "\n",
        " ",
        "SELECT",
        "FROM",
        "WHERE",
        "AND",
        "IF",
        "NOT",
        "EXISTS",
        "token",
        "key",
        "(int)",
        "frozen<",
        "map<",
        "NaN",
        "-Infinity",
        "null",
        "+",
        "*",
        "%",
        "CONTAINS",
        "KEY",
        "IN",
        "IS",
        "JSON",
        "DISTINCT",
        "count(*)",
        "\"\"",
        "{a:",
        "APPLY",
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..4000 {
        let base = VALID[rng.below(VALID.len())];
        let mut s = base.to_string();
        for _ in 0..1 + rng.below(3) {
            let bounds = char_boundaries(&s);
            let at = bounds[rng.below(bounds.len())];
            match rng.below(4) {
                0 => {
                    // delete a span
                    let end_idx = bounds.iter().position(|&b| b == at).unwrap() + 1 + rng.below(6);
                    let end = bounds[end_idx.min(bounds.len() - 1)];
                    s.replace_range(at..end, "");
                }
                1 | 2 => {
                    let piece = PIECES[rng.below(PIECES.len())];
                    s.insert_str(at, piece);
                }
                _ => {
                    // duplicate a span elsewhere
                    let end_idx = bounds.iter().position(|&b| b == at).unwrap() + 1 + rng.below(12);
                    let end = bounds[end_idx.min(bounds.len() - 1)];
                    let piece = s[at..end].to_string();
                    let bounds = char_boundaries(&s);
                    let to = bounds[rng.below(bounds.len())];
                    s.insert_str(to, &piece);
                }
            }
        }
        let r = parse(&s);
        let _ = parse_many(&s);
        if let Err(e) = r {
            // Positions stay inside the text.
            let lines: Vec<&str> = s.split('\n').collect();
            assert!(e.line >= 1 && e.line <= lines.len(), "{s:?}: {e}");
            assert!(e.col <= lines[e.line - 1].chars().count(), "{s:?}: {e}");
        }
    }
}

#[test]
fn unreserved_keywords_name_things_reserved_ones_do_not() {
    const UNRESERVED: &[&str] = &[
        "key",
        "keys",
        "type",
        "types",
        "ttl",
        "writetime",
        "maxwritetime",
        "count",
        "values",
        "json",
        "distinct",
        "filtering",
        "cluster",
        "clustering",
        "users",
        "user",
        "role",
        "roles",
        "static",
        "frozen",
        "list",
        "map",
        "tuple",
        "vector",
        "as",
        "compact",
        "storage",
        "tables",
        "keyspaces",
        "exists",
        "custom",
        "contains",
        "like",
        "per",
        "partition",
        "group",
        "default",
        "unset",
        "internals",
        "only",
        "function",
        "functions",
        "aggregate",
        "aggregates",
        "cast",
        "options",
        "password",
        "login",
        "superuser",
        "all",
        "text",
        "int",
        "timestamp",
        "date",
        "time",
        "counter",
        "blob",
        "uuid",
        "varchar",
        "trigger",
        "access",
        "ann",
        "masked",
        "one",
        "quorum",
        "any",
    ];
    for w in UNRESERVED {
        let statements = [
            format!("SELECT {w} FROM {w}.{w} WHERE {w} = :{w} AND {w} IN ? ORDER BY {w}"),
            format!("SELECT a AS {w} FROM t"),
            format!("INSERT INTO {w} ({w}) VALUES ({{{w}: 1}})"),
            format!("UPDATE {w} SET {w} = 1, u.{w} = 2, m[{w}()] = 3 WHERE {w} = 0 IF {w} = 1"),
            format!("DELETE {w} FROM {w} WHERE {w} = 0"),
            format!("CREATE TABLE {w} ({w} int PRIMARY KEY) WITH {w} = 1"),
            format!("CREATE KEYSPACE {w} WITH replication = {{}}"),
            format!("USE {w}"),
            format!("CREATE INDEX {w} ON {w} ({w})"),
            format!("DROP INDEX {w}.{w}"),
            format!("ALTER TABLE {w} RENAME {w} TO b"),
        ];
        for s in &statements {
            if let Err(e) = parse(s) {
                panic!("{s}\n  => {e}");
            }
        }
    }
    let s = sel("SELECT key FROM users WHERE role = 'x' AND type = 1");
    assert_eq!(s.table, qn("users"));
    assert_eq!(
        s.where_clause,
        vec![
            rel("role", Operator::Eq, text("x")),
            rel("type", Operator::Eq, int("1"))
        ]
    );
    const RESERVED: &[&str] = &[
        "select",
        "from",
        "where",
        "and",
        "insert",
        "update",
        "with",
        "limit",
        "using",
        "use",
        "set",
        "begin",
        "unlogged",
        "batch",
        "apply",
        "truncate",
        "delete",
        "in",
        "create",
        "schema",
        "keyspace",
        "table",
        "columnfamily",
        "materialized",
        "view",
        "index",
        "on",
        "to",
        "drop",
        "primary",
        "into",
        "alter",
        "rename",
        "add",
        "order",
        "by",
        "asc",
        "desc",
        "allow",
        "if",
        "is",
        "grant",
        "of",
        "revoke",
        "modify",
        "authorize",
        "describe",
        "execute",
        "norecursive",
        "token",
        "null",
        "not",
        "nan",
        "infinity",
        "or",
        "entries",
        "full",
        "true",
        "false",
    ];
    for w in RESERVED {
        for s in [
            format!("SELECT a AS {w} FROM t"),
            format!("SELECT * FROM t WHERE {w} = 1"),
            format!("SELECT * FROM {w}"),
            format!("CREATE TABLE t ({w} int PRIMARY KEY)"),
        ] {
            assert!(parse(&s).is_err(), "{s} parsed");
        }
        // Quoted, anything goes.
        assert!(
            parse(&format!("SELECT \"{w}\" FROM \"{w}\"")).is_ok(),
            "{w}"
        );
    }
}
