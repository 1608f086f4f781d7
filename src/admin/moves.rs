//! `ringgate admin move` and `ringgate admin rebalance` (cluster mode): partition moves
//! between storage groups through `system_views.partition_moves` (`query/partition_moves.rs`),
//! one at a time, each waited for until its owner reports how it ended.
//!
//! Rebalancing plans from `system_views.physical_partitions` (every owner's exact bytes, with
//! the partition's group) and the registered groups ([`plan`]): while the group with the most
//! data and the one with the least differ, it moves the partition of the fullest group whose
//! size is closest to half the difference (a move of less than the difference narrows it),
//! each partition at most once.

use super::render::text;
use super::wire::{Client, Table};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// One partition as the planner sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub keyspace: String,
    pub table: String,
    pub id: i64,
    pub group: String,
    pub bytes: i64,
}

/// Planned moves: each partition and the group it goes to.
pub fn plan(parts: &[Part], groups: &[String]) -> Vec<(Part, String)> {
    let mut load: BTreeMap<&str, i64> = groups.iter().map(|g| (g.as_str(), 0)).collect();
    for p in parts {
        *load.entry(p.group.as_str()).or_insert(0) += p.bytes.max(0);
    }
    let mut placed: Vec<(usize, &str)> = (0..parts.len())
        .map(|i| (i, parts[i].group.as_str()))
        .collect();
    let mut moved = vec![false; parts.len()];
    let mut out = Vec::new();
    // Each partition moves at most once, so this ends.
    for _ in 0..parts.len() {
        let full = load
            .iter()
            .max_by_key(|(g, b)| (**b, std::cmp::Reverse(**g)));
        let empty = load.iter().min_by_key(|(g, b)| (**b, **g));
        let (Some((&from, &hi)), Some((&to, &lo))) = (full, empty) else {
            break;
        };
        let gap = hi - lo;
        let best = (placed.iter())
            .filter(|(i, g)| *g == from && !moved[*i] && parts[*i].bytes > 0)
            .filter(|(i, _)| parts[*i].bytes < gap)
            .min_by_key(|(i, _)| ((parts[*i].bytes * 2 - gap).abs(), parts[*i].id));
        let Some(&(i, _)) = best else { break };
        let b = parts[i].bytes;
        *load.get_mut(from).expect("listed") -= b;
        *load.get_mut(to).expect("listed") += b;
        moved[i] = true;
        placed[i].1 = to;
        out.push((parts[i].clone(), to.to_string()));
    }
    out
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn rows(t: &Table) -> Vec<BTreeMap<String, Value>> {
    (t.rows.iter())
        .map(|r| t.columns.iter().cloned().zip(r.iter().cloned()).collect())
        .collect()
}

/// Requests one move and waits for its outcome (at most `timeout`): (state, detail).
pub fn move_one(
    c: &mut Client,
    p: &Part,
    to: &str,
    timeout: Duration,
) -> Result<(String, String), String> {
    c.query(&format!(
        "INSERT INTO system_views.partition_moves (keyspace_name, table_name, partition_id, \
         to_group) VALUES ({}, {}, {}, {})",
        quote(&p.keyspace),
        quote(&p.table),
        p.id,
        quote(to)
    ))?;
    let started = Instant::now();
    loop {
        let t = c.query(&format!(
            "SELECT state, detail FROM system_views.partition_moves WHERE keyspace_name = {} \
             AND table_name = {} AND partition_id = {}",
            quote(&p.keyspace),
            quote(&p.table),
            p.id
        ))?;
        let states = rows(&t);
        let text = |r: &BTreeMap<String, Value>, k: &str| {
            r.get(k).and_then(Value::as_str).unwrap_or("").to_string()
        };
        let pending = states.iter().any(|r| text(r, "state") == "requested");
        if let (false, Some(r)) = (pending, states.first()) {
            return Ok((text(r, "state"), text(r, "detail")));
        }
        if started.elapsed() > timeout {
            return Err(format!(
                "partition {} of {}.{} was not moved within {} s (still requested; its owner \
                 runs it when it can)",
                p.id,
                p.keyspace,
                p.table,
                timeout.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every user table's partitions with their groups and bytes, and the registered groups.
pub fn layout(c: &mut Client) -> Result<(Vec<Part>, Vec<String>), String> {
    let t = c.query(
        "SELECT keyspace_name, table_name, partition_id, storage_group, bytes \
         FROM system_views.physical_partitions",
    )?;
    let mut parts = Vec::new();
    for r in rows(&t) {
        let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let n = |k: &str| r.get(k).and_then(Value::as_i64).unwrap_or(0);
        parts.push(Part {
            keyspace: s("keyspace_name"),
            table: s("table_name"),
            id: n("partition_id"),
            group: s("storage_group"),
            bytes: n("bytes"),
        });
    }
    let g = c.query("SELECT name FROM system_views.storage_groups")?;
    let groups = (g.rows.iter())
        .filter_map(|r| r.first().and_then(Value::as_str).map(str::to_string))
        .collect();
    Ok((parts, groups))
}

/// Runs each move of the plan, one after another; the table of what happened.
pub fn rebalance(c: &mut Client, timeout: Duration) -> Result<(String, Value), String> {
    let (parts, groups) = layout(c)?;
    let planned = plan(&parts, &groups);
    let mut done = Table {
        columns: [
            "keyspace_name",
            "table_name",
            "partition_id",
            "bytes",
            "from_group",
            "to_group",
            "state",
            "detail",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    for (p, to) in &planned {
        let (state, detail) = move_one(c, p, to, timeout)?;
        done.rows.push(vec![
            json!(p.keyspace),
            json!(p.table),
            json!(p.id),
            json!(p.bytes),
            json!(p.group),
            json!(to),
            json!(state),
            json!(detail),
        ]);
    }
    let json = super::render::objects(&done);
    Ok((
        format!("{} partition(s) moved\n{}", planned.len(), text(&done)),
        json,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(id: i64, group: &str, bytes: i64) -> Part {
        Part {
            keyspace: "ks".into(),
            table: "t".into(),
            id,
            group: group.into(),
            bytes,
        }
    }

    fn loads(parts: &[Part], moves: &[(Part, String)]) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        for p in parts {
            let g = (moves.iter().find(|(m, _)| m.id == p.id))
                .map_or(p.group.clone(), |(_, to)| to.clone());
            *out.entry(g).or_insert(0) += p.bytes;
        }
        out
    }

    #[test]
    fn a_new_empty_group_gets_half_of_equal_partitions() {
        let parts: Vec<Part> = (1..=8).map(|i| part(i, "default", 100)).collect();
        let groups = vec!["default".to_string(), "g2".to_string()];
        let moves = plan(&parts, &groups);
        assert_eq!(moves.len(), 4);
        let l = loads(&parts, &moves);
        assert_eq!((l["default"], l["g2"]), (400, 400));
    }

    #[test]
    fn uneven_partitions_end_closer_and_each_moves_once() {
        let sizes = [900, 50, 400, 300, 10, 0, 250, 120];
        let parts: Vec<Part> = (sizes.iter().enumerate())
            .map(|(i, b)| part(i as i64, if i % 3 == 0 { "a" } else { "b" }, *b))
            .collect();
        let groups = vec!["a".to_string(), "b".into(), "c".into()];
        let moves = plan(&parts, &groups);
        let mut ids: Vec<i64> = moves.iter().map(|(p, _)| p.id).collect();
        ids.dedup();
        assert_eq!(ids.len(), moves.len());
        let spread = |l: &BTreeMap<String, i64>| {
            let v: Vec<i64> = groups.iter().map(|g| *l.get(g).unwrap_or(&0)).collect();
            v.iter().max().unwrap() - v.iter().min().unwrap()
        };
        let before = loads(&parts, &[]);
        let after = loads(&parts, &moves);
        assert!(spread(&after) < spread(&before), "{before:?} -> {after:?}");
        // The largest partition alone is more than a third: the best spread keeps it alone.
        assert!(spread(&after) <= 900, "{after:?}");
        assert!(moves.iter().all(|(p, _)| p.bytes > 0));
    }

    #[test]
    fn balanced_groups_move_nothing() {
        let parts = vec![part(1, "a", 100), part(2, "b", 100)];
        assert!(plan(&parts, &["a".into(), "b".into()]).is_empty());
    }
}
