//! The typed syntax tree the parser produces. Names are already normalized: unquoted
//! identifiers lower-cased, "quoted" ones kept as written. Terms are untyped here; the query
//! layer gives them a type from the column they are compared with or assigned to.

/// A possibly keyspace-qualified name: `ks.t` or `t`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QualifiedName {
    pub keyspace: Option<String>,
    pub name: String,
}

/// A type as written in CQL text. Resolved to `CqlType` by the schema layer (UDTs need the catalog).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeExpr {
    /// A native type name: int, text, varchar, ...
    Native(String),
    List(Box<TypeExpr>),
    Set(Box<TypeExpr>),
    Map(Box<TypeExpr>, Box<TypeExpr>),
    Tuple(Vec<TypeExpr>),
    Frozen(Box<TypeExpr>),
    Vector(Box<TypeExpr>, u32),
    /// A user-defined type, maybe keyspace-qualified.
    Udt(QualifiedName),
    /// `'java.class.Name'`
    Custom(String),
}

/// A constant as written. Numbers keep their text so that the typed conversion can check range
/// and precision (`varint`, `decimal`) exactly.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// 'text' or $$text$$, quotes removed and '' unescaped.
    String(String),
    /// An integer literal, sign included: "-12".
    Integer(String),
    /// A float literal as written: "1.5", "-2e10", "NaN", "-Infinity".
    Float(String),
    Boolean(bool),
    /// A uuid literal (unquoted), as written.
    Uuid(String),
    /// 0x... literal, decoded bytes.
    Blob(Vec<u8>),
    /// A duration literal such as 1h30m, P1DT2H, -2d (as written).
    Duration(String),
    Null,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

/// A value expression: the right-hand side of `=`, an element of VALUES (...), a function argument.
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    Literal(Literal),
    /// `?` or `:name`. `index` is the 0-based position of the marker in the statement (named
    /// markers get one too); `name` is set for `:name`.
    Bind {
        index: usize,
        name: Option<String>,
    },
    /// `[a, b]`
    List(Vec<Term>),
    /// `{a, b}`; also `{}` (an empty set or map: the type decides).
    Set(Vec<Term>),
    /// `{k: v, ...}`
    Map(Vec<(Term, Term)>),
    /// `(a, b, c)` with at least two elements (a parenthesised single term is the term itself).
    /// On the right of a multi-column relation (`(c1) = (1)`, `(c1) IN ((1), (2))`) a tuple
    /// literal stays a `Tuple` even with one element, to match the column tuple.
    Tuple(Vec<Term>),
    /// `{field: value, ...}` when every key is an identifier: a UDT literal. Parsers cannot tell
    /// `{a: 1}` (map with column-name key? no: map keys are terms) from a UDT, so a map literal whose keys
    /// are all bare identifiers is produced as `Udt`.
    Udt(Vec<(String, Term)>),
    /// `fname(args)`, `ks.fname(args)`; names lower-cased unless quoted.
    Function {
        keyspace: Option<String>,
        name: String,
        args: Vec<Term>,
    },
    /// `(type) term`: a type hint.
    TypeHint(TypeExpr, Box<Term>),
    /// `-term` when not a numeric literal.
    Negate(Box<Term>),
    Binary(BinaryOp, Box<Term>, Box<Term>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    Contains,
    ContainsKey,
    Like,
    IsNot,
}

impl Operator {
    pub fn as_str(&self) -> &'static str {
        match self {
            Operator::Eq => "=",
            Operator::Ne => "!=",
            Operator::Lt => "<",
            Operator::Le => "<=",
            Operator::Gt => ">",
            Operator::Ge => ">=",
            Operator::In => "IN",
            Operator::Contains => "CONTAINS",
            Operator::ContainsKey => "CONTAINS KEY",
            Operator::Like => "LIKE",
            Operator::IsNot => "IS NOT",
        }
    }
}

/// The left side of a relation.
#[derive(Debug, Clone, PartialEq)]
pub enum RelationLhs {
    Column(String),
    /// `col[key]` (map element) in a WHERE of an indexed entries query.
    Element(String, Term),
    /// `(c1, c2)`: multi-column relation.
    Tuple(Vec<String>),
    /// `token(a, b)`
    Token(Vec<String>),
    /// `name()`: a function of no arguments compared to a value (Cosmos DB's
    /// `COSMOS_CHANGEFEED_START_TIME() = '...'`); the name as written, lower-cased.
    Function(String),
}

/// The right side of `IN`: a list of terms, or a single bind marker for the whole list.
#[derive(Debug, Clone, PartialEq)]
pub enum InValues {
    List(Vec<Term>),
    Marker(Term),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Relation {
    pub lhs: RelationLhs,
    pub op: Operator,
    /// For `IN`: `Term::List` of the values (or a bind marker for the whole list); for
    /// `IS NOT NULL`: `Term::Literal(Literal::Null)`.
    pub rhs: Term,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Asc,
    Desc,
}

/// One item of a SELECT list.
#[derive(Debug, Clone, PartialEq)]
pub enum SelectorExpr {
    Column(String),
    /// `count(*)` / `COUNT(1)` both parse to `CountAll`.
    CountAll,
    Function {
        keyspace: Option<String>,
        name: String,
        args: Vec<SelectorExpr>,
    },
    /// `writetime(c)`, `maxwritetime(c)`, `ttl(c)`: of a column (`Column`) or of an element,
    /// slice or field of one (`Element` / `Slice` / `Field` chains over a `Column`).
    WriteTime(Box<SelectorExpr>),
    MaxWriteTime(Box<SelectorExpr>),
    Ttl(Box<SelectorExpr>),
    Cast(Box<SelectorExpr>, TypeExpr),
    /// `udt_col.field`
    Field(Box<SelectorExpr>, String),
    /// `col[term]`
    Element(Box<SelectorExpr>, Term),
    /// `col[from..to]` (either bound may be absent)
    Slice(Box<SelectorExpr>, Option<Term>, Option<Term>),
    /// A constant or bind marker in the selection.
    Term(Term),
    Binary(BinaryOp, Box<SelectorExpr>, Box<SelectorExpr>),
    /// `-selector` when not a numeric constant (`-1` is `Term(Literal::Integer("-1"))`).
    Negate(Box<SelectorExpr>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    pub expr: SelectorExpr,
    pub alias: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Selection {
    /// `*`
    All,
    List(Vec<Selector>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Select {
    pub table: QualifiedName,
    pub json: bool,
    pub distinct: bool,
    pub selection: Selection,
    pub where_clause: Vec<Relation>,
    pub group_by: Vec<String>,
    pub order_by: Vec<(String, Order)>,
    pub per_partition_limit: Option<Term>,
    pub limit: Option<Term>,
    pub allow_filtering: bool,
}

/// USING TTL / TIMESTAMP
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Using {
    pub ttl: Option<Term>,
    pub timestamp: Option<Term>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum InsertValues {
    /// `(cols) VALUES (terms)`
    Values {
        columns: Vec<String>,
        values: Vec<Term>,
    },
    /// `JSON '...' [DEFAULT NULL | DEFAULT UNSET]`
    Json { value: Term, default_unset: bool },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Insert {
    pub table: QualifiedName,
    pub values: InsertValues,
    pub if_not_exists: bool,
    pub using: Using,
}

/// One `SET` item of UPDATE.
#[derive(Debug, Clone, PartialEq)]
pub enum Assignment {
    /// `c = term`
    Set { column: String, value: Term },
    /// `c[key] = term`
    SetElement {
        column: String,
        key: Term,
        value: Term,
    },
    /// `c.field = term`
    SetField {
        column: String,
        field: String,
        value: Term,
    },
    /// `c = c + term` (also counters: `c = c + 1`)
    Append { column: String, value: Term },
    /// `c = term + c`
    Prepend { column: String, value: Term },
    /// `c = c - term`
    Remove { column: String, value: Term },
}

impl Assignment {
    /// The column an assignment writes.
    pub fn column(&self) -> &str {
        match self {
            Assignment::Set { column, .. }
            | Assignment::SetElement { column, .. }
            | Assignment::SetField { column, .. }
            | Assignment::Append { column, .. }
            | Assignment::Prepend { column, .. }
            | Assignment::Remove { column, .. } => column,
        }
    }
}
// `c += term` and `c -= term` parse as Append and Remove.

/// A condition in `IF ...`.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub column: String,
    /// `IF m[k] = ...`
    pub element: Option<Term>,
    /// `IF u.f = ...`
    pub field: Option<String>,
    pub op: Operator,
    /// For `IN`: a `Term::List` or a marker.
    pub value: Term,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Conditions {
    IfExists,
    IfNotExists,
    Columns(Vec<Condition>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub table: QualifiedName,
    pub using: Using,
    pub assignments: Vec<Assignment>,
    pub where_clause: Vec<Relation>,
    pub conditions: Option<Conditions>,
}

/// What DELETE removes: a whole column, a collection element or a UDT field.
#[derive(Debug, Clone, PartialEq)]
pub enum DeleteTarget {
    Column(String),
    Element(String, Term),
    Field(String, String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Delete {
    pub table: QualifiedName,
    pub targets: Vec<DeleteTarget>,
    pub using: Using,
    pub where_clause: Vec<Relation>,
    pub conditions: Option<Conditions>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchKind {
    Logged,
    Unlogged,
    Counter,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub kind: BatchKind,
    pub using: Using,
    /// Only Insert, Update and Delete.
    pub statements: Vec<Statement>,
}

/// The value of a `WITH name = value` property.
#[derive(Debug, Clone, PartialEq)]
pub enum PropertyValue {
    /// A constant: string, number, boolean (also a bare identifier, kept as a String).
    Constant(Literal),
    /// `{ 'k': 'v', ... }` with constant keys and values.
    Map(Vec<(Literal, Literal)>),
}

/// `WITH a = 1 AND b = {...} AND CLUSTERING ORDER BY (c DESC) AND COMPACT STORAGE`
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Properties {
    pub values: Vec<(String, PropertyValue)>,
    pub clustering_order: Vec<(String, Order)>,
    pub compact_storage: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDef {
    pub name: String,
    pub ty: TypeExpr,
    pub is_static: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateTable {
    pub name: QualifiedName,
    pub if_not_exists: bool,
    pub columns: Vec<ColumnDef>,
    /// Partition key columns, in order (from `PRIMARY KEY ((a, b), c)`, `PRIMARY KEY (a, c)` or
    /// an inline `a int PRIMARY KEY`).
    pub partition_key: Vec<String>,
    pub clustering: Vec<String>,
    pub properties: Properties,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AlterTableAction {
    Add(Vec<ColumnDef>),
    /// The columns, and the drop's timestamp (`USING TIMESTAMP`, micros; default: now).
    Drop(Vec<String>, Option<i64>),
    Rename(Vec<(String, String)>),
    AlterType(String, TypeExpr),
    With(Properties),
}

#[derive(Debug, Clone, PartialEq)]
pub enum AlterTypeAction {
    Add(String, TypeExpr),
    Rename(Vec<(String, String)>),
    AlterField(String, TypeExpr),
}

/// `CREATE INDEX ... ON t (target)`
#[derive(Debug, Clone, PartialEq)]
pub enum IndexTarget {
    /// `(col)`; for collections this means values.
    Column(String),
    Values(String),
    Keys(String),
    Entries(String),
    Full(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum DescribeTarget {
    Cluster,
    Keyspaces,
    /// `DESCRIBE KEYSPACE [k]` (None: the current keyspace)
    Keyspace(Option<String>),
    Tables,
    Table(QualifiedName),
    Types,
    Type(QualifiedName),
    Functions,
    Function(QualifiedName),
    Aggregates,
    Aggregate(QualifiedName),
    Index(QualifiedName),
    MaterializedView(QualifiedName),
    Schema,
    FullSchema,
    /// `DESCRIBE name`: a keyspace, table, type, ... whatever the name refers to.
    Name(QualifiedName),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Describe {
    pub target: DescribeTarget,
    /// `DESCRIBE ONLY KEYSPACE k` prints the keyspace alone.
    pub only: bool,
    /// `... WITH INTERNALS`
    pub with_internals: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    Select(Select),
    Insert(Insert),
    Update(Update),
    Delete(Delete),
    Batch(Batch),
    Use(String),
    CreateKeyspace {
        name: String,
        if_not_exists: bool,
        properties: Properties,
    },
    AlterKeyspace {
        name: String,
        if_exists: bool,
        properties: Properties,
    },
    DropKeyspace {
        name: String,
        if_exists: bool,
    },
    CreateTable(CreateTable),
    AlterTable {
        name: QualifiedName,
        if_exists: bool,
        action: AlterTableAction,
        /// `ADD IF NOT EXISTS ...`: columns that already exist are skipped.
        if_column_not_exists: bool,
        /// `DROP IF EXISTS ...` / `RENAME IF EXISTS ...`: missing columns are skipped.
        if_column_exists: bool,
    },
    DropTable {
        name: QualifiedName,
        if_exists: bool,
    },
    Truncate(QualifiedName),
    CreateType {
        name: QualifiedName,
        if_not_exists: bool,
        fields: Vec<(String, TypeExpr)>,
    },
    AlterType {
        name: QualifiedName,
        if_exists: bool,
        action: AlterTypeAction,
        /// `ADD IF NOT EXISTS f t`: nothing happens when the field exists.
        if_field_not_exists: bool,
        /// `RENAME IF EXISTS f TO g`: missing fields are skipped.
        if_field_exists: bool,
    },
    DropType {
        name: QualifiedName,
        if_exists: bool,
    },
    CreateIndex {
        /// None: Cassandra's default `<table>_<column>_idx`.
        name: Option<String>,
        table: QualifiedName,
        target: IndexTarget,
        if_not_exists: bool,
        /// `CREATE CUSTOM INDEX ... USING 'class'`
        custom_class: Option<String>,
        properties: Properties,
    },
    DropIndex {
        name: QualifiedName,
        if_exists: bool,
    },
    Describe(Describe),
    /// A statement for a feature ringgate does not offer (`NotOffered`).
    NotOffered(NotOffered),
}

/// Statements Cassandra's grammar has for features ringgate does not offer: materialized
/// views, user-defined functions and aggregates, triggers, roles and permissions. The parser
/// reads what the answer needs (the names a DROP or ALTER of something missing reports) and
/// skips the rest of the statement unchecked; the query layer answers as Cassandra does when
/// nothing of the kind exists, and refuses what would create one with a message that says so.
#[derive(Debug, Clone, PartialEq)]
pub enum NotOffered {
    /// `CREATE MATERIALIZED VIEW ...`
    CreateView,
    /// `ALTER` or `DROP MATERIALIZED VIEW [IF EXISTS] name ...`: no view exists.
    MissingView {
        name: QualifiedName,
        if_exists: bool,
    },
    /// `CREATE [OR REPLACE] FUNCTION ...`
    CreateFunction,
    /// `CREATE [OR REPLACE] AGGREGATE ...`
    CreateAggregate,
    /// `DROP FUNCTION|AGGREGATE [IF EXISTS] name [(types)]`: none exists.
    MissingFunction {
        aggregate: bool,
        name: QualifiedName,
        /// The argument types as written, lower-cased; None without parentheses.
        args: Option<Vec<String>>,
        if_exists: bool,
    },
    /// `CREATE TRIGGER [IF NOT EXISTS] name ON table USING 'class'`
    CreateTrigger { table: QualifiedName, class: String },
    /// `DROP TRIGGER [IF EXISTS] name ON table`: none exists.
    MissingTrigger {
        name: String,
        table: QualifiedName,
        if_exists: bool,
    },
    /// Role, user, identity and permission statements (`CREATE ROLE`, `GRANT`, `LIST ROLES`...).
    Role,
}

/// A parsed statement with the number of bind markers it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub statement: Statement,
    pub bind_count: usize,
}
