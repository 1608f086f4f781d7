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

/// Names of keyspaces that users cannot create, alter or drop.
fn check_not_system(schema: &Schema, ks: &str) -> Result<(), SchemaError> {
    match schema.keyspace(ks) {
        Some(k) if k.system => Err(SchemaError::Invalid(format!(
            "{ks} keyspace is not user-modifiable"
        ))),
        _ => Ok(()),
    }
}

fn check_name(kind: &str, name: &str) -> Result<(), SchemaError> {
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

fn literal_text(l: &Literal) -> String {
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

fn prop_map(name: &str, v: &PropertyValue) -> Result<BTreeMap<String, String>, SchemaError> {
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

fn prop_string(name: &str, v: &PropertyValue) -> Result<String, SchemaError> {
    match v {
        PropertyValue::Constant(l) => Ok(literal_text(l)),
        PropertyValue::Map(_) => Err(SchemaError::Syntax(format!(
            "Invalid value for property '{name}'. It should be a string"
        ))),
    }
}

/// A property parsed as `T`; `kind` names what it should be in the error ("an integer").
fn prop_parsed<T: std::str::FromStr>(
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

fn prop_int(name: &str, v: &PropertyValue) -> Result<i64, SchemaError> {
    prop_parsed(name, v, "an integer")
}

fn prop_f64(name: &str, v: &PropertyValue) -> Result<f64, SchemaError> {
    prop_parsed(name, v, "a number")
}

fn prop_bool(name: &str, v: &PropertyValue) -> Result<bool, SchemaError> {
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
const MANUAL_RU: (i64, i64, i64) = (400, 1_000_000, 100);
/// Autoscale maximum: 1,000 to 1,000,000 RU/s in steps of 1,000.
const AUTOSCALE_RU: (i64, i64, i64) = (1_000, 1_000_000, 1_000);

/// Validates a throughput option with Azure Cosmos DB's rules and wording. Cosmos DB answers an
/// invalid offer with "The offer should have valid throughput values between <min> and <max>
/// inclusive in increments of <step>. Requested throughput <n> is more than possible maximum
/// throughput <max>." (seen in a Microsoft Q&A thread on autoscale limits,
/// answers/questions/5878117; manual minimum 400 in steps of 100, autoscale minimum 1,000 in
/// steps of 1,000 per the Cosmos DB autoscale FAQ and the Cassandra autoscale ARM template).
fn throughput(name: &str, v: &PropertyValue) -> Result<i64, SchemaError> {
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
fn set_throughput(
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
fn check_one_throughput(props: &Properties) -> Result<(), SchemaError> {
    let has = |k: &str| props.values.iter().any(|(n, _)| n == k);
    if has("cosmosdb_provisioned_throughput") && has("cosmosdb_autoscale_max_throughput") {
        return Err(invalid(
            "Specify either cosmosdb_provisioned_throughput (manual) or cosmosdb_autoscale_max_throughput (autoscale), not both",
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------- keyspaces

const SIMPLE: &str = "org.apache.cassandra.locator.SimpleStrategy";
const NTS: &str = "org.apache.cassandra.locator.NetworkTopologyStrategy";

/// The replication options of CREATE/ALTER KEYSPACE `keyspace`, validated as Cassandra 5.0 does
/// for a cluster whose only data centre is `data_center`.
fn replication_from(
    props: &Properties,
    existing: Option<&BTreeMap<String, String>>,
    keyspace: &str,
    data_center: &str,
) -> Result<BTreeMap<String, String>, SchemaError> {
    let Some((_, v)) = props.values.iter().find(|(k, _)| k == "replication") else {
        return match existing {
            Some(r) => Ok(r.clone()),
            None => Err(config("Missing mandatory option 'replication'")),
        };
    };
    let mut map = prop_map("replication", v)?;
    let class = map
        .remove("class")
        .ok_or_else(|| config("Missing replication strategy class"))?;
    let class =
        match class.as_str() {
            "SimpleStrategy" | SIMPLE => SIMPLE,
            "NetworkTopologyStrategy" | NTS => NTS,
            "LocalStrategy" | "org.apache.cassandra.locator.LocalStrategy" => return Err(config(
                "Unable to use given strategy class: LocalStrategy is reserved for internal use.",
            )),
            other => {
                return Err(config(format!(
                    "Unable to find replication strategy class '{other}'"
                )))
            }
        };
    let check_rf = |key: &str, v: &str| -> Result<(), SchemaError> {
        let rf = v.split('/').next().unwrap_or(v);
        match rf.trim().parse::<i64>() {
            Ok(n) if n >= 0 => Ok(()),
            _ => Err(config(format!(
                "Replication factor must be non-negative integer; found {v} for '{key}'"
            ))),
        }
    };
    if class == SIMPLE {
        let rf = map.get("replication_factor").ok_or_else(|| {
            config("SimpleStrategy requires a replication_factor strategy option.")
        })?;
        check_rf("replication_factor", rf)?;
        if let Some(k) = map.keys().find(|k| *k != "replication_factor") {
            return Err(config(format!(
                "Unrecognized strategy option {{{k}}} passed to SimpleStrategy for keyspace {keyspace}"
            )));
        }
    } else {
        if map.is_empty() {
            return Err(config(
                "Configuration for at least one datacenter must be present",
            ));
        }
        // Only the cluster's data centres (and replication_factor, for all of them) are options.
        if let Some(k) = map
            .keys()
            .find(|k| *k != "replication_factor" && *k != data_center)
        {
            return Err(config(format!(
                "Unrecognized strategy option {{{k}}} passed to NetworkTopologyStrategy for keyspace {keyspace}"
            )));
        }
        for (k, v) in &map {
            check_rf(k, v)?;
        }
    }
    map.insert("class".into(), class.into());
    Ok(map)
}

pub fn create_keyspace(
    schema: &mut Schema,
    name: &str,
    if_not_exists: bool,
    props: &Properties,
    data_center: &str,
) -> Result<Option<SchemaChange>, SchemaError> {
    check_name("Keyspace", name)?;
    if schema.keyspaces.contains_key(name) {
        if if_not_exists {
            return Ok(None);
        }
        return Err(SchemaError::AlreadyExists {
            message: format!("Cannot add existing keyspace \"{name}\""),
            keyspace: name.into(),
            table: String::new(),
        });
    }
    let mut ks = KeyspaceDef {
        name: name.into(),
        replication: replication_from(props, None, name, data_center)?,
        durable_writes: true,
        cosmosdb_provisioned_throughput: None,
        cosmosdb_autoscale_max_throughput: None,
        tables: BTreeMap::new(),
        types: BTreeMap::new(),
        system: false,
        is_virtual: false,
    };
    apply_keyspace_props(&mut ks, props)?;
    schema.keyspaces.insert(name.into(), Arc::new(ks));
    Ok(Some(SchemaChange {
        change: ChangeKind::Created,
        target: ChangeTarget::Keyspace(name.into()),
    }))
}

fn apply_keyspace_props(ks: &mut KeyspaceDef, props: &Properties) -> Result<(), SchemaError> {
    check_one_throughput(props)?;
    for (k, v) in &props.values {
        match k.as_str() {
            "replication" => {}
            "durable_writes" => ks.durable_writes = prop_bool(k, v)?,
            "cosmosdb_provisioned_throughput" | "cosmosdb_autoscale_max_throughput" => {
                set_throughput(
                    k,
                    v,
                    &mut ks.cosmosdb_provisioned_throughput,
                    &mut ks.cosmosdb_autoscale_max_throughput,
                )?
            }
            other => return Err(SchemaError::Syntax(format!("Unknown property '{other}'"))),
        }
    }
    Ok(())
}

pub fn alter_keyspace(
    schema: &mut Schema,
    name: &str,
    if_exists: bool,
    props: &Properties,
    data_center: &str,
) -> Result<Option<SchemaChange>, SchemaError> {
    check_not_system(schema, name)?;
    let Some(existing) = schema.keyspaces.get(name) else {
        if if_exists {
            return Ok(None);
        }
        return Err(invalid(format!("Keyspace '{name}' does not exist")));
    };
    let mut ks = (**existing).clone();
    ks.replication = replication_from(props, Some(&existing.replication), name, data_center)?;
    apply_keyspace_props(&mut ks, props)?;
    schema.keyspaces.insert(name.into(), Arc::new(ks));
    Ok(Some(SchemaChange {
        change: ChangeKind::Updated,
        target: ChangeTarget::Keyspace(name.into()),
    }))
}

/// A dropped keyspace: the change and its tables (whose data must be removed).
pub type DroppedKeyspace = (SchemaChange, Vec<Arc<TableDef>>);

/// Drops a keyspace; returns the change and the dropped tables (their data must be removed).
pub fn drop_keyspace(
    schema: &mut Schema,
    name: &str,
    if_exists: bool,
) -> Result<Option<DroppedKeyspace>, SchemaError> {
    check_not_system(schema, name)?;
    let Some(ks) = schema.keyspaces.remove(name) else {
        if if_exists {
            return Ok(None);
        }
        return Err(invalid(format!(
            "Cannot drop non existing keyspace '{name}'."
        )));
    };
    Ok(Some((
        SchemaChange {
            change: ChangeKind::Dropped,
            target: ChangeTarget::Keyspace(name.into()),
        },
        ks.tables.values().cloned().collect(),
    )))
}

// ---------------------------------------------------------------- types

/// Resolves a written type against the keyspace's user types.
pub fn resolve_type(
    schema: &Schema,
    keyspace: &str,
    ty: &TypeExpr,
) -> Result<CqlType, SchemaError> {
    Ok(match ty {
        TypeExpr::Native(n) => CqlType::native_from_name(n)
            .ok_or_else(|| invalid(format!("Unknown type {keyspace}.{n}")))?,
        TypeExpr::List(t) => CqlType::List(Box::new(resolve_type(schema, keyspace, t)?)),
        TypeExpr::Set(t) => CqlType::Set(Box::new(resolve_type(schema, keyspace, t)?)),
        TypeExpr::Map(k, v) => CqlType::Map(
            Box::new(resolve_type(schema, keyspace, k)?),
            Box::new(resolve_type(schema, keyspace, v)?),
        ),
        TypeExpr::Tuple(items) => CqlType::Tuple(
            items
                .iter()
                .map(|t| resolve_type(schema, keyspace, t).map(freeze_nested))
                .collect::<Result<_, _>>()?,
        ),
        TypeExpr::Frozen(t) => match freeze_nested(resolve_type(schema, keyspace, t)?) {
            // frozen<udt> and frozen<frozen<x>> are frozen once
            f @ CqlType::Frozen(_) => f,
            other => CqlType::Frozen(Box::new(other)),
        },
        TypeExpr::Vector(t, n) => {
            if *n == 0 {
                return Err(invalid(
                    "vectors may only have positive dimensions; given 0",
                ));
            }
            CqlType::Vector(Box::new(resolve_type(schema, keyspace, t)?), *n)
        }
        TypeExpr::Udt(q) => {
            let ks_name = q.keyspace.as_deref().unwrap_or(keyspace);
            if ks_name != keyspace {
                return Err(invalid(format!(
                    "Statement on keyspace {keyspace} cannot refer to a user type in keyspace {ks_name}; user types can only be used in the keyspace they are defined in"
                )));
            }
            let udt = schema
                .keyspace(ks_name)
                .and_then(|k| k.types.get(&q.name))
                .ok_or_else(|| invalid(format!("Unknown type {ks_name}.{}", q.name)))?;
            CqlType::Udt(Arc::clone(udt))
        }
        TypeExpr::Custom(c) => CqlType::Custom(c.clone()),
    })
}

/// `resolve_type` for a column: refused beyond the size limits of `cql::type_size`.
fn resolve_bounded_type(
    schema: &Schema,
    keyspace: &str,
    ty: &TypeExpr,
) -> Result<CqlType, SchemaError> {
    let ty = resolve_type(schema, keyspace, ty)?;
    check_type_size(&ty)?;
    Ok(ty)
}

fn check_type_size(ty: &CqlType) -> Result<(), SchemaError> {
    crate::cql::type_size::check(ty).map_err(invalid)
}

/// Every type and column of `ks` within the size limits (after a change to a type they use).
fn check_keyspace_type_sizes(ks: &KeyspaceDef) -> Result<(), SchemaError> {
    for u in ks.types.values() {
        check_type_size(&CqlType::Udt(Arc::clone(u)))?;
    }
    ks.tables
        .values()
        .flat_map(|t| t.columns.iter())
        .try_for_each(|c| check_type_size(&c.ty))
}

/// Inside a frozen type every nested collection or UDT is frozen too.
fn freeze_nested(ty: CqlType) -> CqlType {
    match ty {
        CqlType::List(t) => CqlType::Frozen(Box::new(CqlType::List(Box::new(freeze_nested(*t))))),
        CqlType::Set(t) => CqlType::Frozen(Box::new(CqlType::Set(Box::new(freeze_nested(*t))))),
        CqlType::Map(k, v) => CqlType::Frozen(Box::new(CqlType::Map(
            Box::new(freeze_nested(*k)),
            Box::new(freeze_nested(*v)),
        ))),
        CqlType::Udt(u) => CqlType::Frozen(Box::new(CqlType::Udt(u))),
        CqlType::Frozen(inner) => CqlType::Frozen(Box::new(match *inner {
            CqlType::List(t) => CqlType::List(Box::new(freeze_nested(*t))),
            CqlType::Set(t) => CqlType::Set(Box::new(freeze_nested(*t))),
            CqlType::Map(k, v) => {
                CqlType::Map(Box::new(freeze_nested(*k)), Box::new(freeze_nested(*v)))
            }
            other => other,
        })),
        other => other,
    }
}

pub fn create_type(
    schema: &mut Schema,
    keyspace: &str,
    name: &str,
    if_not_exists: bool,
    fields: &[(String, TypeExpr)],
) -> Result<Option<SchemaChange>, SchemaError> {
    check_not_system(schema, keyspace)?;
    let ks = schema.require_keyspace(keyspace)?.clone();
    if ks.types.contains_key(name) {
        if if_not_exists {
            return Ok(None);
        }
        return Err(invalid(format!(
            "A user type with name '{name}' already exists"
        )));
    }
    let mut resolved = Vec::with_capacity(fields.len());
    for (f, t) in fields {
        if resolved.iter().any(|(n, _): &(String, CqlType)| n == f) {
            return Err(invalid(format!("Duplicate field name {f} in type {name}")));
        }
        let ty = resolve_type(schema, keyspace, t)?;
        if ty.is_counter() {
            return Err(invalid("A user type cannot contain counters"));
        }
        resolved.push((f.clone(), freeze_nested(ty)));
    }
    let udt = Arc::new(UdtDef {
        keyspace: keyspace.into(),
        name: name.into(),
        fields: resolved,
    });
    check_type_size(&CqlType::Udt(Arc::clone(&udt)))?;
    let mut ks = (*ks).clone();
    ks.types.insert(name.into(), udt);
    schema.keyspaces.insert(keyspace.into(), Arc::new(ks));
    Ok(Some(SchemaChange {
        change: ChangeKind::Created,
        target: ChangeTarget::Type(keyspace.into(), name.into()),
    }))
}

pub fn drop_type(
    schema: &mut Schema,
    keyspace: &str,
    name: &str,
    if_exists: bool,
) -> Result<Option<SchemaChange>, SchemaError> {
    check_not_system(schema, keyspace)?;
    if if_exists && schema.keyspace(keyspace).is_none() {
        return Ok(None);
    }
    let ks = schema.require_keyspace(keyspace)?.clone();
    if !ks.types.contains_key(name) {
        if if_exists {
            return Ok(None);
        }
        return Err(invalid(format!("Type '{keyspace}.{name}' doesn't exist")));
    }
    // A type still used by another type or a table cannot go (the schema could not be read back).
    let types: Vec<&str> = ks
        .types
        .values()
        .filter(|u| u.name != name && u.fields.iter().any(|(_, t)| references_type(t, name)))
        .map(|u| u.name.as_str())
        .collect();
    if !types.is_empty() {
        return Err(invalid(format!(
            "Cannot drop user type '{keyspace}.{name}' as it is still used by user types {}",
            types.join(", ")
        )));
    }
    let tables: Vec<&str> = ks
        .tables
        .values()
        .filter(|t| t.columns.iter().any(|c| references_type(&c.ty, name)))
        .map(|t| t.name.as_str())
        .collect();
    if !tables.is_empty() {
        return Err(invalid(format!(
            "Cannot drop user type '{keyspace}.{name}' as it is still used by tables {}",
            tables.join(", ")
        )));
    }
    let mut ks = (*ks).clone();
    ks.types.remove(name);
    schema.keyspaces.insert(keyspace.into(), Arc::new(ks));
    Ok(Some(SchemaChange {
        change: ChangeKind::Dropped,
        target: ChangeTarget::Type(keyspace.into(), name.into()),
    }))
}

/// `ALTER TYPE ks.t ADD f type` / `RENAME a TO b AND ...`. Every other type and every table
/// column of the keyspace that uses the type (directly or nested) is re-resolved to the new
/// definition.
pub fn alter_type(
    schema: &mut Schema,
    keyspace: &str,
    name: &str,
    if_exists: bool,
    action: &ast::AlterTypeAction,
    if_field_not_exists: bool,
    if_field_exists: bool,
) -> Result<Option<SchemaChange>, SchemaError> {
    check_not_system(schema, keyspace)?;
    let Some(old) = schema
        .keyspace(keyspace)
        .and_then(|k| k.types.get(name))
        .cloned()
    else {
        if if_exists {
            return Ok(None);
        }
        return Err(invalid(format!("Type {keyspace}.{name} doesn't exist")));
    };
    let cql_name = format!(
        "{}.{}",
        crate::cql::types::quote_ident(keyspace),
        crate::cql::types::quote_ident(name)
    );
    let mut fields = old.fields.clone();
    match action {
        ast::AlterTypeAction::AlterField(..) => {
            return Err(invalid("Altering field types is no longer supported"))
        }
        ast::AlterTypeAction::Add(f, texpr) => {
            if fields.iter().any(|(n, _)| n == f) {
                if if_field_not_exists {
                    return Ok(None);
                }
                return Err(invalid(format!(
                    "Cannot add field {f} to type {cql_name}: a field with name {f} already exists"
                )));
            }
            let ty = resolve_type(schema, keyspace, texpr)?;
            if references_type(&ty, name) {
                return Err(invalid(format!(
                    "Cannot add new field {f} of type {} to user type {cql_name} as it would create a circular reference",
                    ty
                )));
            }
            if ty.is_counter() {
                return Err(invalid("A user type cannot contain counters"));
            }
            let ks = schema.require_keyspace(keyspace)?;
            let in_pk: Vec<String> = ks
                .tables
                .values()
                .filter(|t| t.pk_columns().any(|c| references_type(&c.ty, name)))
                .map(|t| format!("{keyspace}.{}", t.name))
                .collect();
            if !in_pk.is_empty() {
                return Err(invalid(format!(
                    "Cannot add new field {f} of type {} to user type {cql_name} as the type is being used in partition key by the following tables: {}",
                    ty,
                    in_pk.join(", ")
                )));
            }
            fields.push((f.clone(), freeze_nested(ty)));
        }
        ast::AlterTypeAction::Rename(renames) => {
            let mut names: Vec<String> = fields.iter().map(|(n, _)| n.clone()).collect();
            for (from, to) in renames {
                match old.fields.iter().position(|(n, _)| n == from) {
                    Some(i) => names[i] = to.clone(),
                    None if if_field_exists => {}
                    None => {
                        return Err(invalid(format!(
                            "Unkown field {from} in user type {cql_name}"
                        )))
                    }
                }
            }
            for n in &names {
                if names.iter().filter(|x| *x == n).count() > 1 {
                    return Err(invalid(format!(
                        "Duplicate field name {n} in type {cql_name}"
                    )));
                }
            }
            for (f, n) in fields.iter_mut().zip(names) {
                f.0 = n;
            }
        }
    }
    let new = Arc::new(UdtDef {
        keyspace: keyspace.into(),
        name: name.into(),
        fields,
    });
    let mut ks = (*schema.require_keyspace(keyspace)?.clone()).clone();
    ks.types.insert(name.into(), new);
    // Types that use the altered one, transitively: at most one pass per type.
    for _ in 0..ks.types.len() {
        let mut changed = false;
        let snapshot = ks.types.clone();
        for u in ks.types.values_mut() {
            let fields: Vec<(String, CqlType)> = u
                .fields
                .iter()
                .map(|(n, t)| (n.clone(), rebind_udts(t, &snapshot)))
                .collect();
            if fields != u.fields {
                *u = Arc::new(UdtDef {
                    keyspace: u.keyspace.clone(),
                    name: u.name.clone(),
                    fields,
                });
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    for t in ks.tables.values_mut() {
        if t.columns.iter().any(|c| uses_any(&c.ty)) {
            let mut nt = (**t).clone();
            for c in &mut nt.columns {
                c.ty = rebind_udts(&c.ty, &ks.types);
            }
            *t = Arc::new(nt);
        }
    }
    check_keyspace_type_sizes(&ks)?;
    schema.keyspaces.insert(keyspace.into(), Arc::new(ks));
    Ok(Some(SchemaChange {
        change: ChangeKind::Updated,
        target: ChangeTarget::Type(keyspace.into(), name.into()),
    }))
}

/// Whether `ty` is or contains the user type `name`.
fn references_type(ty: &CqlType, name: &str) -> bool {
    match ty {
        CqlType::Udt(u) => u.name == name || u.fields.iter().any(|(_, t)| references_type(t, name)),
        CqlType::List(t) | CqlType::Set(t) | CqlType::Frozen(t) | CqlType::Vector(t, _) => {
            references_type(t, name)
        }
        CqlType::Map(k, v) => references_type(k, name) || references_type(v, name),
        CqlType::Tuple(items) => items.iter().any(|t| references_type(t, name)),
        _ => false,
    }
}

/// Whether `ty` contains any user type.
fn uses_any(ty: &CqlType) -> bool {
    match ty {
        CqlType::Udt(_) => true,
        CqlType::List(t) | CqlType::Set(t) | CqlType::Frozen(t) | CqlType::Vector(t, _) => {
            uses_any(t)
        }
        CqlType::Map(k, v) => uses_any(k) || uses_any(v),
        CqlType::Tuple(items) => items.iter().any(uses_any),
        _ => false,
    }
}

/// `ty` with every user type replaced by the keyspace's current definition of that name.
fn rebind_udts(ty: &CqlType, types: &BTreeMap<String, Arc<UdtDef>>) -> CqlType {
    let b = |t: &CqlType| Box::new(rebind_udts(t, types));
    match ty {
        CqlType::Udt(u) => CqlType::Udt(types.get(&u.name).cloned().unwrap_or_else(|| u.clone())),
        CqlType::List(t) => CqlType::List(b(t)),
        CqlType::Set(t) => CqlType::Set(b(t)),
        CqlType::Frozen(t) => CqlType::Frozen(b(t)),
        CqlType::Vector(t, n) => CqlType::Vector(b(t), *n),
        CqlType::Map(k, v) => CqlType::Map(b(k), b(v)),
        CqlType::Tuple(items) => {
            CqlType::Tuple(items.iter().map(|t| rebind_udts(t, types)).collect())
        }
        other => other.clone(),
    }
}

// ---------------------------------------------------------------- tables

/// Builds a table definition from its columns: orders them as Cassandra does (partition key,
/// clustering, then static and regular columns by name) and indexes the key columns.
#[allow(clippy::too_many_arguments)]
pub fn assemble_table(
    keyspace: String,
    name: String,
    id: Uuid,
    storage_id: u64,
    mut columns: Vec<ColumnDef>,
    options: TableOptions,
    next_column_id: u32,
    dropped: Vec<(String, String, i64)>,
) -> TableDef {
    let rank = |c: &ColumnDef| match c.kind {
        ColumnKind::PartitionKey => 0,
        ColumnKind::Clustering => 1,
        ColumnKind::Static => 2,
        ColumnKind::Regular => 3,
    };
    columns.sort_by(|a, b| {
        rank(a)
            .cmp(&rank(b))
            .then(a.position.cmp(&b.position))
            .then(a.name.as_bytes().cmp(b.name.as_bytes()))
    });
    let partition_key = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.kind == ColumnKind::PartitionKey)
        .map(|(i, _)| i)
        .collect();
    let clustering = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.kind == ColumnKind::Clustering)
        .map(|(i, _)| i)
        .collect();
    TableDef {
        keyspace,
        name,
        id,
        storage_id,
        columns,
        partition_key,
        clustering,
        options,
        next_column_id,
        virtual_table: false,
        dropped,
        indexes: Vec::new(),
    }
}

fn apply_table_props(
    opts: &mut TableOptions,
    props: &Properties,
    creating: bool,
) -> Result<(), SchemaError> {
    check_one_throughput(props)?;
    for (k, v) in &props.values {
        match k.as_str() {
            "comment" => opts.comment = prop_string(k, v)?,
            "default_time_to_live" => {
                let n = prop_int(k, v)?;
                if !(0..=630_720_000).contains(&n) {
                    return Err(config(format!(
                        "default_time_to_live must be greater than or equal to 0 and less than or equal to 630720000 (got {n})"
                    )));
                }
                opts.default_time_to_live = n as i32;
            }
            "gc_grace_seconds" => {
                let n = prop_int(k, v)?;
                if !(0..=i32::MAX as i64).contains(&n) {
                    return Err(config(format!(
                        "gc_grace_seconds must be greater than or equal to 0 (got {n})"
                    )));
                }
                opts.gc_grace_seconds = n as i32;
            }
            "bloom_filter_fp_chance" => opts.bloom_filter_fp_chance = prop_f64(k, v)?,
            "crc_check_chance" => opts.crc_check_chance = prop_f64(k, v)?,
            "caching" => opts.caching = prop_map(k, v)?,
            "compaction" => {
                let mut m = prop_map(k, v)?;
                if let Some(c) = m.get("class").cloned() {
                    if !c.contains('.') {
                        m.insert(
                            "class".into(),
                            format!("org.apache.cassandra.db.compaction.{c}"),
                        );
                    }
                }
                opts.compaction = m;
            }
            "compression" => opts.compression = prop_map(k, v)?,
            "extensions" => opts.extensions = prop_map(k, v)?,
            "memtable" => opts.memtable = prop_string(k, v)?,
            "memtable_flush_period_in_ms" => {
                opts.memtable_flush_period_in_ms = prop_int(k, v)? as i32
            }
            "min_index_interval" => opts.min_index_interval = prop_int(k, v)? as i32,
            "max_index_interval" => opts.max_index_interval = prop_int(k, v)? as i32,
            "read_repair" => opts.read_repair = prop_string(k, v)?,
            "speculative_retry" => opts.speculative_retry = prop_string(k, v)?,
            "additional_write_policy" => opts.additional_write_policy = prop_string(k, v)?,
            "cdc" => opts.cdc = prop_bool(k, v)?,
            "cosmosdb_provisioned_throughput" | "cosmosdb_autoscale_max_throughput" => {
                set_throughput(
                    k,
                    v,
                    &mut opts.cosmosdb_provisioned_throughput,
                    &mut opts.cosmosdb_autoscale_max_throughput,
                )?
            }
            "cosmosdb_cell_level_timestamp" => {
                opts.cosmosdb_cell_level_timestamp = Some(prop_bool(k, v)?)
            }
            "cosmosdb_cell_level_timestamp_tombstones" => {
                opts.cosmosdb_cell_level_timestamp_tombstones = Some(prop_bool(k, v)?)
            }
            "cosmosdb_cell_level_timetolive" => {
                opts.cosmosdb_cell_level_timetolive = Some(prop_bool(k, v)?)
            }
            "partition_key_kind" => {
                let kind = match prop_string(k, v)?.to_ascii_lowercase().as_str() {
                    "hash" => PartitionKeyKind::Hash,
                    "multihash" => PartitionKeyKind::MultiHash,
                    other => {
                        return Err(invalid(format!(
                            "Unknown partition_key_kind '{other}': use 'Hash' or 'MultiHash'"
                        )))
                    }
                };
                if !creating && kind != opts.partition_key_kind {
                    return Err(invalid(
                        "partition_key_kind is fixed when a table is created and cannot be altered",
                    ));
                }
                opts.partition_key_kind = kind;
            }
            // Accepted for compatibility with Cassandra 5's DESCRIBE output; not used.
            "allow_auto_snapshot" | "incremental_backups" => {
                prop_bool(k, v)?;
            }
            "id" => {
                if !creating {
                    return Err(config("Cannot alter table id."));
                }
            }
            other => return Err(SchemaError::Syntax(format!("Unknown property '{other}'"))),
        }
    }
    Ok(())
}

fn check_key_type(col: &str, ty: &CqlType) -> Result<(), SchemaError> {
    match ty {
        CqlType::Counter => Err(invalid(format!(
            "counter type is not supported for PRIMARY KEY column '{col}'"
        ))),
        CqlType::Duration => Err(invalid(format!(
            "duration type is not supported for PRIMARY KEY column '{col}'"
        ))),
        t if t.is_multi_cell() => Err(invalid(format!(
            "Invalid non-frozen collection type {t} for PRIMARY KEY component {col}"
        ))),
        _ => Ok(()),
    }
}

/// A regular or static column as declared (its kind set later if it is part of the key).
fn value_column(c: &ast::ColumnDef, ty: CqlType, id: u32) -> ColumnDef {
    ColumnDef {
        name: c.name.clone(),
        ty,
        kind: if c.is_static {
            ColumnKind::Static
        } else {
            ColumnKind::Regular
        },
        position: 0,
        desc: false,
        id,
    }
}

/// Validates a CREATE TABLE and adds the table; returns the change and the new table.
pub fn create_table(
    schema: &mut Schema,
    keyspace: &str,
    stmt: &ast::CreateTable,
) -> Result<Option<(SchemaChange, Arc<TableDef>)>, SchemaError> {
    check_not_system(schema, keyspace)?;
    let name = stmt.name.name.as_str();
    let ks = schema.require_keyspace(keyspace)?.clone();
    check_name("Table", name)?;
    if ks.tables.contains_key(name) {
        if stmt.if_not_exists {
            return Ok(None);
        }
        return Err(SchemaError::AlreadyExists {
            message: format!(
                "Cannot add already existing table \"{name}\" to keyspace \"{keyspace}\""
            ),
            keyspace: keyspace.into(),
            table: name.into(),
        });
    }
    if stmt.properties.compact_storage {
        return Err(invalid(
            "COMPACT STORAGE tables are not supported starting with version 4.0",
        ));
    }
    if stmt.partition_key.is_empty() {
        return Err(invalid("No PRIMARY KEY specifed (exactly one required)"));
    }
    let mut columns: Vec<ColumnDef> = Vec::with_capacity(stmt.columns.len());
    for (i, c) in stmt.columns.iter().enumerate() {
        if columns.iter().any(|x| x.name == c.name) {
            return Err(invalid(format!(
                "Multiple definition of identifier {}",
                c.name
            )));
        }
        let ty = resolve_bounded_type(schema, keyspace, &c.ty)?;
        columns.push(value_column(c, ty, i as u32));
    }
    let mut seen_key: Vec<&str> = Vec::new();
    for (pos, k) in stmt.partition_key.iter().enumerate() {
        mark_key(
            &mut columns,
            k,
            ColumnKind::PartitionKey,
            pos,
            &mut seen_key,
        )?;
    }
    for (pos, k) in stmt.clustering.iter().enumerate() {
        mark_key(&mut columns, k, ColumnKind::Clustering, pos, &mut seen_key)?;
    }
    // CLUSTERING ORDER BY must list clustering columns, in their order.
    let order = &stmt.properties.clustering_order;
    for (i, (col, dir)) in order.iter().enumerate() {
        let Some(pos) = stmt.clustering.iter().position(|c| c == col) else {
            return Err(invalid(format!(
                "Only clustering key columns can be defined in CLUSTERING ORDER directive: {col} is not a clustering column"
            )));
        };
        if pos != i {
            return Err(invalid(
                "The order of columns in the CLUSTERING ORDER directive must match that of the clustering columns",
            ));
        }
        if let Some(c) = columns.iter_mut().find(|c| &c.name == col) {
            c.desc = *dir == Order::Desc;
        }
    }
    let has_counter = columns
        .iter()
        .any(|c| matches!(c.kind, ColumnKind::Regular | ColumnKind::Static) && c.ty.is_counter());
    let has_non_counter = columns
        .iter()
        .any(|c| matches!(c.kind, ColumnKind::Regular | ColumnKind::Static) && !c.ty.is_counter());
    if has_counter && has_non_counter {
        return Err(invalid(
            "Cannot mix counter and non counter columns in the same table",
        ));
    }
    if stmt.clustering.is_empty() {
        if let Some(c) = columns.iter().find(|c| c.kind == ColumnKind::Static) {
            return Err(invalid(format!(
                "Static column {} cannot be defined on a table without clustering columns (static columns are only useful (and thus allowed) if the table has at least one clustering column)",
                c.name
            )));
        }
    }
    let mut options = TableOptions::default();
    apply_table_props(&mut options, &stmt.properties, true)?;
    if has_counter && options.default_time_to_live != 0 {
        return Err(invalid(
            "Cannot set default_time_to_live on a table with counters",
        ));
    }
    if options.partition_key_kind == PartitionKeyKind::MultiHash {
        let n = stmt.partition_key.len();
        if !(2..=3).contains(&n) {
            return Err(invalid(format!(
                "partition_key_kind = 'MultiHash' needs a composite partition key of 2 or 3 levels (at most 3 levels are supported); this key has {n}"
            )));
        }
    }
    let n_cols = columns.len() as u32;
    let storage_id = schema.next_storage_id;
    schema.next_storage_id += 1;
    let table = Arc::new(assemble_table(
        keyspace.into(),
        name.into(),
        Uuid::new_v4(),
        storage_id,
        columns,
        options,
        n_cols,
        Vec::new(),
    ));
    let mut ks = (*ks).clone();
    ks.tables.insert(name.into(), Arc::clone(&table));
    schema.keyspaces.insert(keyspace.into(), Arc::new(ks));
    Ok(Some((
        SchemaChange {
            change: ChangeKind::Created,
            target: ChangeTarget::Table(keyspace.into(), name.into()),
        },
        table,
    )))
}

fn mark_key<'a>(
    columns: &mut [ColumnDef],
    name: &'a str,
    kind: ColumnKind,
    pos: usize,
    seen: &mut Vec<&'a str>,
) -> Result<(), SchemaError> {
    if seen.contains(&name) {
        return Err(invalid(format!("Multiple definition of identifier {name}")));
    }
    seen.push(name);
    let c = columns.iter_mut().find(|c| c.name == name).ok_or_else(|| {
        invalid(format!(
            "Unknown definition {name} referenced in PRIMARY KEY"
        ))
    })?;
    if c.kind == ColumnKind::Static {
        return Err(invalid(format!(
            "Static column {name} cannot be part of the PRIMARY KEY"
        )));
    }
    check_key_type(name, &c.ty)?;
    c.kind = kind;
    c.position = pos;
    Ok(())
}

/// The IF [NOT] EXISTS parts of ALTER TABLE.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlterFlags {
    pub if_exists: bool,
    /// `ADD IF NOT EXISTS`: existing columns are skipped.
    pub if_column_not_exists: bool,
    /// `DROP IF EXISTS` / `RENAME IF EXISTS`: missing columns are skipped.
    pub if_column_exists: bool,
}

pub fn alter_table(
    schema: &mut Schema,
    keyspace: &str,
    name: &QualifiedName,
    flags: AlterFlags,
    action: &AlterTableAction,
    now_micros: i64,
) -> Result<Option<(SchemaChange, Arc<TableDef>)>, SchemaError> {
    check_not_system(schema, keyspace)?;
    let ks = schema.require_keyspace(keyspace)?.clone();
    let Some(old) = ks.tables.get(&name.name) else {
        if flags.if_exists {
            return Ok(None);
        }
        return Err(invalid(format!(
            "Table '{keyspace}.{}' doesn't exist",
            name.name
        )));
    };
    let mut t = (**old).clone();
    match action {
        AlterTableAction::Add(cols) => {
            for c in cols {
                if t.column(&c.name).is_some() && flags.if_column_not_exists {
                    continue;
                }
                if t.column(&c.name).is_some() {
                    return Err(invalid(format!(
                        "Column with name '{}' already exists",
                        c.name
                    )));
                }
                let ty = resolve_bounded_type(schema, keyspace, &c.ty)?;
                if c.is_static && t.clustering.is_empty() {
                    return Err(invalid(format!(
                        "Static columns are only useful (and thus allowed) if the table has at least one clustering column (adding static column {})",
                        c.name
                    )));
                }
                if ty.is_counter() != t.is_counter_table() && t.value_columns().next().is_some() {
                    return Err(invalid(
                        "Cannot mix counter and non counter columns in the same table",
                    ));
                }
                if let Some((_, old_ty, _)) = t.dropped.iter().find(|(n, _, _)| *n == c.name) {
                    if *old_ty != ty.to_string() {
                        return Err(invalid(format!(
                            "Cannot re-add previously dropped column '{}' of type {}, incompatible with previous type {}",
                            c.name, ty, old_ty
                        )));
                    }
                }
                t.columns.push(value_column(c, ty, t.next_column_id));
                t.next_column_id += 1;
            }
        }
        AlterTableAction::Drop(cols) => {
            for c in cols {
                let Some(col) = t.column(c).cloned() else {
                    if flags.if_column_exists {
                        continue;
                    }
                    return Err(invalid(format!(
                        "Column {c} was not found in table {}",
                        t.name
                    )));
                };
                if matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
                    return Err(invalid(format!("Cannot drop PRIMARY KEY column {c}")));
                }
                let deps: Vec<&str> = t
                    .indexes
                    .iter()
                    .filter(|i| i.column == *c)
                    .map(|i| i.name.as_str())
                    .collect();
                if !deps.is_empty() {
                    return Err(invalid(format!(
                        "Cannot drop column {c} because it has dependent secondary indexes ({})",
                        deps.join(", ")
                    )));
                }
                t.columns.retain(|x| x.name != *c);
                t.dropped.retain(|(n, _, _)| n != c);
                t.dropped.push((c.clone(), col.ty.to_string(), now_micros));
            }
        }
        AlterTableAction::Rename(pairs) => {
            for (from, to) in pairs {
                let Some(idx) = t.column_index(from) else {
                    if flags.if_column_exists {
                        continue;
                    }
                    return Err(invalid(format!(
                        "Column {from} was not found in table {}",
                        t.name
                    )));
                };
                if !matches!(
                    t.columns[idx].kind,
                    ColumnKind::PartitionKey | ColumnKind::Clustering
                ) {
                    return Err(invalid(format!(
                        "Cannot rename non PRIMARY KEY column {from}"
                    )));
                }
                if t.column(to).is_some() {
                    return Err(invalid(format!(
                        "Cannot rename column {from} to {to} in table {}; another column with that name already exists",
                        t.name
                    )));
                }
                t.columns[idx].name = to.clone();
            }
        }
        AlterTableAction::AlterType(col, _) => {
            return Err(invalid(format!(
                "Altering column types is no longer supported (column {col})"
            )));
        }
        AlterTableAction::With(props) => {
            if !props.clustering_order.is_empty() {
                return Err(invalid("Cannot change CLUSTERING ORDER of a table"));
            }
            apply_table_props(&mut t.options, props, false)?;
        }
    }
    let indexes = std::mem::take(&mut t.indexes);
    let mut t = assemble_table(
        t.keyspace,
        t.name,
        t.id,
        t.storage_id,
        t.columns,
        t.options,
        t.next_column_id,
        t.dropped,
    );
    t.indexes = indexes;
    let t = Arc::new(t);
    let mut ks = (*ks).clone();
    ks.tables.insert(name.name.clone(), Arc::clone(&t));
    schema.keyspaces.insert(keyspace.into(), Arc::new(ks));
    Ok(Some((
        SchemaChange {
            change: ChangeKind::Updated,
            target: ChangeTarget::Table(keyspace.into(), name.name.clone()),
        },
        t,
    )))
}

pub fn drop_table(
    schema: &mut Schema,
    keyspace: &str,
    name: &str,
    if_exists: bool,
) -> Result<Option<(SchemaChange, Arc<TableDef>)>, SchemaError> {
    check_not_system(schema, keyspace)?;
    if if_exists && schema.keyspace(keyspace).is_none() {
        // Cassandra: IF EXISTS of something in a missing keyspace is a no-op.
        return Ok(None);
    }
    let ks = schema.require_keyspace(keyspace)?.clone();
    let Some(table) = ks.tables.get(name).cloned() else {
        if if_exists {
            return Ok(None);
        }
        return Err(invalid(format!("Table '{keyspace}.{name}' doesn't exist")));
    };
    let mut ks = (*ks).clone();
    ks.tables.remove(name);
    schema.keyspaces.insert(keyspace.into(), Arc::new(ks));
    Ok(Some((
        SchemaChange {
            change: ChangeKind::Dropped,
            target: ChangeTarget::Table(keyspace.into(), name.into()),
        },
        table,
    )))
}

// ---------------------------------------------------------------- indexes

/// Adds a secondary index; returns the change and the table with its new index.
pub fn create_index(
    schema: &mut Schema,
    keyspace: &str,
    table_name: &str,
    name: Option<&str>,
    target: &ast::IndexTarget,
    if_not_exists: bool,
    custom_class: Option<&str>,
) -> Result<Option<(SchemaChange, Arc<TableDef>, crate::schema::IndexDef)>, SchemaError> {
    use crate::schema::{IndexDef, IndexKind};
    check_not_system(schema, keyspace)?;
    if let Some(c) = custom_class {
        return Err(invalid(format!(
            "Custom index classes are not supported (got '{c}'); use CREATE INDEX without USING"
        )));
    }
    let ks = schema.require_keyspace(keyspace)?.clone();
    let table = ks
        .tables
        .get(table_name)
        .ok_or_else(|| invalid(format!("Table '{keyspace}.{table_name}' doesn't exist")))?
        .clone();
    let (column, kind) = match target {
        ast::IndexTarget::Column(c) => (c, None),
        ast::IndexTarget::Values(c) => (c, Some(IndexKind::Values)),
        ast::IndexTarget::Keys(c) => (c, Some(IndexKind::Keys)),
        ast::IndexTarget::Entries(c) => (c, Some(IndexKind::Entries)),
        ast::IndexTarget::Full(c) => (c, Some(IndexKind::Full)),
    };
    let col = table
        .column(column)
        .ok_or_else(|| invalid(format!("Column '{column}' does not exist")))?;
    if col.ty.references_duration() {
        return Err(invalid(match col.ty.unfrozen() {
            CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..) => {
                "Secondary indexes are not supported on collections containing durations"
            }
            CqlType::Tuple(_) => {
                "Secondary indexes are not supported on tuples containing durations"
            }
            CqlType::Udt(_) => "Secondary indexes are not supported on UDTs containing durations",
            _ => "Secondary indexes are not supported on duration columns",
        }));
    }
    if col.ty.is_counter() {
        return Err(invalid("Cannot create secondary index on a counter column"));
    }
    if col.kind == ColumnKind::PartitionKey && table.partition_key.len() == 1 {
        return Err(invalid(format!(
            "Cannot create secondary index on the only partition key column {column}"
        )));
    }
    let is_collection = matches!(
        col.ty.unfrozen(),
        CqlType::List(_) | CqlType::Set(_) | CqlType::Map(_, _)
    );
    let kind = match (kind, is_collection, col.ty.is_frozen()) {
        (None, true, false) => IndexKind::Values,
        (None, _, _) => IndexKind::Value,
        (Some(IndexKind::Full), true, true) => IndexKind::Full,
        (Some(IndexKind::Full), _, _) => {
            return Err(invalid(
                "full() indexes can only be created on frozen collections",
            ))
        }
        (Some(k), true, false) => {
            if matches!(k, IndexKind::Keys | IndexKind::Entries)
                && !matches!(col.ty.unfrozen(), CqlType::Map(_, _))
            {
                return Err(invalid(format!(
                    "Cannot create index on {} of column {column} with non-map type",
                    if k == IndexKind::Keys { "keys" } else { "entries" }
                )));
            }
            k
        }
        (Some(_), true, true) => {
            return Err(invalid(format!(
                "Cannot create values() index on frozen column {column}. Frozen collections only support full() indexes"
            )))
        }
        (Some(_), false, _) => {
            return Err(invalid(format!(
                "Cannot create keys(), values() or entries() index on non-collection column {column}"
            )))
        }
    };
    let name = match name {
        Some(n) => n.to_string(),
        None => {
            let mut base = format!("{table_name}_{column}_idx");
            base.retain(|c| c.is_ascii_alphanumeric() || c == '_');
            let mut n = base.clone();
            let mut i = 1;
            while ks
                .tables
                .values()
                .any(|t| t.indexes.iter().any(|x| x.name == n))
            {
                n = format!("{base}_{i}");
                i += 1;
            }
            n
        }
    };
    check_name("Index", &name)?;
    if ks
        .tables
        .values()
        .any(|t| t.indexes.iter().any(|x| x.name == name))
    {
        if if_not_exists {
            return Ok(None);
        }
        return Err(invalid(format!("Index '{name}' already exists")));
    }
    if let Some(dup) = table
        .indexes
        .iter()
        .find(|x| x.column == *column && x.kind == kind)
    {
        if if_not_exists {
            return Ok(None);
        }
        return Err(invalid(format!(
            "Index {name} is a duplicate of existing index {}",
            dup.name
        )));
    }
    let index = IndexDef {
        name,
        column: column.clone(),
        kind,
        storage_id: schema.next_storage_id,
    };
    schema.next_storage_id += 1;
    let mut t = (*table).clone();
    t.indexes.push(index.clone());
    let t = Arc::new(t);
    let mut ks = (*ks).clone();
    ks.tables.insert(table_name.to_string(), Arc::clone(&t));
    schema.keyspaces.insert(keyspace.into(), Arc::new(ks));
    Ok(Some((
        SchemaChange {
            change: ChangeKind::Updated,
            target: ChangeTarget::Table(keyspace.into(), table_name.into()),
        },
        t,
        index,
    )))
}

/// Removes a secondary index by name; returns the change and the dropped index.
pub fn drop_index(
    schema: &mut Schema,
    keyspace: &str,
    name: &str,
    if_exists: bool,
) -> Result<Option<(SchemaChange, crate::schema::IndexDef)>, SchemaError> {
    check_not_system(schema, keyspace)?;
    if if_exists && schema.keyspace(keyspace).is_none() {
        return Ok(None);
    }
    let ks = schema.require_keyspace(keyspace)?.clone();
    let Some(table) = ks
        .tables
        .values()
        .find(|t| t.indexes.iter().any(|i| i.name == name))
        .cloned()
    else {
        if if_exists {
            return Ok(None);
        }
        return Err(invalid(format!(
            "Index '{name}' could not be found in any of the tables of keyspace '{keyspace}'"
        )));
    };
    let mut t = (*table).clone();
    let pos = t
        .indexes
        .iter()
        .position(|i| i.name == name)
        .expect("found above");
    let index = t.indexes.remove(pos);
    let table_name = t.name.clone();
    let mut ks = (*ks).clone();
    ks.tables.insert(table_name.clone(), Arc::new(t));
    schema.keyspaces.insert(keyspace.into(), Arc::new(ks));
    Ok(Some((
        SchemaChange {
            change: ChangeKind::Updated,
            target: ChangeTarget::Table(keyspace.into(), table_name),
        },
        index,
    )))
}
