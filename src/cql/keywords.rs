//! CQL reserved keywords: these cannot be used as unquoted identifiers.

/// Cassandra's reserved keywords (lower case), from the CQL reference.
const RESERVED: &[&str] = &[
    "add",
    "aggregate",
    "all",
    "allow",
    "alter",
    "and",
    "any",
    "apply",
    "asc",
    "authorize",
    "batch",
    "begin",
    "by",
    "columnfamily",
    "create",
    "default",
    "delete",
    "desc",
    "describe",
    "drop",
    "each_quorum",
    "entries",
    "execute",
    "from",
    "full",
    "grant",
    "if",
    "in",
    "index",
    "inet",
    "infinity",
    "insert",
    "into",
    "is",
    "keyspace",
    "keyspaces",
    "limit",
    "local_one",
    "local_quorum",
    "materialized",
    "mbean",
    "mbeans",
    "modify",
    "nan",
    "norecursive",
    "not",
    "null",
    "of",
    "on",
    "one",
    "or",
    "order",
    "partition",
    "password",
    "per",
    "primary",
    "quorum",
    "rename",
    "replace",
    "revoke",
    "schema",
    "select",
    "set",
    "table",
    "tables",
    "three",
    "to",
    "token",
    "truncate",
    "two",
    "unlogged",
    "unset",
    "update",
    "use",
    "using",
    "view",
    "where",
    "with",
];

/// True when `word` (lower case) is reserved and must be quoted to be used as a name.
pub fn is_reserved(word: &str) -> bool {
    RESERVED.binary_search(&word).is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn list_is_sorted_for_binary_search() {
        let mut sorted = super::RESERVED.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, super::RESERVED);
        assert!(super::is_reserved("select"));
        assert!(!super::is_reserved("name"));
    }
}
