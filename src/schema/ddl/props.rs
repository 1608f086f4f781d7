//! Statement properties (WITH ...): typed values with Cassandra's errors, Cosmos DB's
//! throughput options and rules; and the checks on names and system keyspaces every DDL shares.

use super::*;

/// Names of keyspaces that users cannot create, alter or drop.
pub(super) fn check_not_system(schema: &Schema, ks: &str) -> Result<(), SchemaError> {
    match schema.keyspace(ks) {
        Some(k) if k.system => Err(SchemaError::Invalid(format!(
            "{ks} keyspace is not user-modifiable"
        ))),
        _ => Ok(()),
    }
}

pub(super) fn check_name(kind: &str, name: &str) -> Result<(), SchemaError> {
    if name.is_empty()
        || name.len() > 48
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(invalid(format!(
            "{kind} name must not be empty, more than 48 characters long, or contain non-alphanumeric-underscore characters (got \"{name}\")"
        )));
    }
    Ok(())
}

/// Longest table name (Cassandra 5.0, CASSANDRA-20389): a table's directory, its name and a
/// 33-character id suffix, fits a 255-character file name. Keyspace names keep 48.
const TABLE_NAME_CHARS: usize = 222;

/// A table name as Cassandra 5.0's `SchemaUtils.validateTableName` checks it.
pub(super) fn check_table_name(keyspace: &str, name: &str) -> Result<(), SchemaError> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(config(format!(
            "{keyspace}.{name}: Table name must not be empty or not contain non-alphanumeric-underscore characters (got \"{name}\")"
        )));
    }
    let n = name.chars().count();
    if n > TABLE_NAME_CHARS {
        return Err(config(format!(
            "{keyspace}.{name}: Table name must not be more than {TABLE_NAME_CHARS} characters long (got {n} characters for \"{name}\")"
        )));
    }
    Ok(())
}

/// The compaction strategies Cassandra 5.0 ships, by the class name it stores.
const COMPACTION_CLASSES: [&str; 4] = [
    "SizeTieredCompactionStrategy",
    "LeveledCompactionStrategy",
    "TimeWindowCompactionStrategy",
    "UnifiedCompactionStrategy",
];
const COMPACTION_PACKAGE: &str = "org.apache.cassandra.db.compaction.";

/// `compaction = {...}` as Cassandra's `CompactionParams.fromMap` reads it: a class is
/// required, a short name is one of the package's strategies, stored by its full name.
pub(super) fn compaction_params(
    mut m: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, SchemaError> {
    let Some(class) = m.get("class") else {
        return Err(config(
            "Missing sub-option 'class' for the 'compaction' option.",
        ));
    };
    let full = if class.contains('.') {
        class.clone()
    } else {
        format!("{COMPACTION_PACKAGE}{class}")
    };
    let known = full
        .strip_prefix(COMPACTION_PACKAGE)
        .is_some_and(|c| COMPACTION_CLASSES.contains(&c));
    if !known {
        return Err(config(format!(
            "Unable to find compaction strategy class '{full}'"
        )));
    }
    if let Some(short) = full.strip_prefix(COMPACTION_PACKAGE) {
        super::table_options::check_compaction_options(short, &m)?;
    }
    m.insert("class".into(), full);
    Ok(m)
}

/// A numeric table option that has a lower bound (`TableParams.validate`'s message).
pub(super) fn at_least(name: &str, n: i32, min: i32) -> Result<i32, SchemaError> {
    if n < min {
        return Err(config(format!(
            "{name} must be greater than or equal to {min} (got {n})"
        )));
    }
    Ok(n)
}

/// A double as Java's `Double.toString` prints it (`2.0`, `0.5`, `1.0E-7`, `6.71E-5`):
/// scientific notation below 10^-3 and from 10^7.
pub(super) fn java_double(x: f64) -> String {
    let a = x.abs();
    if a != 0.0 && a.is_finite() && !(1e-3..1e7).contains(&a) {
        let s = format!("{x:e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.to_string()
        } else {
            format!("{mantissa}.0")
        };
        return format!("{mantissa}E{exp}");
    }
    if x.fract() == 0.0 {
        format!("{x:.1}")
    } else {
        x.to_string()
    }
}

pub(super) fn literal_text(l: &Literal) -> String {
    match l {
        Literal::String(s) | Literal::Integer(s) | Literal::Float(s) | Literal::Uuid(s) => {
            s.clone()
        }
        Literal::Duration(s) => s.clone(),
        Literal::Boolean(b) => b.to_string(),
        Literal::Blob(b) => format!(
            "0x{}",
            b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        ),
        Literal::Null => "null".into(),
    }
}

pub(super) fn prop_map(
    name: &str,
    v: &PropertyValue,
) -> Result<BTreeMap<String, String>, SchemaError> {
    match v {
        PropertyValue::Map(pairs) => Ok(pairs
            .iter()
            .map(|(k, v)| (literal_text(k), literal_text(v)))
            .collect()),
        PropertyValue::Constant(_) => Err(SchemaError::Syntax(format!(
            "Invalid value for property '{name}'. It should be a map."
        ))),
    }
}

pub(super) fn prop_string(name: &str, v: &PropertyValue) -> Result<String, SchemaError> {
    match v {
        PropertyValue::Constant(l) => Ok(literal_text(l)),
        PropertyValue::Map(_) => Err(SchemaError::Syntax(format!(
            "Invalid value for property '{name}'. It should be a string"
        ))),
    }
}

/// A property parsed as `T`; `kind` names what it should be in the error ("an integer").
pub(super) fn prop_parsed<T: std::str::FromStr>(
    name: &str,
    v: &PropertyValue,
    kind: &str,
) -> Result<T, SchemaError> {
    let s = prop_string(name, v)?;
    s.trim().parse::<T>().map_err(|_| {
        SchemaError::Syntax(format!(
            "Invalid value for property '{name}'. It should be {kind} (got '{s}')"
        ))
    })
}

pub(super) fn prop_int(name: &str, v: &PropertyValue) -> Result<i64, SchemaError> {
    prop_parsed(name, v, "an integer")
}

/// An integer table option as Cassandra's TableAttributes reads it (`Integer.parseInt`): a
/// 32-bit integer, anything else (1.5, 2^31) refused as a syntax error with its message.
pub(super) fn table_int(name: &str, v: &PropertyValue) -> Result<i32, SchemaError> {
    let s = prop_string(name, v)?;
    s.parse::<i32>()
        .map_err(|_| SchemaError::Syntax(format!("Invalid integer value {s} for '{name}'")))
}

/// A double table option as Cassandra's TableAttributes reads it (`Double.parseDouble`).
pub(super) fn prop_f64(name: &str, v: &PropertyValue) -> Result<f64, SchemaError> {
    let s = prop_string(name, v)?;
    s.trim()
        .parse::<f64>()
        .map_err(|_| SchemaError::Syntax(format!("Invalid double value {s} for '{name}'")))
}

pub(super) fn prop_bool(name: &str, v: &PropertyValue) -> Result<bool, SchemaError> {
    let s = prop_string(name, v)?;
    match s.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(SchemaError::Syntax(format!(
            "Invalid value for property '{name}'. It should be a boolean (got '{s}')"
        ))),
    }
}

/// Manual (provisioned) throughput: 400 to 1,000,000 RU/s in steps of 100.
pub(super) const MANUAL_RU: (i64, i64, i64) = (400, 1_000_000, 100);
/// Autoscale maximum: 1,000 to 1,000,000 RU/s in steps of 1,000.
pub(super) const AUTOSCALE_RU: (i64, i64, i64) = (1_000, 1_000_000, 1_000);

/// Validates a throughput option with Azure Cosmos DB's rules and wording. Cosmos DB answers an
/// invalid offer with "The offer should have valid throughput values between <min> and <max>
/// inclusive in increments of <step>. Requested throughput <n> is more than possible maximum
/// throughput <max>." (seen in a Microsoft Q&A thread on autoscale limits,
/// answers/questions/5878117; manual minimum 400 in steps of 100, autoscale minimum 1,000 in
/// steps of 1,000 per the Cosmos DB autoscale FAQ and the Cassandra autoscale ARM template).
pub(super) fn throughput(name: &str, v: &PropertyValue) -> Result<i64, SchemaError> {
    let n = prop_int(name, v)?;
    let (min, max, step) = if name == "cosmosdb_autoscale_max_throughput" {
        AUTOSCALE_RU
    } else {
        MANUAL_RU
    };
    let detail = if n < min {
        format!("Requested throughput {n} is less than minimum possible throughput {min}.")
    } else if n > max {
        format!("Requested throughput {n} is more than possible maximum throughput {max}.")
    } else if n % step != 0 {
        format!("Requested throughput {n} is not a multiple of {step}.")
    } else {
        return Ok(n);
    };
    Err(invalid(format!(
        "The offer should have valid throughput values between {min} and {max} inclusive in increments of {step}. {detail} ({name})"
    )))
}

/// Sets throughput option `name` (manual or autoscale) of a keyspace or table; setting one
/// mode replaces the other (switching manual <-> autoscale).
pub(super) fn set_throughput(
    name: &str,
    v: &PropertyValue,
    provisioned: &mut Option<i64>,
    autoscale_max: &mut Option<i64>,
) -> Result<(), SchemaError> {
    let n = Some(throughput(name, v)?);
    if name == "cosmosdb_autoscale_max_throughput" {
        (*autoscale_max, *provisioned) = (n, None);
    } else {
        (*provisioned, *autoscale_max) = (n, None);
    }
    Ok(())
}

/// Rejects a statement that sets both throughput options.
pub(super) fn check_one_throughput(props: &Properties) -> Result<(), SchemaError> {
    let has = |k: &str| props.values.iter().any(|(n, _)| n == k);
    if has("cosmosdb_provisioned_throughput") && has("cosmosdb_autoscale_max_throughput") {
        return Err(invalid(
            "Specify either cosmosdb_provisioned_throughput (manual) or cosmosdb_autoscale_max_throughput (autoscale), not both",
        ));
    }
    Ok(())
}
