//! CQL data types: the resolved type of a column, a bind marker or a value.
//!
//! `CqlType` is the single representation used from the schema down to storage. It prints as
//! the CQL type string Cassandra shows in `system_schema.columns.type` and DESCRIBE, and parses
//! back from that string (`CqlType::parse`).

use std::fmt;
use std::sync::Arc;

/// A user-defined type, resolved (field names and types known).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UdtDef {
    pub keyspace: String,
    pub name: String,
    pub fields: Vec<(String, CqlType)>,
}

/// Dropped without recursion: user types nest by reference, so a chain of them (possible in a
/// schema written before the depth limit of `type_size`) would otherwise recurse once per level
/// when its last holder goes (DROP TYPE, DROP KEYSPACE, shutdown) and could overflow the stack.
impl Drop for UdtDef {
    fn drop(&mut self) {
        let mut pending: Vec<CqlType> = self.fields.drain(..).map(|(_, t)| t).collect();
        while let Some(t) = pending.pop() {
            match t {
                CqlType::List(b) | CqlType::Set(b) | CqlType::Frozen(b) | CqlType::Vector(b, _) => {
                    pending.push(*b)
                }
                CqlType::Map(k, v) => pending.extend([*k, *v]),
                CqlType::Tuple(ts) => pending.extend(ts),
                CqlType::Udt(u) => {
                    // Only the last holder takes the fields; its own drop then finds none.
                    if let Ok(mut def) = Arc::try_unwrap(u) {
                        pending.extend(def.fields.drain(..).map(|(_, t)| t));
                    }
                }
                _ => {}
            }
        }
    }
}

/// A CQL type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CqlType {
    Ascii,
    Bigint,
    Blob,
    Boolean,
    Counter,
    Date,
    Decimal,
    Double,
    Duration,
    Float,
    Inet,
    Int,
    Smallint,
    Text,
    Time,
    Timestamp,
    Timeuuid,
    Tinyint,
    Uuid,
    Varint,
    /// A type Cassandra only knows by its Java class name.
    Custom(String),
    List(Box<CqlType>),
    Set(Box<CqlType>),
    Map(Box<CqlType>, Box<CqlType>),
    Tuple(Vec<CqlType>),
    Udt(Arc<UdtDef>),
    /// `vector<elem, n>`
    Vector(Box<CqlType>, u32),
    /// `frozen<...>`: the inner value is one immutable cell.
    Frozen(Box<CqlType>),
}

impl CqlType {
    /// Native type from its CQL name (`varchar` is `text`).
    pub fn native_from_name(name: &str) -> Option<CqlType> {
        Some(match name.to_ascii_lowercase().as_str() {
            "ascii" => CqlType::Ascii,
            "bigint" => CqlType::Bigint,
            "blob" => CqlType::Blob,
            "boolean" => CqlType::Boolean,
            "counter" => CqlType::Counter,
            "date" => CqlType::Date,
            "decimal" => CqlType::Decimal,
            "double" => CqlType::Double,
            "duration" => CqlType::Duration,
            "float" => CqlType::Float,
            "inet" => CqlType::Inet,
            "int" => CqlType::Int,
            "smallint" => CqlType::Smallint,
            "text" | "varchar" => CqlType::Text,
            "time" => CqlType::Time,
            "timestamp" => CqlType::Timestamp,
            "timeuuid" => CqlType::Timeuuid,
            "tinyint" => CqlType::Tinyint,
            "uuid" => CqlType::Uuid,
            "varint" => CqlType::Varint,
            _ => return None,
        })
    }

    /// The type without a `frozen<>` wrapper.
    pub fn unfrozen(&self) -> &CqlType {
        match self {
            CqlType::Frozen(inner) => inner.unfrozen(),
            other => other,
        }
    }

    /// Whether the type is or holds a duration (Cassandra's `referencesDuration`: durations
    /// have no order, so they cannot be compared by slices, indexed or used in keys).
    pub fn references_duration(&self) -> bool {
        match self.unfrozen() {
            CqlType::Duration => true,
            CqlType::List(e) | CqlType::Set(e) => e.references_duration(),
            CqlType::Map(k, v) => k.references_duration() || v.references_duration(),
            CqlType::Tuple(items) => items.iter().any(CqlType::references_duration),
            CqlType::Udt(u) => u.fields.iter().any(|(_, f)| f.references_duration()),
            _ => false,
        }
    }

    pub fn is_frozen(&self) -> bool {
        matches!(self, CqlType::Frozen(_))
    }

    /// Collections (list, set, map) that are not frozen: stored cell by cell.
    pub fn is_multi_cell(&self) -> bool {
        matches!(
            self,
            CqlType::List(_) | CqlType::Set(_) | CqlType::Map(_, _) | CqlType::Udt(_)
        )
    }

    pub fn is_collection(&self) -> bool {
        matches!(
            self.unfrozen(),
            CqlType::List(_) | CqlType::Set(_) | CqlType::Map(_, _)
        )
    }

    pub fn is_counter(&self) -> bool {
        matches!(self, CqlType::Counter)
    }

    /// Parses a type string as Cassandra prints it (`frozen<map<text, list<int>>>`, `'custom.Class'`).
    /// User-defined types are resolved by `resolve_udt`.
    pub fn parse(
        s: &str,
        resolve_udt: &dyn Fn(&str) -> Option<Arc<UdtDef>>,
    ) -> Result<CqlType, String> {
        let mut p = TypeStrParser {
            s: s.as_bytes(),
            pos: 0,
            resolve_udt,
        };
        let t = p.parse_type()?;
        p.skip_ws();
        if p.pos != p.s.len() {
            return Err(format!("unexpected trailing input in type '{s}'"));
        }
        Ok(t)
    }
}

struct TypeStrParser<'a> {
    s: &'a [u8],
    pos: usize,
    resolve_udt: &'a dyn Fn(&str) -> Option<Arc<UdtDef>>,
}

impl TypeStrParser<'_> {
    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }
    fn expect(&mut self, c: u8) -> Result<(), String> {
        self.skip_ws();
        if self.s.get(self.pos) == Some(&c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' in type", c as char))
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.pos).copied()
    }
    fn ident(&mut self) -> Result<String, String> {
        self.skip_ws();
        if self.s.get(self.pos) == Some(&b'"') {
            self.pos += 1;
            let mut out = Vec::new();
            loop {
                match self.s.get(self.pos) {
                    None => return Err("unterminated quoted identifier in type".into()),
                    Some(b'"') if self.s.get(self.pos + 1) == Some(&b'"') => {
                        out.push(b'"');
                        self.pos += 2;
                    }
                    Some(b'"') => {
                        self.pos += 1;
                        break;
                    }
                    Some(&c) => {
                        out.push(c);
                        self.pos += 1;
                    }
                }
            }
            return String::from_utf8(out).map_err(|_| "invalid UTF-8 in type".to_string());
        }
        let start = self.pos;
        while self.pos < self.s.len()
            && (self.s[self.pos].is_ascii_alphanumeric()
                || self.s[self.pos] == b'_'
                || self.s[self.pos] == b'.')
        {
            self.pos += 1;
        }
        if start == self.pos {
            return Err("expected a type name".into());
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.pos]).to_ascii_lowercase())
    }
    fn parse_type(&mut self) -> Result<CqlType, String> {
        if self.peek() == Some(b'\'') {
            self.pos += 1;
            let start = self.pos;
            while self.pos < self.s.len() && self.s[self.pos] != b'\'' {
                self.pos += 1;
            }
            let name = String::from_utf8_lossy(&self.s[start..self.pos]).into_owned();
            self.expect(b'\'')?;
            return Ok(CqlType::Custom(name));
        }
        let name = self.ident()?;
        match name.as_str() {
            "frozen" => {
                self.expect(b'<')?;
                let inner = self.parse_type()?;
                self.expect(b'>')?;
                Ok(CqlType::Frozen(Box::new(inner)))
            }
            "list" | "set" => {
                self.expect(b'<')?;
                let inner = self.parse_type()?;
                self.expect(b'>')?;
                Ok(if name == "list" {
                    CqlType::List(Box::new(inner))
                } else {
                    CqlType::Set(Box::new(inner))
                })
            }
            "map" => {
                self.expect(b'<')?;
                let k = self.parse_type()?;
                self.expect(b',')?;
                let v = self.parse_type()?;
                self.expect(b'>')?;
                Ok(CqlType::Map(Box::new(k), Box::new(v)))
            }
            "tuple" => {
                self.expect(b'<')?;
                let mut items = vec![self.parse_type()?];
                while self.peek() == Some(b',') {
                    self.pos += 1;
                    items.push(self.parse_type()?);
                }
                self.expect(b'>')?;
                Ok(CqlType::Tuple(items))
            }
            "vector" => {
                self.expect(b'<')?;
                let inner = self.parse_type()?;
                self.expect(b',')?;
                self.skip_ws();
                let start = self.pos;
                while self.pos < self.s.len() && self.s[self.pos].is_ascii_digit() {
                    self.pos += 1;
                }
                let n: u32 = std::str::from_utf8(&self.s[start..self.pos])
                    .ok()
                    .and_then(|d| d.parse().ok())
                    .ok_or("expected vector dimension")?;
                self.expect(b'>')?;
                Ok(CqlType::Vector(Box::new(inner), n))
            }
            other => {
                if let Some(t) = CqlType::native_from_name(other) {
                    return Ok(t);
                }
                (self.resolve_udt)(other)
                    .map(CqlType::Udt)
                    .ok_or_else(|| format!("Unknown type {other}"))
            }
        }
    }
}

/// Quotes an identifier for CQL output when needed (mixed case, reserved words, odd characters).
pub fn quote_ident(name: &str) -> String {
    let plain = !name.is_empty()
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !crate::cql::keywords::is_reserved(name);
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

impl fmt::Display for CqlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CqlType::Ascii => f.write_str("ascii"),
            CqlType::Bigint => f.write_str("bigint"),
            CqlType::Blob => f.write_str("blob"),
            CqlType::Boolean => f.write_str("boolean"),
            CqlType::Counter => f.write_str("counter"),
            CqlType::Date => f.write_str("date"),
            CqlType::Decimal => f.write_str("decimal"),
            CqlType::Double => f.write_str("double"),
            CqlType::Duration => f.write_str("duration"),
            CqlType::Float => f.write_str("float"),
            CqlType::Inet => f.write_str("inet"),
            CqlType::Int => f.write_str("int"),
            CqlType::Smallint => f.write_str("smallint"),
            CqlType::Text => f.write_str("text"),
            CqlType::Time => f.write_str("time"),
            CqlType::Timestamp => f.write_str("timestamp"),
            CqlType::Timeuuid => f.write_str("timeuuid"),
            CqlType::Tinyint => f.write_str("tinyint"),
            CqlType::Uuid => f.write_str("uuid"),
            CqlType::Varint => f.write_str("varint"),
            CqlType::Custom(c) => write!(f, "'{c}'"),
            CqlType::List(t) => write!(f, "list<{t}>"),
            CqlType::Set(t) => write!(f, "set<{t}>"),
            CqlType::Map(k, v) => write!(f, "map<{k}, {v}>"),
            CqlType::Tuple(items) => {
                f.write_str("tuple<")?;
                for (i, t) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str(">")
            }
            CqlType::Udt(u) => f.write_str(&quote_ident(&u.name)),
            CqlType::Vector(t, n) => write!(f, "vector<{t}, {n}>"),
            CqlType::Frozen(t) => write!(f, "frozen<{t}>"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> CqlType {
        CqlType::parse(s, &|_| None).unwrap()
    }

    #[test]
    fn type_strings_round_trip() {
        for s in [
            "int",
            "text",
            "frozen<map<text, list<int>>>",
            "tuple<int, text, blob>",
            "set<timeuuid>",
            "vector<float, 3>",
            "'org.apache.cassandra.db.marshal.DynamicCompositeType'",
        ] {
            assert_eq!(parse(s).to_string(), s);
        }
        assert_eq!(parse("varchar"), CqlType::Text);
        assert_eq!(parse(" map < int , text > ").to_string(), "map<int, text>");
        assert!(CqlType::parse("nosuch", &|_| None).is_err());
        assert!(CqlType::parse("list<int", &|_| None).is_err());
    }
}
