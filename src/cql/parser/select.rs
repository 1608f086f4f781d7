//! SELECT, its selectors, and the WHERE clause shared with UPDATE and DELETE.

use super::depth::{selector_depth, term_depth};
use super::{is_constant_kind, is_ident_kind, negate_literal, PResult, Parser};
use crate::cql::ast::*;
use crate::cql::lexer::{Kw, TokenKind as T};

impl Parser<'_> {
    pub(super) fn select_statement(&mut self) -> PResult<Select> {
        self.expect_kw(Kw::Select)?;
        // `json` and `distinct` are also valid column names: they are modifiers only when a
        // selection follows them.
        let json = self.at_kw(Kw::Json) && self.modifier_applies();
        if json {
            self.bump();
        }
        let distinct = self.at_kw(Kw::Distinct) && self.modifier_applies();
        if distinct {
            self.bump();
        }
        let selection = if self.eat(T::Star) {
            Selection::All
        } else {
            Selection::List(self.selectors()?)
        };
        self.expect_kw(Kw::From)?;
        let table = self.qualified_name("table")?;
        let where_clause = if self.eat_kw(Kw::Where) {
            self.where_clause()?
        } else {
            Vec::new()
        };
        let mut group_by = Vec::new();
        if self.at_kw(Kw::Group) {
            self.bump();
            self.expect_kw(Kw::By)?;
            loop {
                group_by.push(self.cident()?);
                if !self.eat(T::Comma) {
                    break;
                }
            }
        }
        let mut order_by = Vec::new();
        if self.eat_kw(Kw::Order) {
            self.expect_kw(Kw::By)?;
            loop {
                let column = self.cident()?;
                let order = if self.eat_kw(Kw::Desc) {
                    Order::Desc
                } else {
                    self.eat_kw(Kw::Asc);
                    Order::Asc
                };
                order_by.push((column, order));
                if !self.eat(T::Comma) {
                    break;
                }
            }
        }
        let mut per_partition_limit = None;
        if self.at_kw(Kw::Per) {
            self.bump();
            self.expect_kw(Kw::Partition)?;
            self.expect_kw(Kw::Limit)?;
            per_partition_limit = Some(self.int_value()?);
        }
        let limit = if self.eat_kw(Kw::Limit) {
            Some(self.int_value()?)
        } else {
            None
        };
        let allow_filtering = self.eat_kw(Kw::Allow);
        if allow_filtering {
            self.expect_kw(Kw::Filtering)?;
        }
        Ok(Select {
            table,
            json,
            distinct,
            selection,
            where_clause,
            group_by,
            order_by,
            per_partition_limit,
            limit,
            allow_filtering,
        })
    }

    /// At `JSON` or `DISTINCT`: true when it modifies the selection that follows rather than
    /// naming a column (`SELECT json FROM t`, `SELECT distinct, a FROM t`, `SELECT json AS j`).
    fn modifier_applies(&self) -> bool {
        let next = self.kind_at(1);
        next == T::Star || (next != T::Keyword(Kw::As) && self.starts_selector(1))
    }

    fn selectors(&mut self) -> PResult<Vec<Selector>> {
        let mut out = Vec::new();
        loop {
            let expr = self.selector()?;
            let alias = if self.eat_kw(Kw::As) {
                Some(self.ident()?)
            } else {
                None
            };
            out.push(Selector { expr, alias });
            if !self.eat(T::Comma) {
                break;
            }
        }
        Ok(out)
    }

    /// `unaliasedSelector`: `+ -` over `* / %` over unary minus over selector groups.
    fn selector(&mut self) -> PResult<SelectorExpr> {
        self.nested(|p| p.selector_addition())
    }

    fn selector_addition(&mut self) -> PResult<SelectorExpr> {
        let mut left = self.selector_multiplication()?;
        let mut depth = selector_depth(&left);
        loop {
            let op = match self.kind() {
                T::Plus => BinaryOp::Add,
                T::Minus => BinaryOp::Sub,
                _ => break,
            };
            self.bump();
            let right = self.selector_multiplication()?;
            depth = self.deeper(depth.max(selector_depth(&right)))?;
            left = SelectorExpr::Binary(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn selector_multiplication(&mut self) -> PResult<SelectorExpr> {
        let mut left = self.selector_group()?;
        let mut depth = selector_depth(&left);
        loop {
            let op = match self.kind() {
                T::Star => BinaryOp::Mul,
                T::Slash => BinaryOp::Div,
                T::Percent => BinaryOp::Mod,
                _ => break,
            };
            self.bump();
            let right = self.selector_group()?;
            depth = self.deeper(depth.max(selector_depth(&right)))?;
            left = SelectorExpr::Binary(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    /// `-group`, or a primary selector followed by `.field`, `[elem]` and `[from..to]`.
    fn selector_group(&mut self) -> PResult<SelectorExpr> {
        if self.eat(T::Minus) {
            let inner = self.nested(|p| p.selector_group())?;
            return Ok(match inner {
                SelectorExpr::Term(Term::Literal(
                    l @ (Literal::Integer(_) | Literal::Float(_) | Literal::Duration(_)),
                )) => SelectorExpr::Term(Term::Literal(negate_literal(l))),
                other => SelectorExpr::Negate(Box::new(other)),
            });
        }
        let expr = self.selector_primary()?;
        self.selector_modifiers(expr)
    }

    /// `.field`, `[elem]` and `[from..to]` after `expr`, as many as follow.
    fn selector_modifiers(&mut self, mut expr: SelectorExpr) -> PResult<SelectorExpr> {
        let mut depth = selector_depth(&expr);
        loop {
            if self.eat(T::Dot) {
                let field = self.ident()?;
                depth = self.deeper(depth)?;
                expr = SelectorExpr::Field(Box::new(expr), field);
            } else if self.eat(T::LBracket) {
                let (sub, bounds_depth) = self.collection_sub_selection(expr)?;
                depth = self.deeper(depth.max(bounds_depth))?;
                expr = sub;
                self.expect(T::RBracket)?;
            } else {
                return Ok(expr);
            }
        }
    }

    /// Inside `[...]`: `term`, `term..`, `..term` or `term..term`; with the depth of its terms.
    fn collection_sub_selection(&mut self, receiver: SelectorExpr) -> PResult<(SelectorExpr, u32)> {
        let receiver = Box::new(receiver);
        if self.eat(T::Range) {
            let to = self.term()?;
            let depth = term_depth(&to);
            return Ok((SelectorExpr::Slice(receiver, None, Some(to)), depth));
        }
        let from = self.term()?;
        let mut depth = term_depth(&from);
        if !self.eat(T::Range) {
            return Ok((SelectorExpr::Element(receiver, from), depth));
        }
        let to = if self.at(T::RBracket) {
            None
        } else {
            Some(self.term()?)
        };
        depth = depth.max(to.as_ref().map_or(0, term_depth));
        Ok((SelectorExpr::Slice(receiver, Some(from), to), depth))
    }

    /// True when a selector can start `n` tokens ahead.
    fn starts_selector(&self, n: usize) -> bool {
        let k = self.kind_at(n);
        self.starts_selector_primary(n) || k == T::Minus
    }

    fn starts_selector_primary(&self, n: usize) -> bool {
        let k = self.kind_at(n);
        is_ident_kind(k)
            || is_constant_kind(k)
            || matches!(
                k,
                T::Keyword(Kw::Null | Kw::Token)
                    | T::Qmark
                    | T::Colon
                    | T::LParen
                    | T::LBracket
                    | T::LBrace
            )
    }

    /// `selectionGroupWithoutField`.
    fn selector_primary(&mut self) -> PResult<SelectorExpr> {
        let k = self.kind();
        match k {
            _ if is_constant_kind(k) || k == T::Keyword(Kw::Null) => {
                let t = self.bump();
                Ok(SelectorExpr::Term(Term::Literal(self.literal_value(&t)?)))
            }
            T::Qmark | T::Colon => Ok(SelectorExpr::Term(self.marker()?)),
            T::LParen => self.paren_selector(),
            T::LBracket => {
                let t = self.bump();
                let mut items = Vec::new();
                if !self.eat(T::RBracket) {
                    loop {
                        items.push(self.selector()?);
                        if !self.eat(T::Comma) {
                            break;
                        }
                    }
                    self.expect(T::RBracket)?;
                }
                let terms = all_terms(items).ok_or_else(|| {
                    self.semantic(&t, "Only constants and bind markers are supported in list literals of a selection")
                })?;
                Ok(SelectorExpr::Term(Term::List(terms)))
            }
            T::LBrace => self.brace_selector(),
            T::Keyword(Kw::Count) if self.kind_at(1) == T::LParen => self.count_selector(),
            T::Keyword(kw @ (Kw::Writetime | Kw::Maxwritetime | Kw::Ttl))
                if self.kind_at(1) == T::LParen =>
            {
                self.bump();
                self.bump();
                // `sident selectorModifier`: a column, then fields, elements and slices.
                let column = SelectorExpr::Column(self.ident()?);
                let column = Box::new(self.selector_modifiers(column)?);
                self.expect(T::RParen)?;
                Ok(match kw {
                    Kw::Writetime => SelectorExpr::WriteTime(column),
                    Kw::Maxwritetime => SelectorExpr::MaxWriteTime(column),
                    _ => SelectorExpr::Ttl(column),
                })
            }
            T::Keyword(Kw::Cast) if self.kind_at(1) == T::LParen => {
                self.bump();
                self.bump();
                let inner = self.selector()?;
                self.expect_kw(Kw::As)?;
                let ty = self.native_type()?;
                self.expect(T::RParen)?;
                Ok(SelectorExpr::Cast(Box::new(inner), ty))
            }
            _ if self.function_call_at(0) => {
                let (keyspace, name) = self.function_name()?;
                let args = self.selector_args()?;
                Ok(SelectorExpr::Function {
                    keyspace,
                    name,
                    args,
                })
            }
            _ if is_ident_kind(k) => Ok(SelectorExpr::Column(self.ident()?)),
            _ => Err(self.no_viable()),
        }
    }

    /// `(args)` of a function call in a selection.
    fn selector_args(&mut self) -> PResult<Vec<SelectorExpr>> {
        self.expect(T::LParen)?;
        let mut args = Vec::new();
        if self.eat(T::RParen) {
            return Ok(args);
        }
        loop {
            args.push(self.selector()?);
            if !self.eat(T::Comma) {
                break;
            }
        }
        self.expect(T::RParen)?;
        Ok(args)
    }

    /// `count(*)` and `count(1)` count rows; `count(x)` is the aggregate function.
    fn count_selector(&mut self) -> PResult<SelectorExpr> {
        let one = self.kind_at(2) == T::Integer && {
            let t = self.toks[self.pos + 2];
            self.text(&t) == "1"
        };
        if (self.kind_at(2) == T::Star || one) && self.kind_at(3) == T::RParen {
            for _ in 0..4 {
                self.bump();
            }
            return Ok(SelectorExpr::CountAll);
        }
        let (keyspace, name) = self.function_name()?;
        let args = self.selector_args()?;
        Ok(SelectorExpr::Function {
            keyspace,
            name,
            args,
        })
    }

    /// `(type) selector`, `(selector)` or a tuple `(a, b)` in a selection.
    fn paren_selector(&mut self) -> PResult<SelectorExpr> {
        let start = self.tok();
        // `(a) AS x` aliases a parenthesised column: `as` after `(...)` is not a hinted column.
        let hinted =
            |p: &Self, n: usize| p.kind_at(n) != T::Keyword(Kw::As) && p.starts_selector_primary(n);
        if let Some(ty) = self.try_type_hint(hinted) {
            let inner = self.nested(|p| p.selector_primary())?;
            return match inner {
                SelectorExpr::Term(t) => Ok(SelectorExpr::Term(Term::TypeHint(ty, Box::new(t)))),
                _ => Err(self.semantic(
                    &start,
                    "Type hints are only supported on constants and bind markers in a selection",
                )),
            };
        }
        self.bump();
        let mut items = vec![self.selector()?];
        while self.eat(T::Comma) {
            items.push(self.selector()?);
        }
        self.expect(T::RParen)?;
        if items.len() == 1 {
            return Ok(items.pop().expect("one item"));
        }
        let terms = all_terms(items).ok_or_else(|| {
            self.semantic(
                &start,
                "Only constants and bind markers are supported in tuple literals of a selection",
            )
        })?;
        Ok(SelectorExpr::Term(Term::Tuple(terms)))
    }

    /// `{}`, `{a, b}`, `{k: v}` or `{field: v}` in a selection (constants only).
    fn brace_selector(&mut self) -> PResult<SelectorExpr> {
        let start = self.bump();
        if self.eat(T::RBrace) {
            return Ok(SelectorExpr::Term(Term::Set(Vec::new())));
        }
        let unsupported = |p: &Self| {
            p.semantic(
                &start,
                "Only constants and bind markers are supported in collection literals of a selection",
            )
        };
        let first = self.selector()?;
        if !self.eat(T::Colon) {
            let mut items = vec![first];
            while self.eat(T::Comma) {
                items.push(self.selector()?);
            }
            self.expect(T::RBrace)?;
            let terms = all_terms(items).ok_or_else(|| unsupported(self))?;
            return Ok(SelectorExpr::Term(Term::Set(terms)));
        }
        let mut entries = vec![(first, self.selector()?)];
        while self.eat(T::Comma) {
            let k = self.selector()?;
            self.expect(T::Colon)?;
            entries.push((k, self.selector()?));
        }
        self.expect(T::RBrace)?;
        // Keys that read as column names make a UDT literal.
        if entries
            .iter()
            .all(|(k, _)| matches!(k, SelectorExpr::Column(_)))
        {
            let mut fields = Vec::with_capacity(entries.len());
            for (k, v) in entries {
                let (SelectorExpr::Column(name), SelectorExpr::Term(v)) = (k, v) else {
                    return Err(unsupported(self));
                };
                fields.push((name, v));
            }
            return Ok(SelectorExpr::Term(Term::Udt(fields)));
        }
        let mut pairs = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            let (SelectorExpr::Term(k), SelectorExpr::Term(v)) = (k, v) else {
                return Err(unsupported(self));
            };
            pairs.push((k, v));
        }
        Ok(SelectorExpr::Term(Term::Map(pairs)))
    }

    // ---- WHERE --------------------------------------------------------------------------

    /// Relations joined by AND (after `WHERE`).
    pub(super) fn where_clause(&mut self) -> PResult<Vec<Relation>> {
        let mut out = Vec::new();
        self.relation(&mut out)?;
        while self.eat_kw(Kw::And) {
            self.relation(&mut out)?;
        }
        Ok(out)
    }

    fn relation(&mut self, out: &mut Vec<Relation>) -> PResult<()> {
        match self.kind() {
            T::Keyword(Kw::Token) => {
                self.bump();
                let columns = self.tuple_of_identifiers()?;
                let op = self.relation_operator()?;
                let rhs = self.term()?;
                out.push(Relation {
                    lhs: RelationLhs::Token(columns),
                    op,
                    rhs,
                });
            }
            T::LParen
                if (is_ident_kind(self.kind_at(1)) || self.kind_at(1) == T::EmptyQuotedName)
                    && matches!(self.kind_at(2), T::Comma | T::RParen) =>
            {
                let columns = self.tuple_of_identifiers()?;
                let (op, rhs) = if self.eat_kw(Kw::In) {
                    (Operator::In, self.multi_column_in_values()?)
                } else {
                    let op = self.relation_operator()?;
                    (op, self.multi_column_value()?)
                };
                out.push(Relation {
                    lhs: RelationLhs::Tuple(columns),
                    op,
                    rhs,
                });
            }
            T::LParen => {
                self.bump();
                self.nested(|p| p.relation(out))?;
                self.expect(T::RParen)?;
            }
            k if is_ident_kind(k)
                && self.kind_at(1) == T::LParen
                && self.kind_at(2) == T::RParen =>
            {
                let name = self.cident()?;
                self.expect(T::LParen)?;
                self.expect(T::RParen)?;
                let op = self.relation_operator()?;
                let rhs = self.term()?;
                out.push(Relation {
                    lhs: RelationLhs::Function(name),
                    op,
                    rhs,
                });
            }
            _ => {
                let column = self.cident()?;
                out.push(self.column_relation(column)?);
            }
        }
        Ok(())
    }

    /// The rest of a relation on one column.
    fn column_relation(&mut self, column: String) -> PResult<Relation> {
        let (lhs, op, rhs) = match self.kind() {
            T::Keyword(Kw::In) => {
                self.bump();
                (RelationLhs::Column(column), Operator::In, self.in_values()?)
            }
            T::Keyword(Kw::Contains) => {
                self.bump();
                let op = if self.eat_kw(Kw::Key) {
                    Operator::ContainsKey
                } else {
                    Operator::Contains
                };
                (RelationLhs::Column(column), op, self.term()?)
            }
            T::Keyword(Kw::Is) => {
                self.bump();
                self.expect_kw(Kw::Not)?;
                self.expect_kw(Kw::Null)?;
                (
                    RelationLhs::Column(column),
                    Operator::IsNot,
                    Term::Literal(Literal::Null),
                )
            }
            T::Keyword(Kw::Like) => {
                self.bump();
                (RelationLhs::Column(column), Operator::Like, self.term()?)
            }
            T::LBracket => {
                self.bump();
                let key = self.term()?;
                self.expect(T::RBracket)?;
                let op = self.relation_operator()?;
                (RelationLhs::Element(column, key), op, self.term()?)
            }
            _ => {
                let op = self.relation_operator()?;
                (RelationLhs::Column(column), op, self.term()?)
            }
        };
        Ok(Relation { lhs, op, rhs })
    }

    /// `(a, b, ...)` of column names.
    fn tuple_of_identifiers(&mut self) -> PResult<Vec<String>> {
        self.expect(T::LParen)?;
        let mut columns = vec![self.cident()?];
        while self.eat(T::Comma) {
            columns.push(self.cident()?);
        }
        self.expect(T::RParen)?;
        Ok(columns)
    }

    /// After `IN`: `(t1, t2, ...)` as a `Term::List`, or one marker for the whole list.
    pub(super) fn in_values(&mut self) -> PResult<Term> {
        match self.kind() {
            T::Qmark | T::Colon => self.marker(),
            T::LParen => {
                self.bump();
                Ok(Term::List(self.term_list(T::RParen)?))
            }
            _ => Err(self.no_viable()),
        }
    }

    /// After a multi-column `IN`: `()`, a marker, `((1, 2), (3, 4))` or `(?, ?)`; the list
    /// comes back as a `Term::List` of `Term::Tuple`s or markers.
    fn multi_column_in_values(&mut self) -> PResult<Term> {
        match self.kind() {
            T::Qmark | T::Colon => self.marker(),
            T::LParen => {
                self.bump();
                let mut items = Vec::new();
                if self.eat(T::RParen) {
                    return Ok(Term::List(items));
                }
                loop {
                    items.push(self.multi_column_value()?);
                    if !self.eat(T::Comma) {
                        break;
                    }
                }
                self.expect(T::RParen)?;
                Ok(Term::List(items))
            }
            _ => Err(self.no_viable()),
        }
    }

    /// A tuple literal `(t1, ...)` (kept a `Term::Tuple` even with one element, to match the
    /// column tuple on the left) or a marker.
    fn multi_column_value(&mut self) -> PResult<Term> {
        match self.kind() {
            T::Qmark | T::Colon => self.marker(),
            T::LParen => {
                self.bump();
                if self.at(T::RParen) {
                    return Err(self.no_viable());
                }
                Ok(Term::Tuple(self.term_list(T::RParen)?))
            }
            _ => Err(self.no_viable()),
        }
    }
}

/// The terms of selectors that are all constants or markers.
fn all_terms(items: Vec<SelectorExpr>) -> Option<Vec<Term>> {
    items
        .into_iter()
        .map(|s| match s {
            SelectorExpr::Term(t) => Some(t),
            _ => None,
        })
        .collect()
}
