//! Answers to statements for features ringgate does not offer (`ast::NotOffered`).
//!
//! Nothing of these kinds ever exists here, so a DROP (or ALTER) of one answers as Cassandra
//! does for a missing object: nothing at all with IF EXISTS, else Cassandra's "doesn't exist"
//! message. Statements that would create one are refused with an InvalidRequest that keeps the
//! start of Cassandra's own refusal (tools match on it) and says why instead of pointing at a
//! cassandra.yaml there is none of. Role and permission statements get Cassandra's answer to
//! its anonymous user when no one logged in (`auth.enabled` off), and otherwise a message that
//! names where ringgate's users are defined.

use super::{invalid, resolve_keyspace, Outcome, QueryError, Result, Session};
use crate::cql::ast::{NotOffered, QualifiedName};
use crate::schema::Schema;

pub const VIEWS_DISABLED: &str =
    "Materialized views are disabled. ringgate does not support materialized views.";
pub const FUNCTIONS_DISABLED: &str =
    "User-defined functions are disabled: ringgate does not run user-defined code";
pub const AGGREGATES_DISABLED: &str =
    "User-defined aggregates are disabled: ringgate does not run user-defined code";
/// Cassandra's `ClientState.ensureNotAnonymous`.
pub const ANONYMOUS: &str = "You have to be logged in and not anonymous to perform this request";
pub const ROLES_NOT_OFFERED: &str = "Roles and permissions are not managed through CQL: \
     ringgate's users are set in its configuration (auth.users)";

pub fn execute(
    schema: &Schema,
    session: &Session,
    keyspace: Option<&str>,
    statement: &NotOffered,
) -> Result<Outcome> {
    match statement {
        NotOffered::CreateView => Err(invalid(VIEWS_DISABLED)),
        NotOffered::CreateFunction => Err(invalid(FUNCTIONS_DISABLED)),
        NotOffered::CreateAggregate => Err(invalid(AGGREGATES_DISABLED)),
        NotOffered::MissingView { name, if_exists } => {
            let ks = resolve_keyspace(keyspace, name)?;
            missing(*if_exists, || {
                format!("Materialized view '{ks}.{}' doesn't exist", name.name)
            })
        }
        NotOffered::MissingFunction {
            aggregate,
            name,
            args,
            if_exists,
        } => {
            let ks = resolve_keyspace(keyspace, name)?;
            let kind = if *aggregate { "Aggregate" } else { "Function" };
            missing(*if_exists, || {
                let shown = match args {
                    Some(a) => format!("{ks}.{}({})", name.name, a.join(", ")),
                    None => format!("{ks}.{}", name.name),
                };
                format!("{kind} '{shown}' doesn't exist")
            })
        }
        NotOffered::CreateTrigger { table, class } => {
            create_trigger(schema, keyspace, table, class)
        }
        NotOffered::MissingTrigger {
            name,
            table,
            if_exists,
        } => {
            let ks = resolve_keyspace(keyspace, table)?;
            missing(*if_exists, || {
                format!("Trigger '{name}' on '{ks}.{}' doesn't exist", table.name)
            })
        }
        NotOffered::Role if session.logged_in => Err(invalid(ROLES_NOT_OFFERED)),
        NotOffered::Role => Err(QueryError::Unauthorized(ANONYMOUS.to_string())),
    }
}

/// IF EXISTS of something missing: nothing happens; without it, `message`.
fn missing(if_exists: bool, message: impl FnOnce() -> String) -> Result<Outcome> {
    if if_exists {
        Ok(Outcome::Void)
    } else {
        Err(invalid(message()))
    }
}

/// Cassandra checks the keyspace and the table before it tries to load the class; here no class
/// can be loaded.
fn create_trigger(
    schema: &Schema,
    keyspace: Option<&str>,
    table: &QualifiedName,
    class: &str,
) -> Result<Outcome> {
    let ks = resolve_keyspace(keyspace, table)?;
    let k = crate::schema::ddl::target_keyspace(schema, ks)?;
    if !k.tables.contains_key(&table.name) {
        // CreateTriggerStatement names the table alone, as CREATE INDEX does.
        return Err(invalid(format!("Table '{}' doesn't exist", table.name)));
    }
    Err(invalid(format!(
        "Trigger class '{class}' couldn't be loaded: ringgate does not run triggers"
    )))
}
