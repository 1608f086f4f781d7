//! DDL: turning CREATE/ALTER/DROP statements into a new schema, with Cassandra's validation
//! and error messages.

use super::{
    ColumnDef, ColumnKind, KeyspaceDef, PartitionKeyKind, Schema, SchemaError, TableDef,
    TableOptions,
};
use crate::cql::ast::{
    self, AlterTableAction, Literal, Order, Properties, PropertyValue, QualifiedName, TypeExpr,
};
use crate::cql::types::{CqlType, UdtDef};
use std::collections::BTreeMap;
use std::sync::Arc;
use uuid::Uuid;

// The submodules are seams of one statement path: each sees this module's imports and its
// siblings' items through `use super::*` (the globs below), so moving code between them needs
// no import changes.
mod alter_table;
mod index;
mod keyspace;
mod props;
mod table;
mod table_options;
mod user_types;

pub use self::alter_table::alter_table;
pub use self::alter_table::AlterFlags;
pub use self::index::create_index;
pub use self::index::drop_index;
pub use self::keyspace::alter_keyspace;
pub use self::keyspace::create_keyspace;
pub use self::keyspace::drop_keyspace;
pub use self::keyspace::DroppedKeyspace;
use self::props::*;
pub use self::table::assemble_table;
pub use self::table::create_table;
pub use self::table::drop_table;
use self::table::*;
use self::table_options::*;
pub use self::user_types::alter_type;
pub use self::user_types::create_type;
pub use self::user_types::drop_type;
pub use self::user_types::resolve_type;
use self::user_types::*;

/// What a DDL statement changed: becomes a SCHEMA_CHANGE result and event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaChange {
    pub change: ChangeKind,
    pub target: ChangeTarget,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Created,
    Updated,
    Dropped,
}

impl ChangeKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            ChangeKind::Created => "CREATED",
            ChangeKind::Updated => "UPDATED",
            ChangeKind::Dropped => "DROPPED",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeTarget {
    Keyspace(String),
    Table(String, String),
    Type(String, String),
}

fn invalid(msg: impl Into<String>) -> SchemaError {
    SchemaError::Invalid(msg.into())
}

fn config(msg: impl Into<String>) -> SchemaError {
    SchemaError::Config(msg.into())
}

/// The keyspace a CREATE statement adds to, with Cassandra 5.0's schema statements' message
/// ("doesn't", where USE and reads say "does not"). Also `query/not_offered.rs`'s CREATE TRIGGER.
pub(crate) fn target_keyspace<'s>(
    schema: &'s Schema,
    keyspace: &str,
) -> Result<&'s Arc<crate::schema::KeyspaceDef>, SchemaError> {
    schema
        .keyspace(keyspace)
        .ok_or_else(|| invalid(format!("Keyspace '{keyspace}' doesn't exist")))
}
