//! Maintenance over CQL: `INSERT INTO system_views.maintenance (command, ...) VALUES (...)` runs
//! a command on the server and answers with one row, `(command, result)`, the way a
//! conditional INSERT answers with `[applied]`. Writing a virtual table to act on the server
//! follows Cassandra, whose `system_views.settings` is changed by UPDATE; the commands and
//! their columns are listed by `SELECT * FROM system_views.maintenance`
//! (`schema::system::MAINTENANCE_COMMANDS`). The statement runs on a blocking thread
//! (`long.rs`) and returns when the command is done. Like every statement, it needs a logged-in
//! connection when `auth.enabled`.
//!
//! Commands: `flush`, `compact`, `garbage-collect` (keyspace_name, table_name), `backup`
//! (target: a new or empty directory on the server's machine).

use super::{eval, invalid, Engine, Outcome, Result, ResultColumn, Rows};
use crate::cql::ast::{Insert, InsertValues, Statement};
use crate::cql::types::CqlType;
use crate::schema::TableDef;
use bytes::Bytes;
use std::sync::Arc;

pub const KEYSPACE: &str = "system_views";
pub const TABLE: &str = "maintenance";

/// Whether the statement is a write to `system_views.maintenance`.
pub fn targets<'a>(statement: &'a Statement, keyspace: Option<&str>) -> Option<&'a Insert> {
    insert_into(statement, keyspace, TABLE)
}

/// The statement as an INSERT into `system_views.<table>`.
pub(super) fn insert_into<'a>(
    statement: &'a Statement,
    keyspace: Option<&str>,
    table: &str,
) -> Option<&'a Insert> {
    match statement {
        Statement::Insert(i)
            if i.table.keyspace.as_deref().or(keyspace) == Some(KEYSPACE)
                && i.table.name == table =>
        {
            Some(i)
        }
        _ => None,
    }
}

/// The command and its arguments, as written.
#[derive(Debug, Default)]
struct Command {
    name: String,
    keyspace: Option<String>,
    table: Option<String>,
    target: Option<String>,
}

fn command(ins: &Insert, ctx: &eval::Ctx) -> Result<Command> {
    let mut c = Command::default();
    for (col, v) in text_columns(ins, ctx, TABLE)? {
        match col.as_str() {
            "command" => c.name = v.unwrap_or_default(),
            "keyspace_name" => c.keyspace = v,
            "table_name" => c.table = v,
            "target" => c.target = v,
            "arguments" | "description" => {
                return Err(invalid(format!(
                    "{col} is read-only in system_views.maintenance"
                )))
            }
            other => {
                return Err(invalid(format!(
                    "Undefined column name {other} in table system_views.maintenance"
                )))
            }
        }
    }
    Ok(c)
}

/// The INSERT's columns with their values as text (an INSERT into a `system_views` table
/// that acts on the server; `table` names it in errors).
pub(super) fn text_columns(
    ins: &Insert,
    ctx: &eval::Ctx,
    table: &str,
) -> Result<Vec<(String, Option<String>)>> {
    let InsertValues::Values { columns, values } = &ins.values else {
        return Err(invalid(format!(
            "INSERT JSON is not supported on system_views.{table}"
        )));
    };
    let mut out = Vec::with_capacity(columns.len());
    for (col, term) in columns.iter().zip(values) {
        let v = match eval::eval(term, &CqlType::Text, col, ctx)? {
            eval::Val::Value(b) => Some(String::from_utf8_lossy(&b).into_owned()),
            _ => None,
        };
        out.push((col.to_string(), v));
    }
    Ok(out)
}

/// Runs the command the INSERT names and answers `(command, result)`.
pub fn run(engine: &Engine, ins: &Insert, ctx: &eval::Ctx) -> Result<Outcome> {
    let c = command(ins, ctx)?;
    let result = match c.name.as_str() {
        "flush" => {
            engine.store.flush()?;
            "flushed".to_string()
        }
        "compact" => {
            engine.store.compact()?;
            if engine.store.purges_in_compactions() {
                "compacted".to_string()
            } else {
                let n = super::purge_pass::run(engine, super::purge_pass::Pace::unlimited())?;
                format!("compacted ({n} expired or deleted entries purged)")
            }
        }
        "garbage-collect" => {
            let (Some(ks), Some(t)) = (&c.keyspace, &c.table) else {
                return Err(invalid(
                    "garbage-collect needs keyspace_name and table_name",
                ));
            };
            let swept = super::purge::sweep_table(engine, ks, t)?;
            format!("{swept} partitions lost tombstones")
        }
        "backup" => {
            let Some(dir) = &c.target else {
                return Err(invalid("backup needs target (a new or empty directory)"));
            };
            backup(engine, dir)?
        }
        other => {
            let known: Vec<&str> = crate::schema::system::MAINTENANCE_COMMANDS
                .iter()
                .map(|c| c.0)
                .collect();
            return Err(invalid(format!(
                "Unknown maintenance command '{other}'; known: {}",
                known.join(", ")
            )));
        }
    };
    tracing::info!(command = c.name, "maintenance: {result}");
    Ok(Outcome::Rows(result_row(&c.name, &result)))
}

fn backup(engine: &Engine, dir: &str) -> Result<String> {
    let path = std::path::Path::new(dir);
    if !path.is_absolute() {
        return Err(invalid(format!(
            "backup target must be an absolute path on the server's machine, got '{dir}'"
        )));
    }
    tracing::info!("backup to {dir}: started");
    let progress = |n: u64| tracing::info!("backup to {dir}: {n} entries written");
    let m = engine.store.backup(path, &progress)?;
    let entries: u64 = m.spaces.values().map(|s| s.entries).sum();
    let bytes: u64 = m.spaces.values().map(|s| s.bytes).sum();
    Ok(format!(
        "backup of {entries} entries ({bytes} bytes) as of {} ms since the epoch written to {dir}",
        m.created_at_ms
    ))
}

fn result_row(command: &str, result: &str) -> Rows {
    answer_row(TABLE, ("command", command), result)
}

/// The one-row answer of an INSERT that acts on the server: `(key column, result)`.
/// A row of view `t` from (column, value) pairs (columns `t` lacks are left out).
pub(super) fn view_row(t: &TableDef, cells: Vec<(&str, Option<Bytes>)>) -> Vec<Option<Bytes>> {
    let mut row = vec![None; t.columns.len()];
    for (col, v) in cells {
        if let Some(i) = t.column_index(col) {
            row[i] = v;
        }
    }
    row
}

pub(super) fn answer_row(table: &str, (key, value): (&str, &str), result: &str) -> Rows {
    let col = |name: &str| ResultColumn {
        keyspace: KEYSPACE.into(),
        table: table.into(),
        name: name.into(),
        ty: CqlType::Text,
    };
    let mut rows = Rows::new(Arc::new(vec![col(key), col("result")]));
    rows.push_cell(Some(value.as_bytes()));
    rows.push_cell(Some(result.as_bytes()));
    rows.count = 1;
    rows
}
