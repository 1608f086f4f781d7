//! Statements for features ringgate does not offer (`ast::NotOffered`): materialized views,
//! user-defined functions and aggregates, triggers, roles and permissions.
//!
//! Cassandra's grammar has them, so a schema script written for Cassandra holds them. Answering
//! "no viable alternative" would point at valid CQL; instead the head of each statement is read
//! (what a DROP or ALTER of a missing object reports, and a trigger's table and class) and the
//! rest is skipped to the statement's end without checking it: a malformed body of a statement
//! that is refused anyway gets the refusal, not a syntax error.

use super::{PResult, Parser};
use crate::cql::ast::{NotOffered, Statement};
use crate::cql::lexer::{Kw, TokenKind as T};

impl Parser<'_> {
    /// After CREATE: a statement for a feature not offered, or None for any other word.
    pub(super) fn create_not_offered(&mut self) -> PResult<Option<NotOffered>> {
        let n = match self.kind() {
            T::Keyword(Kw::Materialized) => {
                self.bump();
                self.expect_kw(Kw::View)?;
                NotOffered::CreateView
            }
            T::Keyword(Kw::Or) => {
                self.bump();
                self.expect_word("replace")?;
                self.create_routine()?
            }
            T::Keyword(Kw::Function | Kw::Aggregate) => self.create_routine()?,
            _ if self.at_word("trigger") => return self.create_trigger().map(Some),
            _ if self.at_word("role") || self.at_word("user") => NotOffered::Role,
            _ => return Ok(None),
        };
        self.skip_statement_rest()?;
        Ok(Some(n))
    }

    /// After ALTER: a statement for a feature not offered, or None.
    pub(super) fn alter_not_offered(&mut self) -> PResult<Option<NotOffered>> {
        let n = match self.kind() {
            T::Keyword(Kw::Materialized) => self.view_name()?,
            _ if self.at_word("role") || self.at_word("user") => NotOffered::Role,
            _ => return Ok(None),
        };
        self.skip_statement_rest()?;
        Ok(Some(n))
    }

    /// After DROP: a statement for a feature not offered, or None. Unlike CREATE and ALTER,
    /// the whole statement is read: it is short, and IF EXISTS makes it succeed.
    pub(super) fn drop_not_offered(&mut self) -> PResult<Option<NotOffered>> {
        match self.kind() {
            T::Keyword(Kw::Materialized) => self.view_name().map(Some),
            T::Keyword(Kw::Function) => self.drop_routine(false).map(Some),
            T::Keyword(Kw::Aggregate) => self.drop_routine(true).map(Some),
            _ if self.at_word("trigger") => self.drop_trigger().map(Some),
            _ if self.at_word("role") || self.at_word("user") || self.at_word("identity") => {
                self.skip_statement_rest()?;
                Ok(Some(NotOffered::Role))
            }
            _ => Ok(None),
        }
    }

    /// At GRANT, REVOKE, LIST or ADD (IDENTITY): a role or permission statement.
    pub(super) fn role_statement(&mut self) -> PResult<Statement> {
        if self.eat_kw(Kw::Add) && !self.at_word("identity") {
            return Err(self.no_viable());
        }
        self.skip_statement_rest()?;
        Ok(Statement::NotOffered(NotOffered::Role))
    }

    /// At FUNCTION or AGGREGATE, after CREATE [OR REPLACE].
    fn create_routine(&mut self) -> PResult<NotOffered> {
        if self.eat_kw(Kw::Function) {
            return Ok(NotOffered::CreateFunction);
        }
        self.expect_kw(Kw::Aggregate)?;
        Ok(NotOffered::CreateAggregate)
    }

    /// `TRIGGER [IF NOT EXISTS] name ON table USING 'class'`.
    fn create_trigger(&mut self) -> PResult<NotOffered> {
        self.bump();
        self.if_not_exists()?;
        self.ident()?;
        self.expect_kw(Kw::On)?;
        let table = self.qualified_name("table")?;
        self.expect_kw(Kw::Using)?;
        let t = self.expect(T::String)?;
        let class = self.string_value(&t);
        Ok(NotOffered::CreateTrigger { table, class })
    }

    /// `MATERIALIZED VIEW [IF EXISTS] name`, after ALTER or DROP.
    fn view_name(&mut self) -> PResult<NotOffered> {
        self.bump();
        self.expect_kw(Kw::View)?;
        let if_exists = self.if_exists()?;
        let name = self.qualified_name("table")?;
        Ok(NotOffered::MissingView { name, if_exists })
    }

    /// `FUNCTION|AGGREGATE [IF EXISTS] name [(type, ...)]`, after DROP.
    fn drop_routine(&mut self, aggregate: bool) -> PResult<NotOffered> {
        self.bump();
        let if_exists = self.if_exists()?;
        let name = self.qualified_name("function")?;
        let args = if self.eat(T::LParen) {
            Some(self.argument_types()?)
        } else {
            None
        };
        Ok(NotOffered::MissingFunction {
            aggregate,
            name,
            args,
            if_exists,
        })
    }

    /// `type, ...)`: each type's text as written, lower-cased, for the error message.
    fn argument_types(&mut self) -> PResult<Vec<String>> {
        let mut types = Vec::new();
        if self.eat(T::RParen) {
            return Ok(types);
        }
        loop {
            let (start, first) = (self.tok().start as usize, self.pos);
            self.type_expr()?;
            // A type is at least one token; the guard keeps the slice well-formed regardless.
            let end = match self.pos.checked_sub(1) {
                Some(last) if last >= first => self.toks[last].end as usize,
                _ => start,
            };
            types.push(self.src[start..end].to_ascii_lowercase());
            if self.eat(T::RParen) {
                return Ok(types);
            }
            self.expect(T::Comma)?;
        }
    }

    /// `TRIGGER [IF EXISTS] name ON table`, after DROP.
    fn drop_trigger(&mut self) -> PResult<NotOffered> {
        self.bump();
        let if_exists = self.if_exists()?;
        let name = self.ident()?;
        self.expect_kw(Kw::On)?;
        let table = self.qualified_name("table")?;
        Ok(NotOffered::MissingTrigger {
            name,
            table,
            if_exists,
        })
    }

    /// Whether the current token is the unquoted, non-keyword word `word` (any case): the
    /// words these statements use that the lexer does not know as keywords.
    fn at_word(&self, word: &str) -> bool {
        self.at(T::Ident) && self.text(&self.tok()).eq_ignore_ascii_case(word)
    }

    fn expect_word(&mut self, word: &str) -> PResult<()> {
        if !self.at_word(word) {
            return Err(self.no_viable());
        }
        self.bump();
        Ok(())
    }

    /// Moves to the statement's end: a `;` or the end of the text. A lexing error in the
    /// skipped part is still reported: it would be one in any statement.
    fn skip_statement_rest(&mut self) -> PResult<()> {
        loop {
            match self.kind() {
                T::Semicolon | T::Eof => return Ok(()),
                T::Error => return Err(self.no_viable()),
                _ => {
                    self.bump();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::cql::ast::{NotOffered, QualifiedName, Statement};
    use crate::cql::{parse, parse_many};

    fn n(s: &str) -> NotOffered {
        match parse(s).map(|p| p.statement) {
            Ok(Statement::NotOffered(n)) => n,
            other => panic!("{s}\n  => {other:?}"),
        }
    }

    fn name(ks: Option<&str>, name: &str) -> QualifiedName {
        QualifiedName {
            keyspace: ks.map(str::to_string),
            name: name.to_string(),
        }
    }

    #[test]
    fn creates_are_read_to_the_end_of_the_statement() {
        let view = "CREATE MATERIALIZED VIEW ks.v AS SELECT * FROM t \
                    WHERE a IS NOT NULL AND k IS NOT NULL PRIMARY KEY (a, k) WITH comment = 'x';";
        assert_eq!(n(view), NotOffered::CreateView);
        let f = "CREATE OR REPLACE FUNCTION ks.f (a int) CALLED ON NULL INPUT RETURNS int \
                 LANGUAGE java AS $$ return a; $$";
        assert_eq!(n(f), NotOffered::CreateFunction);
        let f2 = "create function if not exists f(a int) returns null on null input \
                  returns int language java as 'return a;'";
        assert_eq!(n(f2), NotOffered::CreateFunction);
        let agg = "CREATE AGGREGATE ks.a (int) SFUNC f STYPE int INITCOND 0";
        assert_eq!(n(agg), NotOffered::CreateAggregate);
        assert_eq!(
            n("CREATE ROLE r WITH PASSWORD = 'p' AND LOGIN = true"),
            NotOffered::Role
        );
        assert_eq!(
            n("create user u with password 'p' superuser"),
            NotOffered::Role
        );
    }

    #[test]
    fn drops_and_alters_name_what_is_missing() {
        let missing_view = |ks, if_exists| NotOffered::MissingView {
            name: name(ks, "v"),
            if_exists,
        };
        assert_eq!(n("DROP MATERIALIZED VIEW v"), missing_view(None, false));
        assert_eq!(
            n("DROP MATERIALIZED VIEW IF EXISTS ks.v"),
            missing_view(Some("ks"), true)
        );
        let alter = "ALTER MATERIALIZED VIEW ks.v WITH comment = 'x' AND gc_grace_seconds = 1";
        assert_eq!(n(alter), missing_view(Some("ks"), false));
        assert_eq!(
            n("DROP FUNCTION IF EXISTS ks.f (int, FROZEN<list<text>>, map<int, text>)"),
            NotOffered::MissingFunction {
                aggregate: false,
                name: name(Some("ks"), "f"),
                args: Some(vec![
                    "int".into(),
                    "frozen<list<text>>".into(),
                    "map<int, text>".into()
                ]),
                if_exists: true,
            }
        );
        assert_eq!(
            n("DROP AGGREGATE a()"),
            NotOffered::MissingFunction {
                aggregate: true,
                name: name(None, "a"),
                args: Some(vec![]),
                if_exists: false,
            }
        );
        assert_eq!(
            n("DROP TRIGGER IF EXISTS tr ON ks.t"),
            NotOffered::MissingTrigger {
                name: "tr".into(),
                table: name(Some("ks"), "t"),
                if_exists: true,
            }
        );
        assert_eq!(
            n("CREATE TRIGGER IF NOT EXISTS tr ON t USING 'org.x.Y'"),
            NotOffered::CreateTrigger {
                table: name(None, "t"),
                class: "org.x.Y".into(),
            }
        );
        for role in [
            "DROP ROLE IF EXISTS r",
            "ALTER USER u WITH PASSWORD 'q'",
            "GRANT SELECT ON KEYSPACE ks TO r",
            "REVOKE r FROM s",
            "LIST ROLES",
            "LIST ALL PERMISSIONS OF r NORECURSIVE",
            "ADD IDENTITY 'id' TO ROLE 'r'",
            "DROP IDENTITY 'id'",
        ] {
            assert_eq!(n(role), NotOffered::Role, "{role}");
        }
    }

    #[test]
    fn malformed_heads_are_still_syntax_errors() {
        for bad in [
            "CREATE MATERIALIZED v",
            "CREATE OR FUNCTION f",
            "CREATE OR REPLACE TABLE t",
            "DROP FUNCTION ks.f(int",
            "DROP FUNCTION ks.f(int,)",
            "DROP MATERIALIZED VIEW ks.v extra",
            "DROP TRIGGER tr",
            "CREATE TRIGGER tr ON t USING Y",
            "ADD x",
            "CREATE ROLE r WITH PASSWORD = 'unterminated",
            "CREATE TRIGGERS x",
        ] {
            assert!(parse(bad).is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn a_skipped_body_ends_at_its_semicolon() {
        let script = "CREATE FUNCTION f (a int) RETURNS NULL ON NULL INPUT RETURNS int \
                      LANGUAGE java AS $$ int b = a; return b; $$; LIST ROLES; SELECT * FROM t";
        let all = parse_many(script).expect("parses");
        assert_eq!(all.len(), 3);
        assert_eq!(
            all[0].statement,
            Statement::NotOffered(NotOffered::CreateFunction)
        );
        assert_eq!(all[1].statement, Statement::NotOffered(NotOffered::Role));
        assert!(matches!(all[2].statement, Statement::Select(_)));
    }

    #[test]
    fn the_words_stay_usable_as_names() {
        for q in [
            "SELECT role, user, trigger, identity, replace FROM t",
            "CREATE TABLE user (role text PRIMARY KEY, trigger int)",
        ] {
            assert!(parse(q).is_ok(), "{q}");
        }
    }
}
