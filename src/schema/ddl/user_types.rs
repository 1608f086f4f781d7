//! Types in DDL: resolving written types against the keyspace's user types (with size limits
//! and nested freezing), and CREATE / ALTER / DROP TYPE with the re-resolution of every type
//! and column that uses a changed type.

use super::*;

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
pub(super) fn resolve_bounded_type(
    schema: &Schema,
    keyspace: &str,
    ty: &TypeExpr,
) -> Result<CqlType, SchemaError> {
    let ty = resolve_type(schema, keyspace, ty)?;
    check_type_size(&ty)?;
    Ok(ty)
}

pub(super) fn check_type_size(ty: &CqlType) -> Result<(), SchemaError> {
    crate::cql::type_size::check(ty).map_err(invalid)
}

/// Every type and column of `ks` within the size limits (after a change to a type they use).
pub(super) fn check_keyspace_type_sizes(ks: &KeyspaceDef) -> Result<(), SchemaError> {
    for u in ks.types.values() {
        check_type_size(&CqlType::Udt(Arc::clone(u)))?;
    }
    ks.tables
        .values()
        .flat_map(|t| t.columns.iter())
        .try_for_each(|c| check_type_size(&c.ty))
}

/// Inside a frozen type every nested collection or UDT is frozen too.
pub(super) fn freeze_nested(ty: CqlType) -> CqlType {
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
    let ks = target_keyspace(schema, keyspace)?.clone();
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
    // DropTypeStatement: a missing keyspace is a missing type (IF EXISTS: a no-op).
    let Some(ks) = schema
        .keyspace(keyspace)
        .filter(|ks| ks.types.contains_key(name))
        .cloned()
    else {
        if if_exists {
            return Ok(None);
        }
        return Err(invalid(format!("Type '{keyspace}.{name}' doesn't exist")));
    };
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
pub(super) fn references_type(ty: &CqlType, name: &str) -> bool {
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
pub(super) fn uses_any(ty: &CqlType) -> bool {
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
pub(super) fn rebind_udts(ty: &CqlType, types: &BTreeMap<String, Arc<UdtDef>>) -> CqlType {
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
