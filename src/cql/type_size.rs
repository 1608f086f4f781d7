//! Bounds on the size of a resolved type.
//!
//! User types nest other user types by reference, so a chain of short `CREATE TYPE`s can build
//! a type far deeper than any one statement may be (the parser's limit), and a type with two
//! fields of the previous type, 20 times over, expands to a million component types. Result
//! metadata, validation, comparison and hashing all walk the expanded type, mostly recursively,
//! so DDL refuses a type beyond these limits (`check`). The walk here is iterative and stops at
//! the limits, so it is safe and cheap on any type, even one loaded from an older schema.

use super::types::CqlType;

/// Levels of the expanded type (`frozen<>` does not count: the protocol does not show it).
pub const MAX_TYPE_DEPTH: usize = 100;
/// Component types of the expanded type, counting every use of a shared user type (`frozen<>`
/// does not count either).
pub const MAX_TYPE_COMPONENTS: usize = 10_000;

/// Why a type is refused: Cassandra-style wording for an `InvalidRequest`.
pub fn check(ty: &CqlType) -> Result<(), String> {
    let mut stack: Vec<(&CqlType, usize)> = vec![(ty, 1)];
    let mut components = 0usize;
    while let Some((t, depth)) = stack.pop() {
        if depth > MAX_TYPE_DEPTH {
            return Err(format!(
                "Type {ty} is nested too deeply: its definition is more than {MAX_TYPE_DEPTH} levels deep"
            ));
        }
        if !t.is_frozen() {
            components += 1;
        }
        if components > MAX_TYPE_COMPONENTS {
            return Err(format!(
                "Type {ty} is too large: its definition expands to more than {MAX_TYPE_COMPONENTS} component types"
            ));
        }
        push_children(t, depth, &mut stack);
    }
    Ok(())
}

/// Pushes the direct components of `t` (at `depth`) with their depth.
fn push_children<'a>(t: &'a CqlType, depth: usize, stack: &mut Vec<(&'a CqlType, usize)>) {
    match t {
        // frozen<x> is x, frozen: the same level.
        CqlType::Frozen(inner) => stack.push((inner, depth)),
        CqlType::List(e) | CqlType::Set(e) | CqlType::Vector(e, _) => stack.push((e, depth + 1)),
        CqlType::Map(k, v) => {
            stack.push((k, depth + 1));
            stack.push((v, depth + 1));
        }
        CqlType::Tuple(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
        CqlType::Udt(u) => stack.extend(u.fields.iter().map(|(_, f)| (f, depth + 1))),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cql::types::UdtDef;

    fn udt(name: &str, fields: Vec<CqlType>) -> CqlType {
        let fields = fields
            .into_iter()
            .enumerate()
            .map(|(i, t)| (format!("f{i}"), CqlType::Frozen(Box::new(t))))
            .collect();
        CqlType::Udt(Arc::new(UdtDef {
            keyspace: "ks".into(),
            name: name.into(),
            fields,
        }))
    }

    #[test]
    fn a_chain_of_user_types_is_refused_past_the_depth_limit() {
        let mut ty = CqlType::Int;
        for i in 1..MAX_TYPE_DEPTH {
            ty = udt(&format!("t{i}"), vec![ty]);
        }
        assert_eq!(check(&ty), Ok(()));
        let deeper = udt("top", vec![ty]);
        let err = check(&deeper).unwrap_err();
        assert!(err.contains("nested too deeply"), "{err}");
    }

    #[test]
    fn a_shared_type_graph_is_refused_by_its_expanded_size_without_expanding_it() {
        // 2^40 component types if expanded; the check stops at the limit.
        let mut ty = CqlType::Int;
        for i in 0..40 {
            ty = udt(&format!("t{i}"), vec![ty.clone(), ty]);
        }
        let err = check(&ty).unwrap_err();
        assert!(err.contains("more than 10000 component types"), "{err}");
    }

    #[test]
    fn a_chain_of_user_types_far_past_the_limit_drops_on_a_small_stack() {
        // As a schema written before the limit could hold; dropping it must not recurse.
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let mut ty = CqlType::Int;
                for i in 0..200_000 {
                    ty = udt(&format!("t{i}"), vec![CqlType::List(Box::new(ty))]);
                }
                assert!(check(&ty).unwrap_err().contains("nested too deeply"));
                drop(ty);
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn frozen_wrappers_do_not_count_as_levels() {
        let mut ty = CqlType::Int;
        for _ in 1..MAX_TYPE_DEPTH {
            ty = CqlType::Frozen(Box::new(CqlType::List(Box::new(ty))));
        }
        assert_eq!(check(&ty), Ok(()));
    }
}
