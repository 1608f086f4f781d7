//! `token(...)` in a selection, as Cassandra 5.0 resolves it: a function of the table's
//! partition key types (TokenFct through FunctionResolver), so its arguments are any selectors
//! or terms assignable to those types (`token(k)`, `token(1)`, `token(v)` of a column of a
//! value-compatible type, `token(?)`), one per partition key column, and its value is the token of the
//! partition key those values make (null when one of them is null).
//!
//! The partition key columns themselves, in order, are read from the row's own token
//! (`Proj::Token`); anything else is computed per row from the arguments.

use super::selection::{plan_sexpr, selection_marker, SExpr};
use super::*;

/// Whether `args` are the partition key columns in order (the row's token answers them).
pub(super) fn is_row_token(t: &TableDef, args: &[SelectorExpr]) -> bool {
    args.len() == t.partition_key.len()
        && args
            .iter()
            .zip(t.pk_columns())
            .all(|(a, c)| matches!(a, SelectorExpr::Column(n) if *n == c.name))
}

/// Plans `token(args)` as a computed selector: its arity and each argument's type checked with
/// FunctionResolver.validateTypes' messages.
pub(super) fn plan_token(
    t: &TableDef,
    ctx: Option<&Ctx>,
    args: &[SelectorExpr],
) -> Result<(SExpr, String, CqlType)> {
    let pk: Vec<&crate::schema::ColumnDef> = t.pk_columns().collect();
    if args.len() != pk.len() {
        return Err(invalid(format!(
            "Invalid number of arguments in call to function system.token: {} required but {} provided",
            pk.len(),
            args.len()
        )));
    }
    let type_error = |shown: &str, i: usize, ty: &CqlType| {
        invalid(format!(
            "Type error: {shown} cannot be passed as argument {i} of function system.token of type {ty}"
        ))
    };
    let mut planned = Vec::with_capacity(args.len());
    let mut names = Vec::with_capacity(args.len());
    for (i, (a, key)) in args.iter().zip(&pk).enumerate() {
        let (x, n) = match a {
            SelectorExpr::Term(term @ Term::Literal(l)) => {
                let shown = crate::query::eval::term_text(term);
                let v = match l {
                    crate::cql::ast::Literal::Null => None,
                    l => Some(Bytes::from(
                        value::literal_to_bytes(&key.ty, l)
                            .map_err(|_| type_error(&shown, i, &key.ty))?,
                    )),
                };
                (SExpr::Const(v), shown)
            }
            SelectorExpr::Term(term) => {
                let (x, n, _) = selection_marker(term, key.ty.clone(), &key.name, ctx)?;
                (x, n)
            }
            other => {
                let (x, n, ty) = plan_sexpr(t, ctx, other)?;
                // ColumnMetadata / FunctionCall.testAssignment: the bytes are valid as they are
                if !crate::query::functions::value_compatible(&key.ty, &ty) {
                    return Err(type_error(&n, i, &key.ty));
                }
                (x, n)
            }
        };
        planned.push(x);
        names.push(n);
    }
    let types = pk.iter().map(|c| c.ty.clone()).collect();
    Ok((
        SExpr::Call("token".into(), planned, types),
        format!("system.token({})", names.join(", ")),
        CqlType::Bigint,
    ))
}

/// The token of the partition key made of `parts` (None: a part is null).
pub(super) fn token_value(t: &TableDef, parts: &[Option<Vec<u8>>]) -> Option<Vec<u8>> {
    let parts: Vec<&[u8]> = parts.iter().map(|p| p.as_deref()).collect::<Option<_>>()?;
    let key = partition_key_bytes(&parts);
    Some(table_token(t, &key).to_be_bytes().to_vec())
}
