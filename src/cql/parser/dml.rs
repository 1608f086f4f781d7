//! INSERT, UPDATE, DELETE and BATCH.

use super::{relation_operator_of, PResult, Parser};
use crate::cql::ast::*;
use crate::cql::lexer::{Kw, TokenKind as T};

impl Parser<'_> {
    pub(super) fn insert_statement(&mut self) -> PResult<Insert> {
        self.expect_kw(Kw::Insert)?;
        self.expect_kw(Kw::Into)?;
        let table = self.qualified_name("table")?;
        let values = match self.kind() {
            T::Keyword(Kw::Json) => {
                self.bump();
                let value = match self.kind() {
                    T::String | T::DollarString => {
                        let t = self.bump();
                        Term::Literal(Literal::String(self.string_value(&t)))
                    }
                    T::Qmark | T::Colon => self.marker()?,
                    _ => return Err(self.no_viable()),
                };
                let mut default_unset = false;
                if self.eat_kw(Kw::Default) {
                    if self.eat_kw(Kw::Unset) {
                        default_unset = true;
                    } else if !self.eat_kw(Kw::Null) {
                        return Err(self.no_viable());
                    }
                }
                InsertValues::Json {
                    value,
                    default_unset,
                }
            }
            T::LParen => {
                self.bump();
                let mut columns = vec![self.cident()?];
                while self.eat(T::Comma) {
                    columns.push(self.cident()?);
                }
                self.expect(T::RParen)?;
                self.expect_kw(Kw::Values)?;
                self.expect(T::LParen)?;
                let mut values = vec![self.term()?];
                while self.eat(T::Comma) {
                    values.push(self.term()?);
                }
                self.expect(T::RParen)?;
                InsertValues::Values { columns, values }
            }
            _ => return Err(self.no_viable()),
        };
        let if_not_exists = self.if_not_exists()?;
        let mut using = Using::default();
        if self.at_kw(Kw::Using) {
            self.using_clause(&mut using)?;
        }
        Ok(Insert {
            table,
            values,
            if_not_exists,
            using,
        })
    }

    /// `USING TTL n AND TIMESTAMP n` (either, in any order).
    fn using_clause(&mut self, using: &mut Using) -> PResult<()> {
        self.expect_kw(Kw::Using)?;
        loop {
            if self.eat_kw(Kw::Timestamp) {
                using.timestamp = Some(self.int_value()?);
            } else if self.eat_kw(Kw::Ttl) {
                using.ttl = Some(self.int_value()?);
            } else {
                return Err(self.no_viable());
            }
            if !self.eat_kw(Kw::And) {
                return Ok(());
            }
        }
    }

    pub(super) fn update_statement(&mut self) -> PResult<Update> {
        self.expect_kw(Kw::Update)?;
        let table = self.qualified_name("table")?;
        let mut using = Using::default();
        if self.at_kw(Kw::Using) {
            self.using_clause(&mut using)?;
        }
        self.expect_kw(Kw::Set)?;
        let mut assignments: Vec<Assignment> = Vec::new();
        loop {
            let start = self.tok();
            let assignment = self.assignment()?;
            let column = assignment.column();
            if assignments
                .iter()
                .any(|a| !compatible_assignments(a, &assignment))
            {
                return Err(self.semantic(
                    &start,
                    format!("Multiple incompatible setting of column {column}"),
                ));
            }
            assignments.push(assignment);
            if !self.eat(T::Comma) {
                break;
            }
        }
        self.expect_kw(Kw::Where)?;
        let where_clause = self.where_clause()?;
        let conditions = self.conditions()?;
        Ok(Update {
            table,
            using,
            assignments,
            where_clause,
            conditions,
        })
    }

    /// One `SET` item.
    fn assignment(&mut self) -> PResult<Assignment> {
        let column = self.cident()?;
        match self.kind() {
            T::Eq => {
                self.bump();
                if self.bare_column_at(0) {
                    // c = c + t | c = c - t
                    let other_tok = self.tok();
                    let other = self.cident()?;
                    let add = match self.kind() {
                        T::Plus => true,
                        T::Minus => false,
                        _ => return Err(self.no_viable()),
                    };
                    if other != column {
                        return Err(self.semantic(
                            &other_tok,
                            format!(
                                "Only expressions of the form X = X {}<value> are supported.",
                                if add { "+" } else { "-" }
                            ),
                        ));
                    }
                    self.bump();
                    let value = self.term()?;
                    return Ok(if add {
                        Assignment::Append { column, value }
                    } else {
                        Assignment::Remove { column, value }
                    });
                }
                let value = self.term()?;
                if self.eat(T::Plus) {
                    // c = t + c
                    let other_tok = self.tok();
                    let other = self.cident()?;
                    if other != column {
                        return Err(self.semantic(
                            &other_tok,
                            "Only expressions of the form X = <value> + X are supported.",
                        ));
                    }
                    return Ok(Assignment::Prepend { column, value });
                }
                Ok(Assignment::Set { column, value })
            }
            T::PlusEq => {
                self.bump();
                Ok(Assignment::Append {
                    column,
                    value: self.term()?,
                })
            }
            T::MinusEq => {
                self.bump();
                Ok(Assignment::Remove {
                    column,
                    value: self.term()?,
                })
            }
            T::LBracket => {
                self.bump();
                let key = self.term()?;
                self.expect(T::RBracket)?;
                self.expect(T::Eq)?;
                Ok(Assignment::SetElement {
                    column,
                    key,
                    value: self.term()?,
                })
            }
            T::Dot => {
                self.bump();
                let field = self.ident()?;
                self.expect(T::Eq)?;
                Ok(Assignment::SetField {
                    column,
                    field,
                    value: self.term()?,
                })
            }
            _ => Err(self.no_viable()),
        }
    }

    /// `IF EXISTS` or `IF cond AND cond ...` (optional).
    fn conditions(&mut self) -> PResult<Option<Conditions>> {
        if !self.eat_kw(Kw::If) {
            return Ok(None);
        }
        // `exists` is also a valid column name: `IF exists = 1` is a condition on it.
        if self.at_kw(Kw::Exists)
            && relation_operator_of(self.kind_at(1)).is_none()
            && !matches!(
                self.kind_at(1),
                T::LBracket | T::Dot | T::Keyword(Kw::In | Kw::Contains)
            )
        {
            self.bump();
            return Ok(Some(Conditions::IfExists));
        }
        let mut out = vec![self.condition()?];
        while self.eat_kw(Kw::And) {
            out.push(self.condition()?);
        }
        Ok(Some(Conditions::Columns(out)))
    }

    /// `c op t`, `c IN (...)`, `c CONTAINS [KEY] t`, `c[k] op t`, `c.f op t`.
    fn condition(&mut self) -> PResult<Condition> {
        let column = self.cident()?;
        let mut element = None;
        let mut field = None;
        if self.eat(T::LBracket) {
            element = Some(self.term()?);
            self.expect(T::RBracket)?;
        } else if self.eat(T::Dot) {
            field = Some(self.ident()?);
        }
        let (op, value) = match self.kind() {
            T::Keyword(Kw::In) => {
                self.bump();
                (Operator::In, self.in_values()?)
            }
            T::Keyword(Kw::Contains) if element.is_none() && field.is_none() => {
                self.bump();
                let op = if self.eat_kw(Kw::Key) {
                    Operator::ContainsKey
                } else {
                    Operator::Contains
                };
                (op, self.term()?)
            }
            _ => {
                let op = self.relation_operator()?;
                (op, self.term()?)
            }
        };
        Ok(Condition {
            column,
            element,
            field,
            op,
            value,
        })
    }

    pub(super) fn delete_statement(&mut self) -> PResult<Delete> {
        self.expect_kw(Kw::Delete)?;
        let mut targets = Vec::new();
        if !self.at_kw(Kw::From) {
            loop {
                let column = self.cident()?;
                let target = if self.eat(T::LBracket) {
                    let key = self.term()?;
                    self.expect(T::RBracket)?;
                    DeleteTarget::Element(column, key)
                } else if self.eat(T::Dot) {
                    DeleteTarget::Field(column, self.ident()?)
                } else {
                    DeleteTarget::Column(column)
                };
                targets.push(target);
                if !self.eat(T::Comma) {
                    break;
                }
            }
        }
        self.expect_kw(Kw::From)?;
        let table = self.qualified_name("table")?;
        let mut using = Using::default();
        if self.eat_kw(Kw::Using) {
            self.expect_kw(Kw::Timestamp)?;
            using.timestamp = Some(self.int_value()?);
        }
        self.expect_kw(Kw::Where)?;
        let where_clause = self.where_clause()?;
        let conditions = self.conditions()?;
        Ok(Delete {
            table,
            targets,
            using,
            where_clause,
            conditions,
        })
    }

    /// `BEGIN [UNLOGGED | COUNTER] BATCH [USING ...] (stmt [;])* APPLY BATCH`.
    pub(super) fn batch_statement(&mut self) -> PResult<Batch> {
        self.expect_kw(Kw::Begin)?;
        let kind = if self.eat_kw(Kw::Unlogged) {
            BatchKind::Unlogged
        } else if self.eat_kw(Kw::Counter) {
            BatchKind::Counter
        } else {
            BatchKind::Logged
        };
        self.expect_kw(Kw::Batch)?;
        let mut using = Using::default();
        if self.at_kw(Kw::Using) {
            self.using_clause(&mut using)?;
        }
        let mut statements = Vec::new();
        loop {
            let statement = match self.kind() {
                T::Keyword(Kw::Insert) => Statement::Insert(self.insert_statement()?),
                T::Keyword(Kw::Update) => Statement::Update(self.update_statement()?),
                T::Keyword(Kw::Delete) => Statement::Delete(self.delete_statement()?),
                _ => break,
            };
            statements.push(statement);
            self.eat(T::Semicolon);
        }
        self.expect_kw(Kw::Apply)?;
        self.expect_kw(Kw::Batch)?;
        Ok(Batch {
            kind,
            using,
            statements,
        })
    }
}

/// Cassandra's `RawUpdate.isCompatibleWith`: a column set as a whole can't be touched again,
/// nor a UDT field set twice.
fn compatible_assignments(a: &Assignment, b: &Assignment) -> bool {
    if a.column() != b.column() {
        return true;
    }
    match (a, b) {
        (Assignment::Set { .. }, _) | (_, Assignment::Set { .. }) => false,
        (Assignment::SetField { field: f1, .. }, Assignment::SetField { field: f2, .. }) => {
            f1 != f2
        }
        _ => true,
    }
}
