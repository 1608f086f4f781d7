//! Output of `ringgate admin`: aligned text tables for people, JSON for scripts.

use super::wire::Table;
use serde_json::{Map, Value};

/// The rows as JSON objects keyed by column.
pub fn objects(t: &Table) -> Value {
    let rows = t.rows.iter().map(|r| {
        let obj: Map<String, Value> = t.columns.iter().cloned().zip(r.iter().cloned()).collect();
        Value::Object(obj)
    });
    Value::Array(rows.collect())
}

fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if !n.is_i64() && !n.is_u64() => format!("{f:.3}"),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// An aligned text table with a header line; numbers right-aligned.
pub fn text(t: &Table) -> String {
    if t.rows.is_empty() {
        return "(none)\n".into();
    }
    let cells: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| r.iter().map(cell).collect())
        .collect();
    let widths: Vec<usize> = (0..t.columns.len())
        .map(|i| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .chain([t.columns[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let numeric: Vec<bool> = (0..t.columns.len())
        .map(|i| t.rows.iter().all(|r| r[i].is_number() || r[i].is_null()))
        .collect();
    let line = |vals: &[String]| {
        let parts: Vec<String> = vals
            .iter()
            .zip(&widths)
            .zip(&numeric)
            .map(|((v, w), num)| {
                if *num {
                    format!("{v:>w$}")
                } else {
                    format!("{v:<w$}")
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(&t.columns);
    for r in &cells {
        out.push_str(&line(r));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_json_keys_by_column() {
        let t = Table {
            columns: vec!["name".into(), "bytes".into()],
            rows: vec![
                vec![Value::from("a"), Value::from(12)],
                vec![Value::from("long"), Value::from(3)],
            ],
        };
        assert_eq!(text(&t), "name  bytes\na        12\nlong      3\n");
        assert_eq!(objects(&t)[1]["bytes"], Value::from(3));
    }
}
