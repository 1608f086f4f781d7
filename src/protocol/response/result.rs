//! RESULT responses (spec v4 section 4.2.5): Void, Rows, Set_keyspace, Prepared, Schema_change.

use bytes::{BufMut, Bytes, BytesMut};

use super::super::types::*;
use super::event::SchemaChange;

/// RESULT kinds.
pub mod result_kind {
    /// Void.
    pub const VOID: i32 = 0x0001;
    /// Rows.
    pub const ROWS: i32 = 0x0002;
    /// Set_keyspace.
    pub const SET_KEYSPACE: i32 = 0x0003;
    /// Prepared.
    pub const PREPARED: i32 = 0x0004;
    /// Schema_change.
    pub const SCHEMA_CHANGE: i32 = 0x0005;
}

/// Rows metadata flags.
pub mod metadata_flags {
    /// One table spec for all columns.
    pub const GLOBAL_TABLES_SPEC: i32 = 0x0001;
    /// A paging state follows.
    pub const HAS_MORE_PAGES: i32 = 0x0002;
    /// No column specs.
    pub const NO_METADATA: i32 = 0x0004;
    /// v5: a new result metadata id follows.
    pub const METADATA_CHANGED: i32 = 0x0008;
}

/// A column type as the protocol's `[option]`.
///
/// Vector types have no id of their own: send them as
/// `Custom("org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType,3)")`.
/// Types newer than the connection's version are sent as their Cassandra class name, as
/// Cassandra does (`Duration` before v5; `Date`, `Time`, `Smallint`, `Tinyint` in v3).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// 0x0000 with the Java class name.
    Custom(String),
    /// 0x0001
    Ascii,
    /// 0x0002
    Bigint,
    /// 0x0003
    Blob,
    /// 0x0004
    Boolean,
    /// 0x0005
    Counter,
    /// 0x0006
    Decimal,
    /// 0x0007
    Double,
    /// 0x0008
    Float,
    /// 0x0009
    Int,
    /// 0x000B
    Timestamp,
    /// 0x000C
    Uuid,
    /// 0x000D (text)
    Varchar,
    /// 0x000E
    Varint,
    /// 0x000F
    Timeuuid,
    /// 0x0010
    Inet,
    /// 0x0011
    Date,
    /// 0x0012
    Time,
    /// 0x0013
    Smallint,
    /// 0x0014
    Tinyint,
    /// 0x0015 (v5; a custom type before)
    Duration,
    /// 0x0020 with the element type.
    List(Box<ColumnType>),
    /// 0x0021 with key and value types.
    Map(Box<ColumnType>, Box<ColumnType>),
    /// 0x0022 with the element type.
    Set(Box<ColumnType>),
    /// 0x0030: keyspace, name and fields.
    Udt {
        /// Keyspace of the type.
        keyspace: String,
        /// Type name.
        name: String,
        /// Field names and types, in order.
        fields: Vec<(String, ColumnType)>,
    },
    /// 0x0031 with the component types.
    Tuple(Vec<ColumnType>),
}

/// Option ids of [`ColumnType`].
pub mod type_id {
    #![allow(missing_docs)]
    pub const CUSTOM: u16 = 0x0000;
    pub const ASCII: u16 = 0x0001;
    pub const BIGINT: u16 = 0x0002;
    pub const BLOB: u16 = 0x0003;
    pub const BOOLEAN: u16 = 0x0004;
    pub const COUNTER: u16 = 0x0005;
    pub const DECIMAL: u16 = 0x0006;
    pub const DOUBLE: u16 = 0x0007;
    pub const FLOAT: u16 = 0x0008;
    pub const INT: u16 = 0x0009;
    pub const TIMESTAMP: u16 = 0x000B;
    pub const UUID: u16 = 0x000C;
    pub const VARCHAR: u16 = 0x000D;
    pub const VARINT: u16 = 0x000E;
    pub const TIMEUUID: u16 = 0x000F;
    pub const INET: u16 = 0x0010;
    pub const DATE: u16 = 0x0011;
    pub const TIME: u16 = 0x0012;
    pub const SMALLINT: u16 = 0x0013;
    pub const TINYINT: u16 = 0x0014;
    pub const DURATION: u16 = 0x0015;
    pub const LIST: u16 = 0x0020;
    pub const MAP: u16 = 0x0021;
    pub const SET: u16 = 0x0022;
    pub const UDT: u16 = 0x0030;
    pub const TUPLE: u16 = 0x0031;
}

const MARSHAL: &str = "org.apache.cassandra.db.marshal.";

impl ColumnType {
    /// Writes this type as an `[option]` for protocol `version`.
    pub fn encode(&self, out: &mut BytesMut, version: u8) -> Result<(), EncodeError> {
        use type_id::*;
        let simple = |out: &mut BytesMut, id: u16| {
            write_short(out, id);
            Ok(())
        };
        let legacy = |out: &mut BytesMut, class: &str| {
            write_short(out, CUSTOM);
            write_string(out, &format!("{MARSHAL}{class}"))
        };
        match self {
            ColumnType::Custom(class) => {
                write_short(out, CUSTOM);
                write_string(out, class)
            }
            ColumnType::Ascii => simple(out, ASCII),
            ColumnType::Bigint => simple(out, BIGINT),
            ColumnType::Blob => simple(out, BLOB),
            ColumnType::Boolean => simple(out, BOOLEAN),
            ColumnType::Counter => simple(out, COUNTER),
            ColumnType::Decimal => simple(out, DECIMAL),
            ColumnType::Double => simple(out, DOUBLE),
            ColumnType::Float => simple(out, FLOAT),
            ColumnType::Int => simple(out, INT),
            ColumnType::Timestamp => simple(out, TIMESTAMP),
            ColumnType::Uuid => simple(out, UUID),
            ColumnType::Varchar => simple(out, VARCHAR),
            ColumnType::Varint => simple(out, VARINT),
            ColumnType::Timeuuid => simple(out, TIMEUUID),
            ColumnType::Inet => simple(out, INET),
            ColumnType::Date if version < 4 => legacy(out, "SimpleDateType"),
            ColumnType::Date => simple(out, DATE),
            ColumnType::Time if version < 4 => legacy(out, "TimeType"),
            ColumnType::Time => simple(out, TIME),
            ColumnType::Smallint if version < 4 => legacy(out, "ShortType"),
            ColumnType::Smallint => simple(out, SMALLINT),
            ColumnType::Tinyint if version < 4 => legacy(out, "ByteType"),
            ColumnType::Tinyint => simple(out, TINYINT),
            ColumnType::Duration if version < 5 => legacy(out, "DurationType"),
            ColumnType::Duration => simple(out, DURATION),
            ColumnType::List(e) => {
                write_short(out, LIST);
                e.encode(out, version)
            }
            ColumnType::Set(e) => {
                write_short(out, SET);
                e.encode(out, version)
            }
            ColumnType::Map(k, v) => {
                write_short(out, MAP);
                k.encode(out, version)?;
                v.encode(out, version)
            }
            ColumnType::Udt {
                keyspace,
                name,
                fields,
            } => {
                write_short(out, UDT);
                write_string(out, keyspace)?;
                write_string(out, name)?;
                write_short_count(out, fields.len(), "UDT fields")?;
                for (fname, fty) in fields {
                    write_string(out, fname)?;
                    fty.encode(out, version)?;
                }
                Ok(())
            }
            ColumnType::Tuple(types) => {
                write_short(out, TUPLE);
                write_short_count(out, types.len(), "tuple types")?;
                for t in types {
                    t.encode(out, version)?;
                }
                Ok(())
            }
        }
    }
}

/// A result or bind-marker column.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ColumnSpec {
    /// Keyspace of the table the column belongs to.
    pub keyspace: String,
    /// Table name.
    pub table: String,
    /// Column name, alias or bind-marker name.
    pub name: String,
    /// Type.
    pub ty: ColumnType,
}

/// Whether all specs share one keyspace and table (and there is at least one).
fn global_table(columns: &[ColumnSpec]) -> Option<(&str, &str)> {
    let first = columns.first()?;
    columns
        .iter()
        .all(|c| c.keyspace == first.keyspace && c.table == first.table)
        .then_some((first.keyspace.as_str(), first.table.as_str()))
}

/// Writes `[global_table_spec]? <col_spec>*` given whether the global spec is used.
fn write_col_specs(
    out: &mut BytesMut,
    version: u8,
    columns: &[ColumnSpec],
) -> Result<(), EncodeError> {
    match global_table(columns) {
        Some((ks, table)) => {
            write_string(out, ks)?;
            write_string(out, table)?;
            for c in columns {
                write_string(out, &c.name)?;
                c.ty.encode(out, version)?;
            }
        }
        None => {
            for c in columns {
                write_string(out, &c.keyspace)?;
                write_string(out, &c.table)?;
                write_string(out, &c.name)?;
                c.ty.encode(out, version)?;
            }
        }
    }
    Ok(())
}

/// The columns of a Rows result's metadata (`[global_table_spec]? <col_spec>*`) encoded once
/// for one protocol version, for the responses that share them (every EXECUTE of a prepared
/// SELECT: building and writing the specs per response was about 5% of a point read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedColumns {
    /// The protocol version the specs were encoded for.
    pub version: u8,
    pub count: usize,
    /// Whether the specs start with the global table spec (Global_tables_spec).
    pub global: bool,
    pub specs: Bytes,
}

impl EncodedColumns {
    pub fn new(columns: &[ColumnSpec], version: u8) -> Result<EncodedColumns, EncodeError> {
        let mut specs = BytesMut::new();
        write_col_specs(&mut specs, version, columns)?;
        Ok(EncodedColumns {
            version,
            count: columns.len(),
            global: global_table(columns).is_some(),
            specs: specs.freeze(),
        })
    }
}

/// One [`EncodedColumns`] per protocol version (3 to 5), each built on first use; bounded
/// by its owner (a prepared statement).
#[derive(Debug, Default)]
pub struct EncodedColumnsCache([std::sync::OnceLock<EncodedColumns>; 3]);

impl EncodedColumnsCache {
    /// The columns encoded for `version`, made by `make` the first time (None: `make` failed,
    /// or a version outside 3 to 5).
    pub fn get_or_make(
        &self,
        version: u8,
        make: impl FnOnce() -> Option<EncodedColumns>,
    ) -> Option<&EncodedColumns> {
        let slot = self.0.get(usize::from(version.checked_sub(3)?))?;
        if let Some(e) = slot.get() {
            return Some(e);
        }
        let made = make().filter(|e| e.version == version)?;
        Some(slot.get_or_init(|| made))
    }
}

/// Metadata of a Rows result (also the result metadata of a Prepared result).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RowsMetadata {
    /// The columns. Always fill them, even with `no_metadata`: their count is still sent
    /// (unless `encoded` gives them).
    pub columns: Vec<ColumnSpec>,
    /// The columns already encoded for the response's version: `columns` is then ignored
    /// (and may be empty); encoding for another version is an error.
    pub encoded: Option<EncodedColumns>,
    /// Paging state of the next page; sets Has_more_pages.
    pub paging_state: Option<Bytes>,
    /// Send only flags, column count and paging state (the client asked for skip_metadata).
    pub no_metadata: bool,
    /// v5: the result metadata changed; sets Metadata_changed (ignored before v5). Must not be
    /// combined with `no_metadata`.
    pub new_metadata_id: Option<Bytes>,
}

impl RowsMetadata {
    /// Writes `<flags><columns_count>[<paging_state>][<new_metadata_id>][<global_table_spec>?<col_spec>*]`.
    /// The Global_tables_spec flag is used when all columns share keyspace and table.
    pub fn encode(&self, out: &mut BytesMut, version: u8) -> Result<(), EncodeError> {
        use metadata_flags::*;
        let new_id = if version >= 5 {
            self.new_metadata_id.as_ref()
        } else {
            None
        };
        if new_id.is_some() && self.no_metadata {
            return Err(EncodeError::Invalid(
                "Metadata_changed cannot be combined with No_metadata",
            ));
        }
        let encoded = self.encoded.as_ref();
        if encoded.is_some_and(|e| e.version != version) {
            return Err(EncodeError::Invalid(
                "result columns encoded for another protocol version",
            ));
        }
        let (count, global) = match encoded {
            Some(e) => (e.count, e.global),
            None => (self.columns.len(), global_table(&self.columns).is_some()),
        };
        let mut flags = 0;
        if !self.no_metadata && global {
            flags |= GLOBAL_TABLES_SPEC;
        }
        if self.paging_state.is_some() {
            flags |= HAS_MORE_PAGES;
        }
        if self.no_metadata {
            flags |= NO_METADATA;
        }
        if new_id.is_some() {
            flags |= METADATA_CHANGED;
        }
        write_int(out, flags);
        write_int_count(out, count, "columns")?;
        if let Some(ps) = &self.paging_state {
            write_bytes(out, Some(ps))?;
        }
        if let Some(id) = new_id {
            write_short_bytes(out, id)?;
        }
        match encoded {
            _ if self.no_metadata => {}
            Some(e) => out.extend_from_slice(&e.specs),
            None => write_col_specs(out, version, &self.columns)?,
        }
        Ok(())
    }
}

/// A Rows result. `rows_content` is the concatenation of `rows_count * columns` `[bytes]` cells,
/// built by the caller, typically with [`RowsWriter`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rows {
    /// Metadata.
    pub metadata: RowsMetadata,
    /// Number of rows in `rows_content`.
    pub rows_count: i32,
    /// Encoded cells, written as is.
    pub rows_content: Bytes,
}

/// Builds the `<rows_content>` of a Rows result cell by cell, straight into one buffer.
///
/// ```
/// use ringgate::protocol::response::RowsWriter;
/// let mut w = RowsWriter::new(2);
/// w.push_value(Some(b"k1")).unwrap();
/// w.push_value(None).unwrap(); // null
/// assert_eq!(w.rows_count(), 1);
/// let (count, content) = w.finish().unwrap();
/// assert_eq!(count, 1);
/// assert_eq!(&content[..], b"\x00\x00\x00\x02k1\xff\xff\xff\xff");
/// ```
#[derive(Debug, Clone)]
pub struct RowsWriter {
    buf: BytesMut,
    columns: usize,
    cells_in_row: usize,
    rows: i32,
}

impl RowsWriter {
    /// A writer for rows of `columns` cells.
    pub fn new(columns: usize) -> RowsWriter {
        RowsWriter::with_capacity(columns, 0)
    }

    /// A writer with `bytes` of buffer reserved.
    pub fn with_capacity(columns: usize, bytes: usize) -> RowsWriter {
        RowsWriter {
            buf: BytesMut::with_capacity(bytes),
            columns,
            cells_in_row: 0,
            rows: 0,
        }
    }

    fn cell_done(&mut self) -> Result<(), EncodeError> {
        self.cells_in_row += 1;
        if self.cells_in_row == self.columns {
            self.cells_in_row = 0;
            self.rows = self.rows.checked_add(1).ok_or(EncodeError::TooLong {
                what: "rows_count",
                len: i32::MAX as usize + 1,
                max: i32::MAX as usize,
            })?;
        }
        Ok(())
    }

    fn check_columns(&self) -> Result<(), EncodeError> {
        if self.columns == 0 {
            return Err(EncodeError::Invalid(
                "cannot push a cell into a result without columns",
            ));
        }
        Ok(())
    }

    /// Appends one cell: its `[int]` length and bytes, or -1 for `None` (null). A row is counted
    /// when its last cell is pushed.
    pub fn push_value(&mut self, v: Option<&[u8]>) -> Result<(), EncodeError> {
        self.check_columns()?;
        write_bytes(&mut self.buf, v)?;
        self.cell_done()
    }

    /// Appends a null cell.
    pub fn push_null(&mut self) -> Result<(), EncodeError> {
        self.push_value(None)
    }

    /// Appends one non-null cell whose bytes `f` writes directly into the buffer (no
    /// intermediate allocation); the length prefix is patched afterwards.
    pub fn push_with<F: FnOnce(&mut BytesMut)>(&mut self, f: F) -> Result<(), EncodeError> {
        self.check_columns()?;
        let at = self.buf.len();
        self.buf.put_i32(0);
        f(&mut self.buf);
        let len = self.buf.len() - at - 4;
        match i32::try_from(len) {
            Ok(n) => {
                self.buf[at..at + 4].copy_from_slice(&n.to_be_bytes());
                self.cell_done()
            }
            Err(_) => {
                self.buf.truncate(at);
                Err(EncodeError::TooLong {
                    what: "[bytes]",
                    len,
                    max: i32::MAX as usize,
                })
            }
        }
    }

    /// Counts a row in a result without columns (e.g. `SELECT COUNT(*)` has one, but some
    /// system results have none).
    pub fn push_empty_row(&mut self) -> Result<(), EncodeError> {
        if self.columns != 0 {
            return Err(EncodeError::Invalid(
                "push_empty_row needs a result without columns",
            ));
        }
        self.rows = self
            .rows
            .checked_add(1)
            .ok_or(EncodeError::Invalid("too many rows"))?;
        Ok(())
    }

    /// Complete rows so far.
    pub fn rows_count(&self) -> i32 {
        self.rows
    }

    /// Bytes of cells written so far (to cap pages by size).
    pub fn content_len(&self) -> usize {
        self.buf.len()
    }

    /// Whether no row is partially written.
    pub fn is_row_complete(&self) -> bool {
        self.cells_in_row == 0
    }

    /// Returns `(rows_count, rows_content)`; fails if the last row is incomplete.
    pub fn finish(self) -> Result<(i32, Bytes), EncodeError> {
        if !self.is_row_complete() {
            return Err(EncodeError::Invalid("last row is incomplete"));
        }
        Ok((self.rows, self.buf.freeze()))
    }

    /// Builds the [`Rows`] result with `metadata`.
    pub fn into_rows(self, metadata: RowsMetadata) -> Result<Rows, EncodeError> {
        let (rows_count, rows_content) = self.finish()?;
        Ok(Rows {
            metadata,
            rows_count,
            rows_content,
        })
    }
}

/// A Prepared result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// Statement id (`[short bytes]`; Cassandra uses MD5 of keyspace + query).
    pub id: Bytes,
    /// v5: id of the result metadata (required in v5, ignored before).
    pub result_metadata_id: Option<Bytes>,
    /// Bind markers.
    pub bind_columns: Vec<ColumnSpec>,
    /// For each partition key column, the index of its bind marker (v4+; drivers route with it).
    pub pk_indexes: Vec<u16>,
    /// Metadata of the rows an EXECUTE returns (empty with `no_metadata` for non-SELECTs).
    pub result: RowsMetadata,
}

impl Prepared {
    fn encode(&self, out: &mut BytesMut, version: u8) -> Result<(), EncodeError> {
        write_short_bytes(out, &self.id)?;
        if version >= 5 {
            let id = self
                .result_metadata_id
                .as_ref()
                .ok_or(EncodeError::Invalid(
                    "a v5 Prepared result needs result_metadata_id",
                ))?;
            write_short_bytes(out, id)?;
        }
        let flags = if global_table(&self.bind_columns).is_some() {
            metadata_flags::GLOBAL_TABLES_SPEC
        } else {
            0
        };
        write_int(out, flags);
        write_int_count(out, self.bind_columns.len(), "bind columns")?;
        if version >= 4 {
            write_int_count(out, self.pk_indexes.len(), "pk indexes")?;
            for i in &self.pk_indexes {
                write_short(out, *i);
            }
        }
        write_col_specs(out, version, &self.bind_columns)?;
        self.result.encode(out, version)
    }
}

/// The body of a RESULT response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultBody {
    /// 0x0001: nothing.
    Void,
    /// 0x0002: rows.
    Rows(Rows),
    /// 0x0003: the keyspace a `USE` switched to.
    SetKeyspace(String),
    /// 0x0004: a prepared statement.
    Prepared(Prepared),
    /// 0x0005: a schema change.
    SchemaChange(SchemaChange),
}

impl ResultBody {
    /// Writes the kind and body.
    pub(crate) fn encode(&self, out: &mut BytesMut, version: u8) -> Result<(), EncodeError> {
        match self {
            ResultBody::Void => write_int(out, result_kind::VOID),
            ResultBody::Rows(rows) => {
                write_int(out, result_kind::ROWS);
                rows.metadata.encode(out, version)?;
                write_int(out, rows.rows_count);
                out.extend_from_slice(&rows.rows_content);
            }
            ResultBody::SetKeyspace(ks) => {
                write_int(out, result_kind::SET_KEYSPACE);
                write_string(out, ks)?;
            }
            ResultBody::Prepared(p) => {
                write_int(out, result_kind::PREPARED);
                p.encode(out, version)?;
            }
            ResultBody::SchemaChange(sc) => {
                write_int(out, result_kind::SCHEMA_CHANGE);
                sc.encode(out)?;
            }
        }
        Ok(())
    }
}
