//! Schema statements (keyspaces, tables, types, indexes), USE, TRUNCATE and DESCRIBE.

use super::{
    is_constant_kind, is_function_name_kind, is_ident_kind, is_numeric_kind, PResult, Parser,
};
use crate::cql::ast::*;
use crate::cql::lexer::{Kw, TokenKind as T};

impl Parser<'_> {
    pub(super) fn use_statement(&mut self) -> PResult<Statement> {
        self.expect_kw(Kw::Use)?;
        Ok(Statement::Use(self.name_part("keyspace")?))
    }

    pub(super) fn truncate_statement(&mut self) -> PResult<Statement> {
        self.expect_kw(Kw::Truncate)?;
        self.eat_kw(Kw::ColumnFamily);
        Ok(Statement::Truncate(self.qualified_name("table")?))
    }

    pub(super) fn create_statement(&mut self) -> PResult<Statement> {
        self.expect_kw(Kw::Create)?;
        match self.kind() {
            T::Keyword(Kw::Keyspace | Kw::Schema) => {
                self.bump();
                let if_not_exists = self.if_not_exists()?;
                let name = self.name_part("keyspace")?;
                self.expect_kw(Kw::With)?;
                let properties = self.properties(false)?;
                Ok(Statement::CreateKeyspace {
                    name,
                    if_not_exists,
                    properties,
                })
            }
            T::Keyword(Kw::ColumnFamily) => {
                self.bump();
                Ok(Statement::CreateTable(self.create_table()?))
            }
            T::Keyword(Kw::Type) => {
                self.bump();
                self.create_type()
            }
            T::Keyword(Kw::Custom | Kw::Index) => self.create_index(),
            _ => self.not_offered(Self::create_not_offered),
        }
    }

    pub(super) fn alter_statement(&mut self) -> PResult<Statement> {
        self.expect_kw(Kw::Alter)?;
        match self.kind() {
            T::Keyword(Kw::Keyspace | Kw::Schema) => {
                self.bump();
                let if_exists = self.if_exists()?;
                let name = self.name_part("keyspace")?;
                self.expect_kw(Kw::With)?;
                let properties = self.properties(false)?;
                Ok(Statement::AlterKeyspace {
                    name,
                    if_exists,
                    properties,
                })
            }
            T::Keyword(Kw::ColumnFamily) => {
                self.bump();
                self.alter_table()
            }
            T::Keyword(Kw::Type) => {
                self.bump();
                self.alter_type()
            }
            _ => self.not_offered(Self::alter_not_offered),
        }
    }

    pub(super) fn drop_statement(&mut self) -> PResult<Statement> {
        self.expect_kw(Kw::Drop)?;
        let what = self.kind();
        match what {
            T::Keyword(Kw::Keyspace | Kw::Schema) => {
                self.bump();
                let if_exists = self.if_exists()?;
                let name = self.name_part("keyspace")?;
                Ok(Statement::DropKeyspace { name, if_exists })
            }
            T::Keyword(Kw::ColumnFamily) => {
                self.bump();
                let if_exists = self.if_exists()?;
                let name = self.qualified_name("table")?;
                Ok(Statement::DropTable { name, if_exists })
            }
            T::Keyword(Kw::Type) => {
                self.bump();
                let if_exists = self.if_exists()?;
                let name = self.user_type_name()?;
                Ok(Statement::DropType { name, if_exists })
            }
            T::Keyword(Kw::Index) => {
                self.bump();
                let if_exists = self.if_exists()?;
                let name = self.qualified_name("index")?;
                Ok(Statement::DropIndex { name, if_exists })
            }
            _ => self.not_offered(Self::drop_not_offered),
        }
    }

    /// A statement for a feature not offered that `head` recognises, or the grammar's
    /// "no viable alternative" at the word it did not.
    fn not_offered(
        &mut self,
        head: fn(&mut Self) -> PResult<Option<NotOffered>>,
    ) -> PResult<Statement> {
        match head(self)? {
            Some(n) => Ok(Statement::NotOffered(n)),
            None => Err(self.no_viable()),
        }
    }

    /// After `CREATE TABLE`.
    fn create_table(&mut self) -> PResult<CreateTable> {
        let if_not_exists = self.if_not_exists()?;
        let name_tok = self.tok();
        let name = self.qualified_name("table")?;
        self.expect(T::LParen)?;
        let mut columns: Vec<ColumnDef> = Vec::new();
        let mut primary_key: Option<(Vec<String>, Vec<String>)> = None;
        loop {
            let start = self.tok();
            if self.eat_kw(Kw::Primary) {
                // PRIMARY KEY (a, b) | PRIMARY KEY ((a, b), c)
                self.expect_kw(Kw::Key)?;
                self.expect(T::LParen)?;
                let partition = if self.eat(T::LParen) {
                    let mut keys = vec![self.ident()?];
                    while self.eat(T::Comma) {
                        keys.push(self.ident()?);
                    }
                    self.expect(T::RParen)?;
                    keys
                } else {
                    vec![self.ident()?]
                };
                let mut clustering = Vec::new();
                while self.eat(T::Comma) {
                    clustering.push(self.ident()?);
                }
                self.expect(T::RParen)?;
                if primary_key.is_some() {
                    return Err(self.semantic(&start, MULTIPLE_PRIMARY_KEYS));
                }
                primary_key = Some((partition, clustering));
            } else {
                let column = self.column_definition()?;
                if columns.iter().any(|c| c.name == column.name) {
                    return Err(self.semantic(
                        &start,
                        format!("Multiple definition of identifier {}", column.name),
                    ));
                }
                let pk_tok = self.tok();
                if self.eat_kw(Kw::Primary) {
                    self.expect_kw(Kw::Key)?;
                    if primary_key.is_some() {
                        return Err(self.semantic(&pk_tok, MULTIPLE_PRIMARY_KEYS));
                    }
                    primary_key = Some((vec![column.name.clone()], Vec::new()));
                }
                columns.push(column);
            }
            // `( ',' tableColumns? )*`: stray commas are allowed.
            if !self.eat(T::Comma) {
                break;
            }
            while self.eat(T::Comma) {}
            if self.at(T::RParen) {
                break;
            }
        }
        self.expect(T::RParen)?;
        let properties = if self.eat_kw(Kw::With) {
            self.properties(true)?
        } else {
            Properties::default()
        };
        let Some((partition_key, clustering)) = primary_key else {
            return Err(self.semantic(
                &name_tok,
                format!(
                    "No PRIMARY KEY specifed for table '{}' (exactly one required)",
                    name.name
                ),
            ));
        };
        Ok(CreateTable {
            name,
            if_not_exists,
            columns,
            partition_key,
            clustering,
            properties,
        })
    }

    /// `name type [STATIC]`.
    fn column_definition(&mut self) -> PResult<ColumnDef> {
        let name = self.ident()?;
        let ty = self.type_expr()?;
        let is_static = self.eat_kw(Kw::Static);
        Ok(ColumnDef {
            name,
            ty,
            is_static,
        })
    }

    /// After `ALTER TABLE`.
    fn alter_table(&mut self) -> PResult<Statement> {
        let if_exists = self.if_exists()?;
        let name = self.qualified_name("table")?;
        let mut if_column_not_exists = false;
        let mut if_column_exists = false;
        let action = match self.kind() {
            T::Keyword(Kw::Alter) => {
                self.bump();
                let column = self.cident()?;
                self.expect_kw(Kw::Type)?;
                AlterTableAction::AlterType(column, self.type_expr()?)
            }
            T::Keyword(Kw::Add) => {
                self.bump();
                if_column_not_exists = self.if_not_exists()?;
                let mut columns = Vec::new();
                if self.eat(T::LParen) {
                    loop {
                        columns.push(self.column_definition()?);
                        if !self.eat(T::Comma) {
                            break;
                        }
                    }
                    self.expect(T::RParen)?;
                } else {
                    columns.push(self.column_definition()?);
                }
                AlterTableAction::Add(columns)
            }
            T::Keyword(Kw::Drop) => {
                self.bump();
                if_column_exists = self.if_exists()?;
                let mut columns = Vec::new();
                if self.eat(T::LParen) {
                    loop {
                        columns.push(self.ident()?);
                        if !self.eat(T::Comma) {
                            break;
                        }
                    }
                    self.expect(T::RParen)?;
                } else {
                    columns.push(self.ident()?);
                }
                // `USING TIMESTAMP n`: the drop's time (an integer literal only, as Cassandra)
                let mut timestamp = None;
                if self.eat_kw(Kw::Using) {
                    self.expect_kw(Kw::Timestamp)?;
                    let t = self.expect(T::Integer)?;
                    let n: i64 = self.text(&t).parse().map_err(|_| {
                        self.semantic(&t, format!("Invalid timestamp {}", self.text(&t)))
                    })?;
                    timestamp = Some(n);
                }
                AlterTableAction::Drop(columns, timestamp)
            }
            T::Keyword(Kw::Rename) => {
                self.bump();
                if_column_exists = self.if_exists()?;
                AlterTableAction::Rename(self.renames()?)
            }
            T::Keyword(Kw::With) => {
                self.bump();
                AlterTableAction::With(self.properties(false)?)
            }
            _ => return Err(self.no_viable()),
        };
        Ok(Statement::AlterTable {
            name,
            if_exists,
            action,
            if_column_not_exists,
            if_column_exists,
        })
    }

    /// `a TO b [AND c TO d ...]`.
    fn renames(&mut self) -> PResult<Vec<(String, String)>> {
        let mut out = Vec::new();
        loop {
            let from = self.ident()?;
            self.expect_kw(Kw::To)?;
            out.push((from, self.ident()?));
            if !self.eat_kw(Kw::And) {
                return Ok(out);
            }
        }
    }

    /// After `CREATE TYPE`.
    fn create_type(&mut self) -> PResult<Statement> {
        let if_not_exists = self.if_not_exists()?;
        let name = self.user_type_name()?;
        self.expect(T::LParen)?;
        let mut fields = Vec::new();
        loop {
            let field = self.ident()?;
            fields.push((field, self.type_expr()?));
            if !self.eat(T::Comma) {
                break;
            }
            while self.eat(T::Comma) {}
            if self.at(T::RParen) {
                break;
            }
        }
        self.expect(T::RParen)?;
        Ok(Statement::CreateType {
            name,
            if_not_exists,
            fields,
        })
    }

    /// After `ALTER TYPE`.
    fn alter_type(&mut self) -> PResult<Statement> {
        let if_exists = self.if_exists()?;
        let name = self.user_type_name()?;
        let mut if_field_not_exists = false;
        let mut if_field_exists = false;
        let action = match self.kind() {
            T::Keyword(Kw::Alter) => {
                self.bump();
                let field = self.ident()?;
                self.expect_kw(Kw::Type)?;
                AlterTypeAction::AlterField(field, self.type_expr()?)
            }
            T::Keyword(Kw::Add) => {
                self.bump();
                if_field_not_exists = self.if_not_exists()?;
                let field = self.ident()?;
                AlterTypeAction::Add(field, self.type_expr()?)
            }
            T::Keyword(Kw::Rename) => {
                self.bump();
                if_field_exists = self.if_exists()?;
                AlterTypeAction::Rename(self.renames()?)
            }
            _ => return Err(self.no_viable()),
        };
        Ok(Statement::AlterType {
            name,
            if_exists,
            action,
            if_field_not_exists,
            if_field_exists,
        })
    }

    /// `CREATE [CUSTOM] INDEX [IF NOT EXISTS] [name] ON t (target) [USING 'class'] [WITH ...]`.
    fn create_index(&mut self) -> PResult<Statement> {
        let custom_tok = self.tok();
        let custom = self.eat_kw(Kw::Custom);
        self.expect_kw(Kw::Index)?;
        let if_not_exists = self.if_not_exists()?;
        let name = if self.at_kw(Kw::On) {
            None
        } else {
            Some(self.name_part("index")?)
        };
        self.expect_kw(Kw::On)?;
        let table = self.qualified_name("table")?;
        self.expect(T::LParen)?;
        let target = match self.kind() {
            T::Keyword(kw @ (Kw::Keys | Kw::Values | Kw::Entries | Kw::Full))
                if kw.is_reserved() || self.kind_at(1) == T::LParen =>
            {
                self.bump();
                self.expect(T::LParen)?;
                let column = self.cident()?;
                self.expect(T::RParen)?;
                match kw {
                    Kw::Keys => IndexTarget::Keys(column),
                    Kw::Values => IndexTarget::Values(column),
                    Kw::Entries => IndexTarget::Entries(column),
                    _ => IndexTarget::Full(column),
                }
            }
            _ => IndexTarget::Column(self.cident()?),
        };
        self.expect(T::RParen)?;
        let custom_class = if self.eat_kw(Kw::Using) {
            if !matches!(self.kind(), T::String | T::DollarString) {
                return Err(self.mismatch("STRING_LITERAL"));
            }
            let t = self.bump();
            Some(self.string_value(&t))
        } else {
            None
        };
        let properties = if self.eat_kw(Kw::With) {
            self.properties(false)?
        } else {
            Properties::default()
        };
        if custom && custom_class.is_none() {
            return Err(self.semantic(
                &custom_tok,
                "CUSTOM index requires specifying the index class",
            ));
        }
        Ok(Statement::CreateIndex {
            name,
            table,
            target,
            if_not_exists,
            custom_class,
            properties,
        })
    }

    /// `name = value AND ...` after `WITH`; with `table`, also `CLUSTERING ORDER BY (...)` and
    /// `COMPACT STORAGE`.
    fn properties(&mut self, table: bool) -> PResult<Properties> {
        let mut props = Properties::default();
        loop {
            if table && self.at_kw(Kw::Clustering) && self.kind_at(1) == T::Keyword(Kw::Order) {
                self.bump();
                self.bump();
                self.expect_kw(Kw::By)?;
                self.expect(T::LParen)?;
                loop {
                    let column = self.ident()?;
                    let order = match self.kind() {
                        T::Keyword(Kw::Asc) => Order::Asc,
                        T::Keyword(Kw::Desc) => Order::Desc,
                        _ => return Err(self.no_viable()),
                    };
                    self.bump();
                    props.clustering_order.push((column, order));
                    if !self.eat(T::Comma) {
                        break;
                    }
                }
                self.expect(T::RParen)?;
            } else if table && self.at_kw(Kw::Compact) && self.kind_at(1) == T::Keyword(Kw::Storage)
            {
                self.bump();
                self.bump();
                props.compact_storage = true;
            } else {
                let name_tok = self.tok();
                let name = self.ident()?;
                self.expect(T::Eq)?;
                let value = self.property_value()?;
                if props.values.iter().any(|(n, _)| *n == name) {
                    return Err(self.semantic(
                        &name_tok,
                        format!("Multiple definition for property {name}"),
                    ));
                }
                props.values.push((name, value));
            }
            if !self.eat_kw(Kw::And) {
                return Ok(props);
            }
        }
    }

    /// A constant, a bare word (kept as written, as a string) or a map of constants.
    fn property_value(&mut self) -> PResult<PropertyValue> {
        let k = self.kind();
        if k == T::LBrace {
            return self.property_map();
        }
        if is_constant_kind(k) || (k == T::Minus && is_numeric_kind(self.kind_at(1))) {
            return Ok(PropertyValue::Constant(self.constant()?));
        }
        if matches!(k, T::Ident) || (is_ident_kind(k) && k != T::QuotedName) {
            let t = self.bump();
            return Ok(PropertyValue::Constant(Literal::String(
                self.text(&t).to_string(),
            )));
        }
        Err(self.no_viable())
    }

    /// `{ k: v, ... }` where keys and values must be constants.
    fn property_map(&mut self) -> PResult<PropertyValue> {
        self.expect(T::LBrace)?;
        let mut entries: Vec<(Literal, Literal)> = Vec::new();
        if self.eat(T::RBrace) {
            return Ok(PropertyValue::Map(entries));
        }
        loop {
            let key_tok = self.tok();
            let key = self.term()?;
            self.expect(T::Colon)?;
            let value_tok = self.tok();
            let value = self.term()?;
            // The whole value as written (a nested map or list spans many tokens).
            let value_text =
                self.src[value_tok.start as usize..self.tok().start as usize].trim_end();
            let key_text = self.text(&key_tok);
            let key = match key {
                Term::Literal(l) if l != Literal::Null => l,
                other => {
                    let mut msg = format!("Invalid property name: {key_text}");
                    if matches!(other, Term::Bind { .. }) {
                        msg.push_str(" (bind variables are not supported in DDL queries)");
                    }
                    return Err(self.semantic(&key_tok, msg));
                }
            };
            let value = match value {
                Term::Literal(l) if l != Literal::Null => l,
                other => {
                    let mut msg =
                        format!("Invalid property value: {value_text} for property: {key_text}");
                    if matches!(other, Term::Bind { .. }) {
                        msg.push_str(" (bind variables are not supported in DDL queries)");
                    }
                    return Err(self.semantic(&value_tok, msg));
                }
            };
            if entries.iter().any(|(k, _)| *k == key) {
                return Err(self.semantic(
                    &key_tok,
                    format!("Multiple definition for property {key_text}"),
                ));
            }
            entries.push((key, value));
            if !self.eat(T::Comma) {
                break;
            }
        }
        self.expect(T::RBrace)?;
        Ok(PropertyValue::Map(entries))
    }

    /// `DESCRIBE | DESC` and what follows, as cqlsh sends it.
    pub(super) fn describe_statement(&mut self) -> PResult<Describe> {
        self.bump();
        let mut only = false;
        let target = match self.kind() {
            T::Keyword(Kw::Cluster) => {
                self.bump();
                DescribeTarget::Cluster
            }
            T::Keyword(Kw::Full) => {
                self.bump();
                self.expect_kw(Kw::Schema)?;
                DescribeTarget::FullSchema
            }
            T::Keyword(Kw::Schema) => {
                self.bump();
                DescribeTarget::Schema
            }
            T::Keyword(Kw::Keyspaces) => {
                self.bump();
                DescribeTarget::Keyspaces
            }
            T::Keyword(Kw::Only) if self.kind_at(1) == T::Keyword(Kw::Keyspace) => {
                only = true;
                self.bump();
                self.keyspace_target()?
            }
            T::Keyword(Kw::Keyspace) => self.keyspace_target()?,
            T::Keyword(Kw::Tables) => {
                self.bump();
                DescribeTarget::Tables
            }
            T::Keyword(Kw::ColumnFamily) => {
                self.bump();
                DescribeTarget::Table(self.qualified_name("table")?)
            }
            T::Keyword(Kw::Index) => {
                self.bump();
                DescribeTarget::Index(self.qualified_name("index")?)
            }
            T::Keyword(Kw::Materialized) => {
                self.bump();
                self.expect_kw(Kw::View)?;
                DescribeTarget::MaterializedView(self.qualified_name("table")?)
            }
            T::Keyword(Kw::Types) => {
                self.bump();
                DescribeTarget::Types
            }
            T::Keyword(Kw::Type) if is_ident_kind(self.kind_at(1)) => {
                self.bump();
                DescribeTarget::Type(self.user_type_name()?)
            }
            T::Keyword(Kw::Functions) => {
                self.bump();
                DescribeTarget::Functions
            }
            T::Keyword(Kw::Function) if is_function_name_kind(self.kind_at(1)) => {
                self.bump();
                let (keyspace, name) = self.function_name()?;
                DescribeTarget::Function(QualifiedName { keyspace, name })
            }
            T::Keyword(Kw::Aggregates) => {
                self.bump();
                DescribeTarget::Aggregates
            }
            T::Keyword(Kw::Aggregate) if is_function_name_kind(self.kind_at(1)) => {
                self.bump();
                let (keyspace, name) = self.function_name()?;
                DescribeTarget::Aggregate(QualifiedName { keyspace, name })
            }
            k if is_ident_kind(k) => DescribeTarget::Name(self.qualified_name("table")?),
            _ => return Err(self.no_viable()),
        };
        let with_internals = self.eat_kw(Kw::With);
        if with_internals {
            self.expect_kw(Kw::Internals)?;
        }
        Ok(Describe {
            target,
            only,
            with_internals,
        })
    }

    /// `KEYSPACE [name]`.
    fn keyspace_target(&mut self) -> PResult<DescribeTarget> {
        self.expect_kw(Kw::Keyspace)?;
        let name = if is_ident_kind(self.kind()) {
            Some(self.ident()?)
        } else {
            None
        };
        Ok(DescribeTarget::Keyspace(name))
    }
}

const MULTIPLE_PRIMARY_KEYS: &str = "Multiple PRIMARY KEYs specified (exactly one required)";
