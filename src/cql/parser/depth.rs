//! Nesting depth of parsed expressions, and the check that keeps it within `MAX_DEPTH`.
//!
//! Everything downstream (binding, evaluation, dropping the tree) walks terms and selectors
//! recursively, so a tree must never be deeper than the limit. Nested constructs (parentheses,
//! collection literals, function arguments, type hints) are counted by `Parser::nested` as they
//! are parsed; operator chains (`a + 1 + 1 ...`) and postfix chains (`l[0][0]...`, `u.f.f...`)
//! are loops, and each link makes the tree one level deeper, so the loops measure the tree they
//! build and call `Parser::deeper` per link. Invariant: a tree parsed at nesting level `c` is at
//! most `MAX_DEPTH - c` deep, which is what makes the recursive `depth` functions safe.

use super::{PResult, Parser, MAX_DEPTH};
use crate::cql::ast::{SelectorExpr, Term};

impl Parser<'_> {
    /// The depth of a node whose deepest child is `child_depth` deep, refused ("Statement too
    /// deeply nested") when it would take the statement beyond `MAX_DEPTH`.
    pub(super) fn deeper(&self, child_depth: u32) -> PResult<u32> {
        let depth = child_depth + 1;
        if self.depth + depth > MAX_DEPTH {
            let t = self.tok();
            return Err(self.semantic(&t, "Statement too deeply nested"));
        }
        Ok(depth)
    }
}

/// Levels of `term`: a literal or marker is 1, each enclosing node adds one.
pub(super) fn term_depth(term: &Term) -> u32 {
    let max_of = |items: &mut dyn Iterator<Item = &Term>| items.map(term_depth).max().unwrap_or(0);
    1 + match term {
        Term::Literal(_) | Term::Bind { .. } => 0,
        Term::List(items) | Term::Set(items) | Term::Tuple(items) => max_of(&mut items.iter()),
        Term::Function { args, .. } => max_of(&mut args.iter()),
        Term::Map(entries) => max_of(&mut entries.iter().flat_map(|(k, v)| [k, v])),
        Term::Udt(fields) => max_of(&mut fields.iter().map(|(_, t)| t)),
        Term::TypeHint(_, t) | Term::Negate(t) => term_depth(t),
        Term::Binary(_, l, r) => term_depth(l).max(term_depth(r)),
    }
}

/// Levels of `expr`, counting the terms it holds.
pub(super) fn selector_depth(expr: &SelectorExpr) -> u32 {
    let opt = |t: &Option<Term>| t.as_ref().map_or(0, term_depth);
    1 + match expr {
        SelectorExpr::Column(_) | SelectorExpr::CountAll => 0,
        SelectorExpr::WriteTime(s) | SelectorExpr::MaxWriteTime(s) | SelectorExpr::Ttl(s) => {
            selector_depth(s)
        }
        SelectorExpr::Function { args, .. } => args.iter().map(selector_depth).max().unwrap_or(0),
        SelectorExpr::Cast(s, _) | SelectorExpr::Field(s, _) | SelectorExpr::Negate(s) => {
            selector_depth(s)
        }
        SelectorExpr::Element(s, t) => selector_depth(s).max(term_depth(t)),
        SelectorExpr::Slice(s, from, to) => selector_depth(s).max(opt(from)).max(opt(to)),
        SelectorExpr::Term(t) => term_depth(t),
        SelectorExpr::Binary(_, l, r) => selector_depth(l).max(selector_depth(r)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cql::ast::{Assignment, Selection, Statement};

    fn refused(q: &str) {
        let err = crate::cql::parse(q).expect_err(q.get(..60).unwrap_or(q));
        assert!(err.message.contains("too deeply nested"), "{err}");
    }

    fn chain(head: &str, link: &str, n: usize) -> String {
        format!("{head}{}", link.repeat(n))
    }

    #[test]
    fn long_operator_chains_are_refused_not_built() {
        for link in [" + 1", " * 2", " - 1", " + 'a'"] {
            refused(&format!(
                "UPDATE t SET n = {} WHERE id = 1",
                chain("1", link, 200_000)
            ));
            refused(&format!("SELECT {} FROM t", chain("a", link, 200_000)));
        }
    }

    #[test]
    fn long_postfix_chains_are_refused_not_built() {
        refused(&format!("SELECT {} FROM t", chain("l", "[0]", 100_000)));
        refused(&format!("SELECT {} FROM t", chain("u", ".f", 100_000)));
        refused(&format!("SELECT {} FROM t", chain("m", "[1..2]", 100_000)));
    }

    #[test]
    fn chains_within_the_limit_parse() {
        let q = format!("UPDATE t SET n = {} WHERE id = 1", chain("1", " + 1", 90));
        let Statement::Update(u) = crate::cql::parse(&q).unwrap().statement else {
            panic!("not an update")
        };
        let Assignment::Set { value, .. } = &u.assignments[0] else {
            panic!("not a set")
        };
        assert_eq!(term_depth(value), 91);
        let q = format!("SELECT {} FROM t", chain("u", ".f", 90));
        let Statement::Select(s) = crate::cql::parse(&q).unwrap().statement else {
            panic!("not a select")
        };
        let Selection::List(items) = &s.selection else {
            panic!("not a list")
        };
        assert_eq!(selector_depth(&items[0].expr), 91);
    }

    #[test]
    fn depth_counts_nesting_and_chains_together() {
        // Parentheses around a chain, and a chain whose operands are nested: each alone is
        // within the limit, together they are not.
        let inner = chain("1", " + 1", 60);
        refused(&format!(
            "UPDATE t SET n = {}{inner}{} WHERE id = 1",
            "[".repeat(60),
            "]".repeat(60)
        ));
        let nested_operand = format!("{}1{}", "[".repeat(60), "]".repeat(60));
        refused(&format!(
            "UPDATE t SET n = {} WHERE id = 1",
            chain(&nested_operand, " + 1", 60)
        ));
        refused(&format!(
            "UPDATE t SET n = 1{} WHERE id = 1",
            format!(" + {nested_operand}").repeat(60)
        ));
    }
}
