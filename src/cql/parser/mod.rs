//! Recursive-descent parser for CQL 3 (Cassandra 5.0 dialect), producing `ast::Parsed`.
//!
//! The grammar follows Cassandra's `Parser.g`. Syntax errors read like Cassandra's (ANTLR's):
//! `line 1:9 mismatched input 'zeppelin' expecting K_FROM (SELECT * [zeppelin]...)`.
//!
//! Layout: this module holds the parser state, the error machinery and the shared pieces (names,
//! terms, types); `select` holds SELECT and WHERE, `dml` INSERT/UPDATE/DELETE/BATCH, `ddl` the
//! schema statements, USE, TRUNCATE and DESCRIBE.

mod ddl;
mod depth;
mod dml;
mod not_offered;
mod select;
#[cfg(test)]
mod tests;

use std::fmt;

use super::ast::*;
use super::lexer::{self, Kw, LexError, Token, TokenKind as T};
use crate::protocol::response::quote_capped;
use depth::term_depth;

/// A statement that could not be parsed. `Display` gives Cassandra's form,
/// `line 1:0 no viable alternative at input 'SELEC' ([SELEC]...)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// 1-based line of the offending token.
    pub line: usize,
    /// 0-based column (in characters) of the offending token.
    pub col: usize,
    /// What went wrong, with the query snippet for grammar errors.
    pub message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}:{} {}", self.line, self.col, self.message)
    }
}

impl std::error::Error for SyntaxError {}

/// Parses one statement (a trailing `;` is allowed).
pub fn parse(text: &str) -> Result<Parsed, SyntaxError> {
    let mut p = Parser::new(text);
    let statement = p.statement()?;
    while p.eat(T::Semicolon) {}
    if !p.at(T::Eof) {
        return Err(p.mismatch("EOF"));
    }
    Ok(Parsed {
        statement,
        bind_count: p.binds,
    })
}

/// Parses `;`-separated statements; empty statements (`;;`, a trailing `;`) are skipped. Bind
/// markers are numbered per statement.
pub fn parse_many(text: &str) -> Result<Vec<Parsed>, SyntaxError> {
    let mut p = Parser::new(text);
    let mut out = Vec::new();
    loop {
        while p.eat(T::Semicolon) {}
        if p.at(T::Eof) {
            break;
        }
        p.binds = 0;
        let statement = p.statement()?;
        out.push(Parsed {
            statement,
            bind_count: p.binds,
        });
        if p.at(T::Eof) {
            break;
        }
        if !p.at(T::Semicolon) {
            return Err(p.mismatch("';'"));
        }
    }
    Ok(out)
}

type PResult<T> = Result<T, SyntaxError>;

/// How deeply terms, selectors, types and relations may nest, counting every level of the tree
/// (each link of an operator or postfix chain too, see `depth.rs`): past this a statement is
/// refused ("Statement too deeply nested") rather than risking the stack.
pub const MAX_DEPTH: u32 = 100;

/// User type names Cassandra refuses (`Parser.g`'s `reservedTypeNames`, less the native `date`).
const RESERVED_TYPE_NAMES: &[&str] = &[
    "bitstring",
    "byte",
    "complex",
    "enum",
    "interval",
    "macaddr",
];

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    pos: usize,
    /// Bind markers seen so far in the current statement.
    binds: usize,
    depth: u32,
    lex_error: Option<LexError>,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Self {
        let lexed = lexer::tokenize(src);
        Parser {
            src,
            toks: lexed.tokens,
            pos: 0,
            binds: 0,
            depth: 0,
            lex_error: lexed.error,
        }
    }

    // ---- token access -------------------------------------------------------------------

    fn tok(&self) -> Token {
        self.toks[self.pos]
    }

    fn kind(&self) -> T {
        self.toks[self.pos].kind
    }

    /// The kind `n` tokens ahead (the final Eof/Error token repeats past the end).
    fn kind_at(&self, n: usize) -> T {
        self.toks[(self.pos + n).min(self.toks.len() - 1)].kind
    }

    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos];
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn at(&self, k: T) -> bool {
        self.kind() == k
    }

    fn at_kw(&self, kw: Kw) -> bool {
        self.kind() == T::Keyword(kw)
    }

    fn eat(&mut self, k: T) -> bool {
        if self.at(k) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn eat_kw(&mut self, kw: Kw) -> bool {
        self.eat(T::Keyword(kw))
    }

    fn expect(&mut self, k: T) -> PResult<Token> {
        if self.at(k) {
            Ok(self.bump())
        } else {
            Err(self.mismatch(k.antlr_name()))
        }
    }

    fn expect_kw(&mut self, kw: Kw) -> PResult<Token> {
        self.expect(T::Keyword(kw))
    }

    fn text(&self, t: &Token) -> &'a str {
        t.text(self.src)
    }

    /// Runs `f` one nesting level deeper, refusing statements nested beyond `MAX_DEPTH`.
    fn nested<R>(&mut self, f: impl FnOnce(&mut Self) -> PResult<R>) -> PResult<R> {
        if self.depth >= MAX_DEPTH {
            let t = self.tok();
            return Err(self.semantic(&t, "Statement too deeply nested"));
        }
        self.depth += 1;
        let r = f(self);
        self.depth -= 1;
        r
    }

    // ---- errors -------------------------------------------------------------------------

    /// `mismatched input 'x' expecting Y`, at the current token.
    fn mismatch(&self, expecting: &str) -> SyntaxError {
        let t = self.tok();
        let msg = format!(
            "mismatched input {} expecting {expecting}",
            self.token_display(&t)
        );
        self.grammar_error(msg)
    }

    /// `no viable alternative at input 'x'`, at the current token.
    fn no_viable(&self) -> SyntaxError {
        let t = self.tok();
        let msg = format!("no viable alternative at input {}", self.token_display(&t));
        self.grammar_error(msg)
    }

    fn grammar_error(&self, msg: String) -> SyntaxError {
        let t = self.tok();
        if t.kind == T::Error {
            if let Some(e) = &self.lex_error {
                return SyntaxError {
                    line: e.line,
                    col: e.col,
                    message: e.message.clone(),
                };
            }
        }
        let mut message = msg;
        self.append_snippet(&mut message);
        SyntaxError {
            line: t.line as usize,
            col: t.col as usize,
            message,
        }
    }

    /// An error found after the grammar matched (duplicate definitions, bad constants...):
    /// a plain message positioned at `t`.
    fn semantic(&self, t: &Token, msg: impl Into<String>) -> SyntaxError {
        SyntaxError {
            line: t.line as usize,
            col: t.col as usize,
            message: msg.into(),
        }
    }

    /// ANTLR's `getTokenErrorDisplay`: the token text (string and quoted-name contents without
    /// their quotes, as Cassandra's lexer rewrites them), control characters escaped, in quotes.
    fn token_display(&self, t: &Token) -> String {
        let text = match t.kind {
            T::Eof => "<EOF>".to_string(),
            T::String | T::DollarString => self.string_value(t),
            T::QuotedName => unquote_name(self.text(t)),
            _ => self.text(t).to_string(),
        };
        // A 10 MB identifier is quoted by its first bytes only.
        let text = quote_capped(&text)
            .replace('\n', "\\n")
            .replace('\r', "\\r")
            .replace('\t', "\\t");
        format!("'{text}'")
    }

    /// Cassandra's `ErrorCollector` snippet: up to 10 tokens (whitespace and comments count)
    /// before the offending one, then the offending token in brackets; `...` marks text left out.
    /// None at the end of input, where Cassandra's EOF token has no position either.
    fn append_snippet(&self, out: &mut String) {
        let off = self.tok();
        if off.kind == T::Eof {
            return;
        }
        let from = self.snippet_start(self.pos);
        let (start, end) = (off.start as usize, off.end as usize);
        out.push_str(" (");
        if from != 0 {
            out.push_str("...");
        }
        // Cassandra splits the query into lines and joins them back without the line breaks.
        let push = |out: &mut String, s: &str| out.extend(s.chars().filter(|&c| c != '\n'));
        push(out, &quote_capped(&self.src[from..start]));
        out.push('[');
        push(out, &quote_capped(&self.src[start..end]));
        out.push(']');
        if !self.src[end..].bytes().all(|b| b == b'\n') {
            out.push_str("...");
        }
        out.push(')');
    }

    /// Byte offset where the snippet for token `idx` starts: 10 tokens back, counting each run
    /// of whitespace and each comment as a token, like ANTLR's hidden-channel tokens.
    fn snippet_start(&self, idx: usize) -> usize {
        let mut remaining = 10usize;
        let mut i = idx;
        let mut start = self.toks[idx].start as usize;
        loop {
            let gap_from = if i == 0 {
                0
            } else {
                self.toks[i - 1].end as usize
            };
            let gap_to = self.toks[i].start as usize;
            for h in hidden_token_starts(&self.src[gap_from..gap_to])
                .into_iter()
                .rev()
            {
                if remaining == 0 {
                    return start;
                }
                start = gap_from + h;
                remaining -= 1;
            }
            if remaining == 0 || i == 0 {
                return start;
            }
            i -= 1;
            start = self.toks[i].start as usize;
            remaining -= 1;
        }
    }

    // ---- statements ---------------------------------------------------------------------

    fn statement(&mut self) -> PResult<Statement> {
        match self.kind() {
            T::Keyword(Kw::Select) => Ok(Statement::Select(self.select_statement()?)),
            T::Keyword(Kw::Insert) => Ok(Statement::Insert(self.insert_statement()?)),
            T::Keyword(Kw::Update) => Ok(Statement::Update(self.update_statement()?)),
            T::Keyword(Kw::Delete) => Ok(Statement::Delete(self.delete_statement()?)),
            T::Keyword(Kw::Begin) => Ok(Statement::Batch(self.batch_statement()?)),
            T::Keyword(Kw::Use) => self.use_statement(),
            T::Keyword(Kw::Truncate) => self.truncate_statement(),
            T::Keyword(Kw::Create) => self.create_statement(),
            T::Keyword(Kw::Alter) => self.alter_statement(),
            T::Keyword(Kw::Drop) => self.drop_statement(),
            T::Keyword(Kw::Describe | Kw::Desc) => {
                Ok(Statement::Describe(self.describe_statement()?))
            }
            T::Keyword(Kw::Grant | Kw::Revoke | Kw::List | Kw::Add) => self.role_statement(),
            _ => Err(self.no_viable()),
        }
    }

    // ---- names --------------------------------------------------------------------------

    /// The identifier a token names: unquoted lower-cased, quoted unescaped.
    fn ident_value(&self, t: &Token) -> String {
        match t.kind {
            T::QuotedName => unquote_name(self.text(t)),
            T::EmptyQuotedName => String::new(),
            _ => self.text(t).to_ascii_lowercase(),
        }
    }

    /// `ident`: IDENT, QUOTED_NAME or an unreserved keyword.
    fn ident(&mut self) -> PResult<String> {
        if is_ident_kind(self.kind()) {
            let t = self.bump();
            Ok(self.ident_value(&t))
        } else {
            Err(self.no_viable())
        }
    }

    /// `cident`: like `ident`, and also `""` (the legacy empty column name).
    fn cident(&mut self) -> PResult<String> {
        if self.at(T::EmptyQuotedName) {
            self.bump();
            return Ok(String::new());
        }
        self.ident()
    }

    /// A keyspace, table or index name part; `what` names it in the bind-marker message.
    fn name_part(&mut self, what: &str) -> PResult<String> {
        if self.at(T::Qmark) {
            let t = self.tok();
            return Err(self.semantic(
                &t,
                format!("Bind variables cannot be used for {what} names"),
            ));
        }
        self.ident()
    }

    /// `[ks.]name`, the name being a `what` (table, index).
    fn qualified_name(&mut self, what: &str) -> PResult<QualifiedName> {
        if self.kind_at(1) == T::Dot && (is_ident_kind(self.kind()) || self.at(T::Qmark)) {
            let keyspace = self.name_part("keyspace")?;
            self.bump();
            let name = self.name_part(what)?;
            return Ok(QualifiedName {
                keyspace: Some(keyspace),
                name,
            });
        }
        Ok(QualifiedName {
            keyspace: None,
            name: self.name_part(what)?,
        })
    }

    /// `[ks.]type_name` for user types: the name can't be a native type or a reserved type name.
    fn user_type_name(&mut self) -> PResult<QualifiedName> {
        let keyspace = if self.kind_at(1) == T::Dot && is_ident_kind(self.kind()) {
            let ks = self.ident()?;
            self.bump();
            Some(ks)
        } else {
            None
        };
        let t = self.tok();
        if t.kind != T::QuotedName && is_native_type(&self.text(&t).to_ascii_lowercase()) {
            return Err(self.no_viable());
        }
        let name = self.ident()?;
        if t.kind == T::Ident && RESERVED_TYPE_NAMES.contains(&name.as_str()) {
            return Err(self.semantic(&t, format!("Invalid (reserved) user type name {name}")));
        }
        Ok(QualifiedName { keyspace, name })
    }

    /// `[ks.]function_name`.
    fn function_name(&mut self) -> PResult<(Option<String>, String)> {
        let keyspace = if self.kind_at(1) == T::Dot && is_ident_kind(self.kind()) {
            let ks = self.ident()?;
            self.bump();
            Some(ks)
        } else {
            None
        };
        if !is_function_name_kind(self.kind()) {
            return Err(self.no_viable());
        }
        let t = self.bump();
        Ok((keyspace, self.ident_value(&t)))
    }

    /// True when a function call starts `n` tokens ahead: `f(` or `ks.f(`.
    fn function_call_at(&self, n: usize) -> bool {
        let k = self.kind_at(n);
        (is_function_name_kind(k) && self.kind_at(n + 1) == T::LParen)
            || (is_ident_kind(k)
                && self.kind_at(n + 1) == T::Dot
                && is_function_name_kind(self.kind_at(n + 2))
                && self.kind_at(n + 3) == T::LParen)
    }

    /// True when `n` tokens ahead is a bare column name: an identifier that does not start a
    /// function call or a `ks.` prefix.
    fn bare_column_at(&self, n: usize) -> bool {
        is_ident_kind(self.kind_at(n)) && !matches!(self.kind_at(n + 1), T::LParen | T::Dot)
    }

    // ---- literals -----------------------------------------------------------------------

    /// The contents of a string token, quotes removed and `''` unescaped.
    fn string_value(&self, t: &Token) -> String {
        let s = self.text(t);
        match t.kind {
            T::DollarString => s[2..s.len() - 2].to_string(),
            _ => {
                let inner = &s[1..s.len() - 1];
                if inner.contains("''") {
                    inner.replace("''", "'")
                } else {
                    inner.to_string()
                }
            }
        }
    }

    /// The literal a constant token spells.
    fn literal_value(&self, t: &Token) -> PResult<Literal> {
        let s = self.text(t);
        Ok(match t.kind {
            T::String | T::DollarString => Literal::String(self.string_value(t)),
            T::Integer => Literal::Integer(s.to_string()),
            T::Float => Literal::Float(s.to_string()),
            T::Boolean => Literal::Boolean(s.eq_ignore_ascii_case("true")),
            T::Duration => Literal::Duration(s.to_string()),
            T::Uuid => Literal::Uuid(s.to_string()),
            T::Hex => Literal::Blob(decode_hex(&s[2..]).ok_or_else(|| {
                self.semantic(
                    t,
                    format!("Invalid hex constant {s}: an odd number of hex digits"),
                )
            })?),
            T::Keyword(Kw::Nan) => Literal::Float("NaN".to_string()),
            T::Keyword(Kw::Infinity) => Literal::Float("Infinity".to_string()),
            T::Keyword(Kw::Null) => Literal::Null,
            _ => return Err(self.no_viable()),
        })
    }

    /// `constant`, with a leading `-` folded into numbers: string, number, boolean, duration,
    /// uuid, blob, NaN, Infinity.
    fn constant(&mut self) -> PResult<Literal> {
        if self.at(T::Minus) && is_numeric_kind(self.kind_at(1)) {
            self.bump();
            let t = self.bump();
            return Ok(negate_literal(self.literal_value(&t)?));
        }
        if !is_constant_kind(self.kind()) {
            return Err(self.no_viable());
        }
        let t = self.bump();
        self.literal_value(&t)
    }

    fn new_bind(&mut self, name: Option<String>) -> Term {
        let index = self.binds;
        self.binds += 1;
        Term::Bind { index, name }
    }

    /// `?` or `:name`.
    fn marker(&mut self) -> PResult<Term> {
        if self.eat(T::Qmark) {
            return Ok(self.new_bind(None));
        }
        self.expect(T::Colon)?;
        let name = self.ident()?;
        Ok(self.new_bind(Some(name)))
    }

    /// `intValue`: an integer (maybe negative) or a bind marker (LIMIT, USING TTL ...).
    fn int_value(&mut self) -> PResult<Term> {
        match self.kind() {
            T::Qmark | T::Colon => self.marker(),
            T::Integer => {
                let t = self.bump();
                Ok(Term::Literal(Literal::Integer(self.text(&t).to_string())))
            }
            T::Minus if self.kind_at(1) == T::Integer => {
                self.bump();
                let t = self.bump();
                Ok(Term::Literal(Literal::Integer(format!(
                    "-{}",
                    self.text(&t)
                ))))
            }
            _ => Err(self.no_viable()),
        }
    }

    // ---- terms --------------------------------------------------------------------------

    /// A value expression: `+ -` over `* / %` over unary minus over simple terms.
    fn term(&mut self) -> PResult<Term> {
        self.nested(|p| p.term_addition())
    }

    fn term_addition(&mut self) -> PResult<Term> {
        let mut left = self.term_multiplication()?;
        let mut depth = term_depth(&left);
        loop {
            let op = match self.kind() {
                // `x + col` ends the term: UPDATE's `c = value + c` (prepend) takes it from here.
                T::Plus if self.bare_column_at(1) => break,
                T::Plus => BinaryOp::Add,
                T::Minus => BinaryOp::Sub,
                _ => break,
            };
            self.bump();
            let right = self.term_multiplication()?;
            depth = self.deeper(depth.max(term_depth(&right)))?;
            left = Term::Binary(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn term_multiplication(&mut self) -> PResult<Term> {
        let mut left = self.term_group()?;
        let mut depth = term_depth(&left);
        loop {
            let op = match self.kind() {
                T::Star => BinaryOp::Mul,
                T::Slash => BinaryOp::Div,
                T::Percent => BinaryOp::Mod,
                _ => break,
            };
            self.bump();
            let right = self.term_group()?;
            depth = self.deeper(depth.max(term_depth(&right)))?;
            left = Term::Binary(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    /// A simple term, or `-` and a simple term (folded into numeric literals).
    fn term_group(&mut self) -> PResult<Term> {
        if self.eat(T::Minus) {
            let t = self.simple_term()?;
            return Ok(match t {
                Term::Literal(
                    l @ (Literal::Integer(_) | Literal::Float(_) | Literal::Duration(_)),
                ) => Term::Literal(negate_literal(l)),
                other => Term::Negate(Box::new(other)),
            });
        }
        self.simple_term()
    }

    fn simple_term(&mut self) -> PResult<Term> {
        let k = self.kind();
        match k {
            _ if is_constant_kind(k) || k == T::Keyword(Kw::Null) => {
                let t = self.bump();
                Ok(Term::Literal(self.literal_value(&t)?))
            }
            T::Qmark | T::Colon => self.marker(),
            T::LBracket => {
                self.bump();
                let items = self.term_list(T::RBracket)?;
                Ok(Term::List(items))
            }
            T::LBrace => self.brace_term(),
            T::LParen => {
                if let Some(ty) = self.try_type_hint(Self::starts_hinted_term) {
                    let inner = self.nested(|p| p.term_group())?;
                    return Ok(Term::TypeHint(ty, Box::new(inner)));
                }
                self.bump();
                if self.at(T::RParen) {
                    return Err(self.no_viable());
                }
                let mut items = self.term_list(T::RParen)?;
                Ok(if items.len() == 1 {
                    items.pop().expect("one item")
                } else {
                    Term::Tuple(items)
                })
            }
            _ if self.function_call_at(0) => {
                let (keyspace, name) = self.function_name()?;
                self.expect(T::LParen)?;
                let args = self.term_list(T::RParen)?;
                Ok(Term::Function {
                    keyspace,
                    name,
                    args,
                })
            }
            _ => Err(self.no_viable()),
        }
    }

    /// Terms separated by `,` up to `close` (consumed); the opening bracket is already consumed.
    fn term_list(&mut self, close: T) -> PResult<Vec<Term>> {
        let mut items = Vec::new();
        if self.eat(close) {
            return Ok(items);
        }
        loop {
            items.push(self.term()?);
            if !self.eat(T::Comma) {
                break;
            }
        }
        self.expect(close)?;
        Ok(items)
    }

    /// `{}`, `{a, b}`, `{k: v, ...}` or a UDT literal `{field: v, ...}`.
    fn brace_term(&mut self) -> PResult<Term> {
        self.expect(T::LBrace)?;
        if self.eat(T::RBrace) {
            return Ok(Term::Set(Vec::new()));
        }
        if is_ident_kind(self.kind()) && self.kind_at(1) == T::Colon {
            let mut fields = Vec::new();
            loop {
                let name = self.ident()?;
                self.expect(T::Colon)?;
                fields.push((name, self.term()?));
                if !self.eat(T::Comma) {
                    break;
                }
            }
            self.expect(T::RBrace)?;
            return Ok(Term::Udt(fields));
        }
        let first = self.term()?;
        if self.eat(T::Colon) {
            let mut entries = vec![(first, self.term()?)];
            while self.eat(T::Comma) {
                let k = self.term()?;
                self.expect(T::Colon)?;
                entries.push((k, self.term()?));
            }
            self.expect(T::RBrace)?;
            return Ok(Term::Map(entries));
        }
        let mut items = vec![first];
        while self.eat(T::Comma) {
            items.push(self.term()?);
        }
        self.expect(T::RBrace)?;
        Ok(Term::Set(items))
    }

    /// What may follow `(type)` in a term: a simple term, or `-` and a number.
    fn starts_hinted_term(&self, n: usize) -> bool {
        let k = self.kind_at(n);
        starts_simple_term(k)
            || self.function_call_at(n)
            || (k == T::Minus && is_numeric_kind(self.kind_at(n + 1)))
    }

    /// At `(`: when a type, `)` and something `follows` accepts come next, consumes `(type)`
    /// and returns the type; otherwise leaves the position alone.
    fn try_type_hint(&mut self, follows: fn(&Self, usize) -> bool) -> Option<TypeExpr> {
        if !matches!(
            self.kind_at(1),
            T::Ident | T::Keyword(_) | T::QuotedName | T::String | T::DollarString
        ) {
            return None;
        }
        let (pos, depth) = (self.pos, self.depth);
        self.bump();
        if let Ok(ty) = self.type_expr() {
            if self.at(T::RParen) && follows(self, 1) {
                self.bump();
                return Some(ty);
            }
        }
        self.pos = pos;
        self.depth = depth;
        None
    }

    // ---- types --------------------------------------------------------------------------

    /// `comparatorType`: native, collection, tuple, vector, frozen, user or custom type.
    fn type_expr(&mut self) -> PResult<TypeExpr> {
        self.nested(|p| p.type_inner())
    }

    fn type_inner(&mut self) -> PResult<TypeExpr> {
        let t = self.tok();
        match t.kind {
            T::String | T::DollarString => {
                self.bump();
                Ok(TypeExpr::Custom(self.string_value(&t)))
            }
            T::QuotedName => Ok(TypeExpr::Udt(self.user_type_name()?)),
            T::Ident | T::Keyword(_) => {
                let lower = self.text(&t).to_ascii_lowercase();
                if self.kind_at(1) == T::Lt {
                    let generic = matches!(
                        lower.as_str(),
                        "list" | "set" | "map" | "tuple" | "frozen" | "vector"
                    );
                    if generic {
                        self.bump();
                        self.bump();
                        return self.generic_type(&lower);
                    }
                }
                if is_native_type(&lower) {
                    self.bump();
                    return Ok(TypeExpr::Native(lower));
                }
                if !is_ident_kind(t.kind) {
                    return Err(self.no_viable());
                }
                Ok(TypeExpr::Udt(self.user_type_name()?))
            }
            _ => Err(self.no_viable()),
        }
    }

    /// The rest of `name<...>`, after the `<`.
    fn generic_type(&mut self, name: &str) -> PResult<TypeExpr> {
        let first = self.type_expr()?;
        let ty = match name {
            "list" => TypeExpr::List(Box::new(first)),
            "set" => TypeExpr::Set(Box::new(first)),
            "frozen" => TypeExpr::Frozen(Box::new(first)),
            "map" => {
                self.expect(T::Comma)?;
                TypeExpr::Map(Box::new(first), Box::new(self.type_expr()?))
            }
            "tuple" => {
                let mut items = vec![first];
                while self.eat(T::Comma) {
                    items.push(self.type_expr()?);
                }
                TypeExpr::Tuple(items)
            }
            _ => {
                self.expect(T::Comma)?;
                let t = self.expect(T::Integer)?;
                let n: u32 = self.text(&t).parse().map_err(|_| {
                    self.semantic(&t, format!("Invalid vector dimension {}", self.text(&t)))
                })?;
                TypeExpr::Vector(Box::new(first), n)
            }
        };
        self.expect(T::Gt)?;
        Ok(ty)
    }

    /// A native type name (after `CAST(... AS`).
    fn native_type(&mut self) -> PResult<TypeExpr> {
        let t = self.tok();
        if matches!(t.kind, T::Ident | T::Keyword(_)) {
            let lower = self.text(&t).to_ascii_lowercase();
            if is_native_type(&lower) {
                self.bump();
                return Ok(TypeExpr::Native(lower));
            }
        }
        Err(self.no_viable())
    }

    // ---- small shared clauses -----------------------------------------------------------

    /// `IF NOT EXISTS` (optional).
    fn if_not_exists(&mut self) -> PResult<bool> {
        if !self.eat_kw(Kw::If) {
            return Ok(false);
        }
        self.expect_kw(Kw::Not)?;
        self.expect_kw(Kw::Exists)?;
        Ok(true)
    }

    /// `IF EXISTS` (optional).
    fn if_exists(&mut self) -> PResult<bool> {
        if !self.eat_kw(Kw::If) {
            return Ok(false);
        }
        self.expect_kw(Kw::Exists)?;
        Ok(true)
    }

    /// `relationType`: `= < <= > >= !=`.
    fn relation_operator(&mut self) -> PResult<Operator> {
        let op = relation_operator_of(self.kind()).ok_or_else(|| self.no_viable())?;
        self.bump();
        Ok(op)
    }
}

fn relation_operator_of(k: T) -> Option<Operator> {
    Some(match k {
        T::Eq => Operator::Eq,
        T::Ne => Operator::Ne,
        T::Lt => Operator::Lt,
        T::Le => Operator::Le,
        T::Gt => Operator::Gt,
        T::Ge => Operator::Ge,
        _ => return None,
    })
}

/// IDENT, QUOTED_NAME or a keyword the grammar leaves unreserved.
fn is_ident_kind(k: T) -> bool {
    match k {
        T::Ident | T::QuotedName => true,
        T::Keyword(kw) => !kw.is_reserved(),
        _ => false,
    }
}

/// `allowedFunctionName`: an identifier, or `token` / `count`.
fn is_function_name_kind(k: T) -> bool {
    is_ident_kind(k) || k == T::Keyword(Kw::Token)
}

fn is_numeric_kind(k: T) -> bool {
    matches!(
        k,
        T::Integer | T::Float | T::Duration | T::Keyword(Kw::Nan) | T::Keyword(Kw::Infinity)
    )
}

/// Tokens of the grammar's `constant` rule.
fn is_constant_kind(k: T) -> bool {
    matches!(
        k,
        T::String
            | T::DollarString
            | T::Integer
            | T::Float
            | T::Boolean
            | T::Duration
            | T::Uuid
            | T::Hex
            | T::Keyword(Kw::Nan)
            | T::Keyword(Kw::Infinity)
    )
}

/// Tokens that can start a simple term other than a function call.
fn starts_simple_term(k: T) -> bool {
    is_constant_kind(k)
        || matches!(
            k,
            T::Keyword(Kw::Null) | T::Qmark | T::Colon | T::LParen | T::LBracket | T::LBrace
        )
}

fn is_native_type(lower: &str) -> bool {
    matches!(
        lower,
        "ascii"
            | "bigint"
            | "blob"
            | "boolean"
            | "counter"
            | "date"
            | "decimal"
            | "double"
            | "duration"
            | "float"
            | "inet"
            | "int"
            | "smallint"
            | "text"
            | "time"
            | "timestamp"
            | "timeuuid"
            | "tinyint"
            | "uuid"
            | "varchar"
            | "varint"
    )
}

/// `-` applied to a numeric literal: `5` -> `-5`, `-5` -> `5`, `NaN` stays `NaN`.
fn negate_literal(l: Literal) -> Literal {
    fn flip(s: String) -> String {
        match s.strip_prefix('-') {
            Some(rest) => rest.to_string(),
            None => format!("-{s}"),
        }
    }
    match l {
        Literal::Integer(s) => Literal::Integer(flip(s)),
        Literal::Float(s) if s == "NaN" => Literal::Float(s),
        Literal::Float(s) => Literal::Float(flip(s)),
        Literal::Duration(s) => Literal::Duration(flip(s)),
        other => other,
    }
}

/// `"a""b"` -> `a"b`.
fn unquote_name(s: &str) -> String {
    let inner = &s[1..s.len() - 1];
    if inner.contains("\"\"") {
        inner.replace("\"\"", "\"")
    } else {
        inner.to_string()
    }
}

fn decode_hex(digits: &str) -> Option<Vec<u8>> {
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    fn val(c: u8) -> u8 {
        match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => c - b'A' + 10,
        }
    }
    Some(
        digits
            .as_bytes()
            .chunks_exact(2)
            .map(|p| (val(p[0]) << 4) | val(p[1]))
            .collect(),
    )
}

/// Start offsets of ANTLR's hidden tokens in a gap between two tokens: each run of whitespace,
/// each `--`/`//` comment (through its line end) and each `/* */` comment.
fn hidden_token_starts(gap: &str) -> Vec<usize> {
    let b = gap.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        out.push(i);
        match b[i] {
            b' ' | b'\t' | b'\n' | b'\r' => {
                while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = gap[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            }
            _ => {
                i = b[i..]
                    .iter()
                    .position(|&c| c == b'\n' || c == b'\r')
                    .map_or(b.len(), |e| i + e + 1);
            }
        }
    }
    out
}
