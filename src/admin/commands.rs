//! What each `ringgate admin` command asks the server and how it shows the answer.

use super::render::{objects, text};
use super::wire::{Client, ConnectOptions, Table};
use super::{AdminArgs, AdminCommand};
use serde_json::{json, Value};
use std::time::Duration;

pub fn run(args: &AdminArgs) -> Result<String, String> {
    if args.ssl && args.certfile.is_none() {
        return Err("--ssl needs --certfile (the certificate(s) to trust, PEM)".into());
    }
    let opts = ConnectOptions {
        host: args.host.clone(),
        username: args.username.clone(),
        password: args.password.clone(),
        tls_ca: args.certfile.clone().filter(|_| args.ssl),
        timeout: Duration::from_secs(args.timeout_secs.max(1)),
    };
    if let AdminCommand::Restore { .. } = args.command {
        // Restore writes a data directory on this machine; `main` runs it before any connect.
        return Err(
            "restore runs offline: use `ringgate restore --from DIR --data-dir NEW`".into(),
        );
    }
    let mut c = Client::connect(&opts)?;
    let out = match &args.command {
        AdminCommand::Status => status(&mut c, &args.host)?,
        AdminCommand::Tables => Output::table(c.query(
            "SELECT keyspace_name, table_name, source, provisioned_ru, current_ru, consumed_ru, \
             normalized_ru_consumption, physical_partitions, throttled_requests, would_throttle \
             FROM system_views.throughput",
        )?),
        AdminCommand::Partitions { table } => {
            let (ks, t) = split_table(table)?;
            Output::table(c.query(&format!(
                "SELECT partition_id, token_start, token_end, bytes, logical_partitions, \
                 provisioned_ru, consumed_ru, normalized_ru_consumption, throttled_requests \
                 FROM system_views.physical_partitions WHERE keyspace_name = {} AND table_name = {}",
                quote(&ks),
                quote(&t)
            ))?)
        }
        AdminCommand::Hot { table } => hot(&mut c, table)?,
        AdminCommand::Groups => Output::table(c.query(
            "SELECT name, hosts, dbname, user_name, physical_partitions, bytes \
             FROM system_views.storage_groups",
        )?),
        AdminCommand::AddGroup {
            name,
            hosts,
            dbname,
            user,
            pg_password,
        } => add_group(&mut c, name, &[hosts, dbname, user, pg_password])?,
        AdminCommand::Move {
            table,
            partition_id,
            group,
        } => move_partition(&mut c, table, *partition_id, group, opts.timeout)?,
        AdminCommand::Rebalance => {
            let (text, json) = super::moves::rebalance(&mut c, opts.timeout)?;
            Output { text, json }
        }
        AdminCommand::Compact => maintenance(&mut c, "compact", &[])?,
        AdminCommand::Flush => maintenance(&mut c, "flush", &[])?,
        AdminCommand::GarbageCollect { table } => {
            let (ks, t) = split_table(table)?;
            maintenance(
                &mut c,
                "garbage-collect",
                &[("keyspace_name", &ks), ("table_name", &t)],
            )?
        }
        AdminCommand::Backup { to } => {
            let dir = std::path::absolute(to).map_err(|e| format!("{}: {e}", to.display()))?;
            maintenance(&mut c, "backup", &[("target", &dir.display().to_string())])?
        }
        AdminCommand::Restore { .. } => unreachable!("answered before connecting"),
    };
    Ok(if args.json {
        out.json.to_string() + "\n"
    } else {
        out.text
    })
}

/// A command's answer in both forms.
struct Output {
    text: String,
    json: Value,
}

impl Output {
    fn table(t: Table) -> Output {
        Output {
            text: text(&t),
            json: objects(&t),
        }
    }
}

/// A CQL string literal.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// `keyspace.table` into its parts.
fn split_table(name: &str) -> Result<(String, String), String> {
    match name.split_once('.') {
        Some((k, t)) if !k.is_empty() && !t.is_empty() => Ok((k.into(), t.into())),
        _ => Err(format!("name the table as KEYSPACE.TABLE, got '{name}'")),
    }
}

fn status(c: &mut Client, host: &str) -> Result<Output, String> {
    let local = c.query(
        "SELECT cluster_name, data_center, rack, release_version, host_id FROM system.local",
    )?;
    let node = objects(&local)
        .get(0)
        .cloned()
        .ok_or("system.local is empty")?;
    let parts =
        c.query("SELECT bytes, logical_partitions FROM system_views.physical_partitions")?;
    let tables = c.query("SELECT table_name FROM system_views.throughput")?;
    let sum = |col: usize| -> i64 { parts.rows.iter().filter_map(|r| r[col].as_i64()).sum() };
    let json = json!({
        "address": host,
        "cluster_name": node["cluster_name"],
        "data_center": node["data_center"],
        "rack": node["rack"],
        "release_version": node["release_version"],
        "host_id": node["host_id"],
        "tables": tables.rows.len(),
        "physical_partitions": parts.rows.len(),
        "logical_partitions": sum(1),
        "bytes": sum(0),
    });
    let s = |k: &str| json[k].as_str().unwrap_or("").to_string();
    let text = format!(
        "UP {host}  cluster {}  datacenter {}  rack {}  version {}  host id {}\n\
         {} tables, {} physical partitions, {} logical partitions, {} bytes\n",
        s("cluster_name"),
        s("data_center"),
        s("rack"),
        s("release_version"),
        s("host_id"),
        json["tables"],
        json["physical_partitions"],
        json["logical_partitions"],
        json["bytes"],
    );
    Ok(Output { text, json })
}

fn hot(c: &mut Client, table: &str) -> Result<Output, String> {
    let (ks, t) = split_table(table)?;
    let filter = format!(
        "WHERE keyspace_name = {} AND table_name = {}",
        quote(&ks),
        quote(&t)
    );
    let hottest = c.query(&format!(
        "SELECT rank, partition_key, \"token\", partition_id, consumed_ru FROM system_views.hot_partitions {filter}"
    ))?;
    let largest = c.query(&format!(
        "SELECT rank, partition_key, \"token\", partition_id, bytes FROM system_views.logical_partitions {filter}"
    ))?;
    Ok(Output {
        text: format!(
            "Hottest logical partitions (RU consumed recently):\n{}\nLargest logical partitions:\n{}",
            text(&hottest),
            text(&largest)
        ),
        json: json!({"hottest": objects(&hottest), "largest": objects(&largest)}),
    })
}

/// Moves one partition and waits for the outcome; a failed move is an error.
fn move_partition(
    c: &mut Client,
    table: &str,
    id: i64,
    to: &str,
    timeout: Duration,
) -> Result<Output, String> {
    let (ks, t) = split_table(table)?;
    let (parts, _) = super::moves::layout(c)?;
    let p = (parts.into_iter())
        .find(|p| p.keyspace == ks && p.table == t && p.id == id)
        .ok_or_else(|| format!("{table} has no physical partition {id}"))?;
    let (state, detail) = super::moves::move_one(c, &p, to, timeout)?;
    let json = json!({"keyspace_name": ks, "table_name": t, "partition_id": id,
        "from_group": p.group, "to_group": to, "state": state, "detail": detail});
    if state == "failed" {
        return Err(format!(
            "moving partition {id} of {table} to {to} failed: {detail}"
        ));
    }
    Ok(Output {
        text: format!(
            "partition {id} of {table}: {state} {} -> {to} ({detail})\n",
            p.group
        ),
        json,
    })
}

/// Registers a storage group: `fields` are hosts, dbname, user and password.
fn add_group(c: &mut Client, name: &str, fields: &[&String; 4]) -> Result<Output, String> {
    let cols = ["hosts", "dbname", "user_name", "password"];
    let args: Vec<(&str, &str)> = cols.into_iter().zip(fields.map(String::as_str)).collect();
    let mut out = act(c, "storage_groups", ("name", name), &args)?;
    out.text = format!("storage group {}", out.text);
    Ok(out)
}

/// Runs a maintenance command on the server and shows its result line.
fn maintenance(c: &mut Client, command: &str, args: &[(&str, &str)]) -> Result<Output, String> {
    act(c, "maintenance", ("command", command), args)
}

/// Writes the row `(key column, more columns)` to `system_views.<table>`, which acts on the
/// server, and shows its one-line answer.
fn act(
    c: &mut Client,
    table: &str,
    (key_col, key): (&str, &str),
    args: &[(&str, &str)],
) -> Result<Output, String> {
    let cols: Vec<&str> = std::iter::once(key_col)
        .chain(args.iter().map(|a| a.0))
        .collect();
    let vals: Vec<String> = std::iter::once(key)
        .chain(args.iter().map(|a| a.1))
        .map(quote)
        .collect();
    let t = c.query(&format!(
        "INSERT INTO system_views.{table} ({}) VALUES ({})",
        cols.join(", "),
        vals.join(", ")
    ))?;
    let result = objects(&t)
        .get(0)
        .and_then(|r| r.get("result").cloned())
        .unwrap_or(Value::Null);
    Ok(Output {
        text: format!("{key}: {}\n", result.as_str().unwrap_or("done")),
        json: json!({key_col: key, "result": result}),
    })
}
