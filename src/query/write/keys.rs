//! Keys of a write: the `=` / `IN` values of key columns (with the IN cartesian product
//! guardrail), the serialized partition keys, and Cassandra's key checks. The storage keys
//! themselves are built by `crate::format`.

use super::*;
use smallvec::SmallVec;

/// Values of the partition key or clustering columns restricted by `=` / `IN` in a WHERE clause:
/// one list of candidate values per column (None where a column is not restricted).
pub fn key_values(
    table: &TableDef,
    rels: &[Relation],
    ctx: &Ctx,
    columns: &[usize],
) -> Result<Vec<Option<Vec<Bytes>>>> {
    let mut out: Vec<Option<Vec<Bytes>>> = vec![None; columns.len()];
    for r in rels {
        let RelationLhs::Column(name) = &r.lhs else {
            continue;
        };
        let Some(pos) = columns.iter().position(|&i| table.columns[i].name == *name) else {
            continue;
        };
        let col = &table.columns[columns[pos]];
        let vals = match r.op {
            Operator::Eq => vec![key_value(eval(&r.rhs, &col.ty, name, ctx)?, col)?],
            Operator::In => in_values(&r.rhs, &col.ty, name, ctx)?
                .into_iter()
                .map(|v| key_value(v, col))
                .collect::<Result<Vec<_>>>()?,
            _ => continue,
        };
        if out[pos].is_some() {
            return Err(invalid(format!(
                "{name} cannot be restricted by more than one relation if it includes an Equal"
            )));
        }
        out[pos] = Some(vals);
    }
    check_in_product(table, columns, &out)?;
    Ok(out)
}

/// Most keys the `=` / `IN` values of a statement's partition key (or clustering key) columns
/// may combine to: each combination is a key to read or write, and `c1 IN ? AND c2 IN ? AND
/// c3 IN ?` with 100 values each would be a million. Cassandra's
/// `in_select_cartesian_product_fail_threshold` guardrail, always on here.
pub const MAX_IN_PRODUCT: usize = 10_000;

/// Refuses key values whose running product passes `MAX_IN_PRODUCT`, with the guardrail's error.
pub(super) fn check_in_product(
    table: &TableDef,
    columns: &[usize],
    vals: &[Option<Vec<Bytes>>],
) -> Result<()> {
    let mut product = 1usize;
    for v in vals.iter().flatten() {
        product = product.saturating_mul(v.len());
        if product > MAX_IN_PRODUCT {
            let what = match columns.first().map(|&i| table.columns[i].kind) {
                Some(ColumnKind::PartitionKey) => "partition key",
                _ => "clustering key",
            };
            return Err(in_product_exceeded(what, product));
        }
    }
    Ok(())
}

/// The guardrail's error for `what` ("partition key" or "clustering key") whose `=` / `IN`
/// values combine to `product` keys.
pub(crate) fn in_product_exceeded(what: &str, product: usize) -> crate::query::QueryError {
    invalid(format!(
        "Guardrail in_select_cartesian_product violated: Aborting query because the cartesian product of the IN restrictions on {what} produces {product} values, this exceeds fail threshold of {MAX_IN_PRODUCT}."
    ))
}

/// The values of an IN restriction: a list of terms or one marker bound to a list.
pub fn in_values(rhs: &Term, ty: &CqlType, name: &str, ctx: &Ctx) -> Result<Vec<Val>> {
    match rhs {
        Term::List(items) | Term::Tuple(items) => {
            items.iter().map(|t| eval(t, ty, name, ctx)).collect()
        }
        other => {
            let list_ty = CqlType::List(Box::new(ty.clone()));
            match eval(other, &list_ty, name, ctx)? {
                Val::Value(b) => Ok(split_list(&b)
                    .ok_or_else(|| invalid(format!("Invalid list value for IN on {name}")))?
                    .into_iter()
                    .map(Val::Value)
                    .collect()),
                Val::Null => Err(invalid(format!("Invalid null value for column {name}"))),
                Val::Unset => Err(invalid(format!("Invalid unset value for column {name}"))),
            }
        }
    }
}

/// Elements of a serialized list or set.
pub fn split_list(b: &Bytes) -> Option<Vec<Bytes>> {
    if b.len() < 4 {
        return None;
    }
    let n = i32::from_be_bytes(b[0..4].try_into().ok()?);
    if n < 0 || n as usize > b.len() {
        return None;
    }
    let mut pos = 4;
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let len = i32::from_be_bytes(b.get(pos..pos + 4)?.try_into().ok()?);
        pos += 4;
        if len < 0 {
            return None;
        }
        let end = pos.checked_add(len as usize)?;
        out.push(b.slice(pos..end.min(b.len())));
        if end > b.len() {
            return None;
        }
        pos = end;
    }
    Some(out)
}

pub(crate) fn key_value(v: Val, col: &crate::schema::ColumnDef) -> Result<Bytes> {
    match v {
        Val::Value(b) => {
            // Cassandra's limit per key component (partition key and clustering values).
            if b.len() > MAX_KEY_BYTES {
                return Err(invalid(format!(
                    "Key length of {} is longer than maximum of {MAX_KEY_BYTES}",
                    b.len()
                )));
            }
            Ok(b)
        }
        Val::Null => Err(invalid(format!(
            "Invalid null value in condition for column {}",
            col.name
        ))),
        Val::Unset => Err(invalid(format!(
            "Invalid unset value for column {}",
            col.name
        ))),
    }
}

/// Cartesian product of per-column candidate values.
pub(crate) fn combinations<'a, T: Clone + 'a>(
    cols: impl IntoIterator<Item = &'a Vec<T>>,
) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = vec![Vec::new()];
    for vals in cols {
        let mut next = Vec::with_capacity(out.len() * vals.len());
        for prefix in &out {
            for v in vals {
                let mut p = prefix.clone();
                p.push(v.clone());
                next.push(p);
            }
        }
        out = next;
    }
    out
}

/// An error naming the key columns (`idx`, `what`) that have no values in `have`, if any.
pub(super) fn require_all<T>(
    table: &TableDef,
    idx: &[usize],
    have: &[Option<T>],
    what: &str,
) -> Result<()> {
    if have.iter().all(Option::is_some) {
        return Ok(());
    }
    let miss: Vec<&str> = idx
        .iter()
        .zip(have)
        .filter(|(_, h)| h.is_none())
        .map(|(&i, _)| table.columns[i].name.as_str())
        .collect();
    if miss.is_empty() {
        return Ok(());
    }
    Err(invalid(format!(
        "Some {what} are missing: {}",
        miss.join(", ")
    )))
}

/// The serialized partition keys a WHERE clause (or INSERT) names.
pub(super) fn partition_keys(
    table: &TableDef,
    pk_vals: Vec<Option<Vec<Bytes>>>,
) -> Result<Vec<Bytes>> {
    require_all(table, &table.partition_key, &pk_vals, "partition key parts")?;
    // One value per column (no IN), what a point write is: no combinations to build.
    if pk_vals
        .iter()
        .all(|v| v.as_ref().is_some_and(|v| v.len() == 1))
    {
        let parts: SmallVec<[&Bytes; 4]> = pk_vals.iter().flatten().map(|v| &v[0]).collect();
        return Ok(vec![partition_key_of(&parts)?]);
    }
    let cols: Vec<Vec<Bytes>> = pk_vals.into_iter().map(|v| v.unwrap_or_default()).collect();
    combinations(&cols)
        .into_iter()
        .map(|parts| partition_key_of(&parts))
        .collect()
}

/// The serialized partition key of its components' values (in partition key order), checked
/// (`check_partition_key`): a one-column key is its value, copied once; several are composed
/// as Cassandra's CompositeType.
pub(crate) fn partition_key_of<B: AsRef<[u8]>>(parts: &[B]) -> Result<Bytes> {
    let k = match parts {
        [one] => Bytes::copy_from_slice(one.as_ref()),
        _ => {
            let refs: SmallVec<[&[u8]; 4]> = parts.iter().map(AsRef::as_ref).collect();
            Bytes::from(partition_key_bytes(&refs))
        }
    };
    check_partition_key(&k)?;
    Ok(k)
}

/// Cassandra's rule for a serialized partition key: an empty key (a single-column key given as
/// `''` or an empty blob) is refused, by writes and reads alike.
fn check_partition_key(k: &[u8]) -> Result<()> {
    if k.is_empty() {
        return Err(invalid("Key may not be empty"));
    }
    Ok(())
}

/// Refuses mutations whose stored key would pass the store's key limit: a partition key and
/// clustering values each within Cassandra's 64 KiB can together, with the key's prefixes and
/// escaping, be longer than the store holds.
pub(super) fn check_stored_keys(muts: &[Mutation]) -> Result<()> {
    match muts.iter().find(|m| m.key.len() > STORE_MAX_KEY_BYTES) {
        Some(m) => Err(invalid(format!(
            "The primary key is too long: stored with its prefixes it takes {} bytes, more than the maximum of {STORE_MAX_KEY_BYTES} (partition key and clustering values together)",
            m.key.len()
        ))),
        None => Ok(()),
    }
}
