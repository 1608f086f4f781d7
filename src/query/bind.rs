//! Bind markers: their types and names (the PREPARE metadata), the partition key indexes drivers
//! use for token-aware routing, and the values a request binds to them.

use super::{invalid, resolve_keyspace, resolve_table, Binds, BoundValue, Result, ResultColumn};
use crate::cql::ast::{
    Assignment, Conditions, DeleteTarget, InsertValues, Parsed, Relation, RelationLhs,
    SelectorExpr, Statement, Term, Using,
};
use crate::cql::types::CqlType;
use crate::schema::{Schema, TableDef};
use std::collections::HashMap;

/// What PREPARE reports about a statement.
pub struct StatementInfo {
    pub bind_columns: Vec<ResultColumn>,
    pub pk_indexes: Vec<u16>,
    pub result_columns: Vec<ResultColumn>,
}

struct Collector<'a> {
    table: Option<&'a TableDef>,
    keyspace: String,
    out: Vec<Option<ResultColumn>>,
}

impl Collector<'_> {
    fn set(&mut self, index: usize, name: &str, ty: CqlType) {
        if index >= self.out.len() {
            self.out.resize(index + 1, None);
        }
        let (ks, table) = match self.table {
            Some(t) => (t.keyspace.clone(), t.name.clone()),
            None => (self.keyspace.clone(), String::new()),
        };
        self.out[index] = Some(ResultColumn {
            keyspace: ks,
            table,
            name: name.to_string(),
            ty,
        });
    }

    /// Types the markers in `term` given the type it must have.
    fn term(&mut self, term: &Term, receiver: &str, ty: &CqlType) {
        match term {
            Term::Bind { index, name } => {
                self.set(*index, name.as_deref().unwrap_or(receiver), ty.clone())
            }
            Term::List(items) | Term::Set(items) => {
                let elem = match ty.unfrozen() {
                    CqlType::List(e) | CqlType::Set(e) | CqlType::Vector(e, _) => (**e).clone(),
                    _ => CqlType::Blob,
                };
                for i in items {
                    self.term(i, receiver, &elem);
                }
            }
            Term::Map(pairs) => {
                let (k, v) = match ty.unfrozen() {
                    CqlType::Map(k, v) => ((**k).clone(), (**v).clone()),
                    _ => (CqlType::Blob, CqlType::Blob),
                };
                for (a, b) in pairs {
                    self.term(a, receiver, &k);
                    self.term(b, receiver, &v);
                }
            }
            Term::Tuple(items) => {
                if let CqlType::Tuple(types) = ty.unfrozen() {
                    for (i, t) in items.iter().zip(types) {
                        self.term(i, receiver, t);
                    }
                }
            }
            Term::Udt(fields) => {
                if let CqlType::Udt(u) = ty.unfrozen() {
                    for (f, t) in fields {
                        if let Some((_, fty)) = u.fields.iter().find(|(n, _)| n == f) {
                            self.term(t, receiver, fty);
                        }
                    }
                }
            }
            Term::TypeHint(hint, inner) => {
                let hinted = match hint {
                    crate::cql::ast::TypeExpr::Native(n) => CqlType::native_from_name(n),
                    _ => None,
                };
                self.term(inner, receiver, hinted.as_ref().unwrap_or(ty))
            }
            Term::Negate(inner) => self.term(inner, receiver, ty),
            Term::Binary(_, a, b) => {
                let (lt, rt) = super::eval::operand_types(a, b, ty);
                self.term(a, receiver, &lt);
                self.term(b, receiver, &rt);
            }
            Term::Function { name, args, .. } if name == "token" => {
                // token(?, ?): the partition key columns, in order
                let pk: Vec<(String, CqlType)> = self
                    .table
                    .map(|t| {
                        t.pk_columns()
                            .map(|c| (c.name.clone(), c.ty.clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                for (i, a) in args.iter().enumerate() {
                    match pk.get(i) {
                        Some((n, t)) => self.term(a, n, t),
                        None => self.term(a, receiver, &CqlType::Blob),
                    }
                }
            }
            Term::Function { name, args, .. } => {
                for (i, a) in args.iter().enumerate() {
                    let t = super::eval::arg_type(name, a);
                    self.term(a, &format!("arg{i}(system.{name})"), &t);
                }
            }
            Term::Literal(_) => {}
        }
    }

    /// Markers in a selection: function arguments take the argument's type, type hints theirs.
    fn selector(&mut self, e: &SelectorExpr) {
        match e {
            SelectorExpr::Function { name, args, .. } => {
                for (i, a) in args.iter().enumerate() {
                    match a {
                        SelectorExpr::Term(t) => {
                            // token(): the partition key column's type (TokenFct's signature)
                            let pk_type = (name == "token")
                                .then(|| self.table.and_then(|tb| tb.pk_columns().nth(i)))
                                .flatten()
                                .map(|c| c.ty.clone());
                            let ty = pk_type.unwrap_or_else(|| super::eval::arg_type(name, t));
                            self.term(t, &format!("arg{i}(system.{name})"), &ty)
                        }
                        other => self.selector(other),
                    }
                }
            }
            SelectorExpr::Binary(_, l, r) => {
                self.selector(l);
                self.selector(r);
            }
            SelectorExpr::Negate(x)
            | SelectorExpr::Cast(x, _)
            | SelectorExpr::Field(x, _)
            | SelectorExpr::Element(x, _)
            | SelectorExpr::Slice(x, _, _) => self.selector(x),
            SelectorExpr::Term(t @ Term::TypeHint(..)) => self.term(t, "?", &CqlType::Blob),
            _ => {}
        }
    }

    fn column_type(&self, name: &str) -> CqlType {
        self.table
            .and_then(|t| t.column(name))
            .map(|c| c.ty.clone())
            .unwrap_or(CqlType::Blob)
    }

    fn relations(&mut self, rels: &[Relation]) {
        for r in rels {
            match &r.lhs {
                RelationLhs::Column(c) => {
                    let ty = self.column_type(c);
                    match r.op {
                        crate::cql::ast::Operator::In => match &r.rhs {
                            Term::List(items) => {
                                for i in items {
                                    self.term(i, c, &ty);
                                }
                            }
                            other => {
                                self.term(other, &format!("in({c})"), &CqlType::List(Box::new(ty)))
                            }
                        },
                        op @ (crate::cql::ast::Operator::Contains
                        | crate::cql::ast::Operator::ContainsKey) => {
                            let elem = super::select::contains_operand(&ty, op).unwrap_or(ty);
                            self.term(&r.rhs, c, &elem)
                        }
                        _ => self.term(&r.rhs, c, &ty),
                    }
                }
                RelationLhs::Element(c, key) => {
                    let (k, v) = match self.column_type(c).unfrozen() {
                        CqlType::Map(k, v) => ((**k).clone(), (**v).clone()),
                        _ => (CqlType::Blob, CqlType::Blob),
                    };
                    self.term(key, c, &k);
                    self.term(&r.rhs, c, &v);
                }
                RelationLhs::Token(_) => self.term(&r.rhs, "partition key token", &CqlType::Bigint),
                RelationLhs::Function(f) => {
                    let ty = super::changefeed::bind_type(f).unwrap_or(CqlType::Blob);
                    self.term(&r.rhs, f, &ty)
                }
                RelationLhs::Tuple(cols) => {
                    let types: Vec<CqlType> = cols.iter().map(|c| self.column_type(c)).collect();
                    let tuple = CqlType::Tuple(types.clone());
                    let name = format!("({})", cols.join(","));
                    let one = |me: &mut Self, t: &Term| match t {
                        Term::Tuple(items) => {
                            for ((i, ty), c) in items.iter().zip(&types).zip(cols) {
                                me.term(i, c, ty);
                            }
                        }
                        other => me.term(other, &name, &tuple),
                    };
                    match (&r.op, &r.rhs) {
                        (crate::cql::ast::Operator::In, Term::List(items)) => {
                            for i in items {
                                one(self, i);
                            }
                        }
                        (crate::cql::ast::Operator::In, other) => self.term(
                            other,
                            &format!("in({})", cols.join(",")),
                            &CqlType::List(Box::new(tuple.clone())),
                        ),
                        (_, t) => one(self, t),
                    }
                }
            }
        }
    }

    fn using(&mut self, u: &Using) {
        if let Some(t) = &u.ttl {
            self.term(t, "[ttl]", &CqlType::Int);
        }
        if let Some(t) = &u.timestamp {
            self.term(t, "[timestamp]", &CqlType::Bigint);
        }
    }

    fn conditions(&mut self, c: &Option<Conditions>) {
        if let Some(Conditions::Columns(conds)) = c {
            for cond in conds {
                let ty = self.column_type(&cond.column);
                let ty = match (&cond.element, ty.unfrozen()) {
                    (Some(k), CqlType::Map(kt, vt)) => {
                        let kt = (**kt).clone();
                        self.term(k, &cond.column, &kt);
                        (**vt).clone()
                    }
                    (Some(k), CqlType::List(et)) => {
                        self.term(k, &cond.column, &CqlType::Int);
                        (**et).clone()
                    }
                    (None, CqlType::Udt(u)) if cond.field.is_some() => u
                        .fields
                        .iter()
                        .find(|(n, _)| Some(n) == cond.field.as_ref())
                        .map_or(ty.clone(), |(_, t)| t.clone()),
                    _ => ty,
                };
                use crate::cql::ast::Operator;
                let ty = match super::select::contains_operand(&ty, cond.op) {
                    Some(t) => t,
                    None => ty,
                };
                if cond.op == Operator::In {
                    match &cond.value {
                        Term::List(items) => {
                            for i in items {
                                self.term(i, &cond.column, &ty);
                            }
                        }
                        other => self.term(
                            other,
                            &format!("in({})", cond.column),
                            &CqlType::List(Box::new(ty)),
                        ),
                    }
                } else {
                    self.term(&cond.value, &cond.column, &ty);
                }
            }
        }
    }

    fn statement(&mut self, schema: &Schema, keyspace: Option<&str>, st: &Statement) -> Result<()> {
        match st {
            Statement::Select(s) => {
                let t = resolve_table(schema, keyspace, &s.table)?;
                let mut inner = Collector {
                    table: Some(t),
                    keyspace: t.keyspace.clone(),
                    out: std::mem::take(&mut self.out),
                };
                if let crate::cql::ast::Selection::List(items) = &s.selection {
                    for item in items {
                        inner.selector(&item.expr);
                    }
                }
                inner.relations(&s.where_clause);
                if let Some(l) = &s.per_partition_limit {
                    inner.term(l, "[per_partition_limit]", &CqlType::Int);
                }
                if let Some(l) = &s.limit {
                    inner.term(l, "[limit]", &CqlType::Int);
                }
                self.out = inner.out;
            }
            Statement::Insert(i) => {
                let t = resolve_table(schema, keyspace, &i.table)?;
                let mut inner = Collector {
                    table: Some(t),
                    keyspace: t.keyspace.clone(),
                    out: std::mem::take(&mut self.out),
                };
                match &i.values {
                    InsertValues::Values { columns, values } => {
                        for (c, v) in columns.iter().zip(values) {
                            let ty = inner.column_type(c);
                            inner.term(v, c, &ty);
                        }
                    }
                    InsertValues::Json { value, .. } => inner.term(value, "[json]", &CqlType::Text),
                }
                inner.using(&i.using);
                self.out = inner.out;
            }
            Statement::Update(u) => {
                let t = resolve_table(schema, keyspace, &u.table)?;
                let mut inner = Collector {
                    table: Some(t),
                    keyspace: t.keyspace.clone(),
                    out: std::mem::take(&mut self.out),
                };
                inner.using(&u.using);
                for a in &u.assignments {
                    inner.assignment(a);
                }
                inner.relations(&u.where_clause);
                inner.conditions(&u.conditions);
                self.out = inner.out;
            }
            Statement::Delete(d) => {
                let t = resolve_table(schema, keyspace, &d.table)?;
                let mut inner = Collector {
                    table: Some(t),
                    keyspace: t.keyspace.clone(),
                    out: std::mem::take(&mut self.out),
                };
                for target in &d.targets {
                    if let DeleteTarget::Element(c, k) = target {
                        let kt = match inner.column_type(c).unfrozen() {
                            CqlType::Map(k, _) => (**k).clone(),
                            CqlType::List(_) => CqlType::Int,
                            CqlType::Set(e) => (**e).clone(),
                            _ => CqlType::Blob,
                        };
                        inner.term(k, c, &kt);
                    }
                }
                inner.using(&d.using);
                inner.relations(&d.where_clause);
                inner.conditions(&d.conditions);
                self.out = inner.out;
            }
            Statement::Batch(b) => {
                self.using(&b.using);
                for s in &b.statements {
                    self.statement(schema, keyspace, s)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn assignment(&mut self, a: &Assignment) {
        match a {
            Assignment::Set { column, value }
            | Assignment::Append { column, value }
            | Assignment::Prepend { column, value } => {
                let ty = self.column_type(column);
                let ty = if ty.is_counter() { CqlType::Bigint } else { ty };
                self.term(value, column, &ty)
            }
            Assignment::Remove { column, value } => {
                let ty = self.column_type(column);
                let ty = match ty.unfrozen() {
                    CqlType::Map(k, _) => CqlType::Set(k.clone()),
                    CqlType::Counter => CqlType::Bigint,
                    _ => ty,
                };
                self.term(value, column, &ty)
            }
            Assignment::SetElement { column, key, value } => {
                let (k, v) = match self.column_type(column).unfrozen() {
                    CqlType::Map(k, v) => ((**k).clone(), (**v).clone()),
                    CqlType::List(e) => (CqlType::Int, (**e).clone()),
                    _ => (CqlType::Blob, CqlType::Blob),
                };
                self.term(key, column, &k);
                self.term(value, column, &v);
            }
            Assignment::SetField {
                column,
                field,
                value,
            } => {
                let fty = match self.column_type(column).unfrozen() {
                    CqlType::Udt(u) => u
                        .fields
                        .iter()
                        .find(|(n, _)| n == field)
                        .map(|(_, t)| t.clone())
                        .unwrap_or(CqlType::Blob),
                    _ => CqlType::Blob,
                };
                self.term(value, field, &fty);
            }
        }
    }
}

/// The partition key bind indexes of a statement (empty unless every component is a marker).
fn pk_indexes(table: &TableDef, st: &Statement) -> Vec<u16> {
    let mut found: HashMap<&str, u16> = HashMap::new();
    let rels: &[Relation] = match st {
        Statement::Select(s) => &s.where_clause,
        Statement::Update(u) => &u.where_clause,
        Statement::Delete(d) => &d.where_clause,
        Statement::Insert(i) => {
            if let InsertValues::Values { columns, values } = &i.values {
                for (c, v) in columns.iter().zip(values) {
                    if let Term::Bind { index, .. } = v {
                        found.insert(c.as_str(), *index as u16);
                    }
                }
            }
            &[]
        }
        _ => &[],
    };
    for r in rels {
        if let (RelationLhs::Column(c), crate::cql::ast::Operator::Eq, Term::Bind { index, .. }) =
            (&r.lhs, r.op, &r.rhs)
        {
            found.insert(c.as_str(), *index as u16);
        }
    }
    let mut out = Vec::with_capacity(table.partition_key.len());
    for c in table.pk_columns() {
        match found.get(c.name.as_str()) {
            Some(i) => out.push(*i),
            None => return Vec::new(),
        }
    }
    out
}

/// Bind marker metadata, routing indexes and result columns of a statement.
pub fn describe_statement(
    schema: &Schema,
    keyspace: Option<&str>,
    parsed: &Parsed,
) -> Result<StatementInfo> {
    let mut c = Collector {
        table: None,
        keyspace: keyspace.unwrap_or_default().to_string(),
        out: vec![None; parsed.bind_count],
    };
    c.statement(schema, keyspace, &parsed.statement)?;
    let ks_fallback = keyspace.unwrap_or_default().to_string();
    let bind_columns = c
        .out
        .into_iter()
        .enumerate()
        .map(|(i, col)| {
            col.unwrap_or_else(|| ResultColumn {
                keyspace: ks_fallback.clone(),
                table: String::new(),
                name: format!("arg{i}"),
                ty: CqlType::Blob,
            })
        })
        .collect();
    let (pk, result_columns) = match &parsed.statement {
        Statement::Select(s) => {
            let t = resolve_table(schema, keyspace, &s.table)?;
            (
                pk_indexes(t, &parsed.statement),
                super::select::result_columns(t, s)?,
            )
        }
        Statement::Insert(i) => (
            pk_indexes(
                resolve_table(schema, keyspace, &i.table)?,
                &parsed.statement,
            ),
            Vec::new(),
        ),
        Statement::Update(u) => (
            pk_indexes(
                resolve_table(schema, keyspace, &u.table)?,
                &parsed.statement,
            ),
            Vec::new(),
        ),
        Statement::Delete(d) => (
            pk_indexes(
                resolve_table(schema, keyspace, &d.table)?,
                &parsed.statement,
            ),
            Vec::new(),
        ),
        Statement::Use(_) => (Vec::new(), Vec::new()),
        _ => {
            // DDL and others carry no markers; a keyspace reference is still checked at execute.
            let _ = resolve_keyspace;
            (Vec::new(), Vec::new())
        }
    };
    Ok(StatementInfo {
        bind_columns,
        pk_indexes: pk,
        result_columns,
    })
}

/// The values bound to a statement's markers.
pub struct BoundValues<'a> {
    positional: Option<&'a [BoundValue]>,
    named: Option<HashMap<&'a str, &'a BoundValue>>,
}

impl<'a> BoundValues<'a> {
    pub fn new(
        binds: &'a Binds,
        parsed: &Parsed,
        _schema: &Schema,
        _keyspace: Option<&str>,
    ) -> Result<BoundValues<'a>> {
        match binds {
            Binds::None | Binds::Positional(_) => {
                let vals: &[BoundValue] = match binds {
                    Binds::Positional(v) => v,
                    _ => &[],
                };
                if vals.len() != parsed.bind_count {
                    return Err(invalid(format!(
                        "There were {} markers(?) in CQL but {} bound variables",
                        parsed.bind_count,
                        vals.len()
                    )));
                }
                Ok(BoundValues {
                    positional: Some(vals),
                    named: None,
                })
            }
            Binds::Named(pairs) => Ok(BoundValues {
                positional: None,
                named: Some(pairs.iter().map(|(k, v)| (k.as_str(), v)).collect()),
            }),
        }
    }

    /// The value of marker `index` (named markers are looked up by name when values are named).
    pub fn get(&self, index: usize, name: Option<&str>, receiver: &str) -> Result<&BoundValue> {
        if let Some(p) = self.positional {
            return p
                .get(index)
                .ok_or_else(|| invalid(format!("No value bound for marker {index}")));
        }
        let key = name.unwrap_or(receiver);
        self.named
            .as_ref()
            .and_then(|m| m.get(key).copied())
            .ok_or_else(|| invalid(format!("No value for named bind variable {key}")))
    }
}
