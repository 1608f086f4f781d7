//! USING TIMESTAMP / TTL of a write as cell parameters, and the cells a column's value becomes
//! (one cell, or per element for non-frozen collections and UDTs).

use super::*;

pub(super) struct WriteParams {
    pub(super) timestamp_micros: i64,
    pub(super) ttl_secs: i32,
    /// Milliseconds since the epoch; 0 = never.
    pub(super) expiry_ms: i64,
    /// The statement's time (`eval::Ctx::now_micros`): expiries count from it, tombstones
    /// take their local deletion time from it.
    pub(super) now_micros: i64,
}

impl WriteParams {
    pub(super) fn now_secs(&self) -> i32 {
        (self.now_micros / 1_000_000) as i32
    }
}

/// The value of `USING TIMESTAMP t` (None: bound unset, the default applies). Long.MIN_VALUE
/// is refused as Cassandra's UpdateParameters does: it means "no timestamp" internally.
pub(super) fn using_timestamp(t: &Term, ctx: &Ctx) -> Result<Option<i64>> {
    match eval(t, &CqlType::Bigint, "[timestamp]", ctx)? {
        Val::Value(b) if b.len() == 8 => match i64::from_be_bytes(b[..].try_into().expect("8")) {
            i64::MIN => Err(invalid(format!(
                "Out of bound timestamp, must be in [{}, {}]",
                i64::MIN + 1,
                i64::MAX
            ))),
            ts => Ok(Some(ts)),
        },
        Val::Unset => Ok(None),
        _ => Err(invalid("Invalid null value of timestamp")),
    }
}

pub(super) fn using_params(
    table: &TableDef,
    using: &Using,
    ctx: &Ctx,
    default_ts: i64,
) -> Result<WriteParams> {
    let ts = match &using.timestamp {
        Some(t) => using_timestamp(t, ctx)?.unwrap_or(default_ts),
        None => default_ts,
    };
    let ttl: i64 = match &using.ttl {
        Some(t) => match eval(t, &CqlType::Int, "[ttl]", ctx)? {
            Val::Value(b) if b.len() == 4 => {
                i32::from_be_bytes(b[..].try_into().expect("4")) as i64
            }
            Val::Unset => table.options.default_time_to_live as i64,
            _ => return Err(invalid("Invalid null value of TTL")),
        },
        None => table.options.default_time_to_live as i64,
    };
    if ttl < 0 {
        return Err(invalid(format!(
            "A TTL must be greater or equal to 0, but was {ttl}"
        )));
    }
    if ttl > MAX_TTL {
        return Err(invalid(format!(
            "ttl is too large. requested ({ttl}) maximum ({MAX_TTL})"
        )));
    }
    // The deadline in milliseconds, rounded up: a cell is gone exactly when its TTL has elapsed
    // and never before.
    let expiry = if ttl == 0 {
        0
    } else {
        (ctx.now_micros + 999).div_euclid(1000) + ttl * 1000
    };
    Ok(WriteParams {
        timestamp_micros: ts,
        ttl_secs: ttl as i32,
        expiry_ms: expiry,
        now_micros: ctx.now_micros,
    })
}

pub(super) fn cell_for(col: u32, v: Val, p: &WriteParams) -> Option<Cell> {
    match v {
        Val::Unset => None,
        Val::Null => Some(Cell {
            col,
            timestamp_micros: p.timestamp_micros,
            ttl_secs: 0,
            expiry_ms: 0,
            value: None,
            deletion_secs: p.now_secs(),
        }),
        Val::Value(b) => Some(Cell {
            col,
            timestamp_micros: p.timestamp_micros,
            ttl_secs: p.ttl_secs,
            expiry_ms: p.expiry_ms,
            value: Some(b),
            deletion_secs: 0,
        }),
    }
}

pub(super) fn elem_params(p: &WriteParams) -> ElemParams {
    ElemParams {
        timestamp_micros: p.timestamp_micros,
        ttl_secs: p.ttl_secs,
        expiry_ms: p.expiry_ms,
        now: p.now_micros.div_euclid(1000),
    }
}

/// Adds the write of a whole value of column `col` to `upd`: one cell, or for a non-frozen
/// collection or UDT a collection deletion just below the write and one cell per element.
pub(super) fn put_column(upd: &mut RowData, col: &ColumnDef, v: Val, p: &WriteParams) {
    if !col.ty.is_multi_cell() {
        upd.cells.extend(cell_for(col.id, v, p));
        return;
    }
    let now = p.now_secs();
    let (deletion_ts, elems) = match v {
        Val::Unset => return,
        Val::Null => (p.timestamp_micros, Vec::new()),
        Val::Value(b) => (
            p.timestamp_micros.saturating_sub(1),
            complex::elems_of_value(&col.ty, &b, &elem_params(p)),
        ),
    };
    upd.complex.push(ComplexCell {
        col: col.id,
        deletion: Some((deletion_ts, now)),
        elems,
    });
}

/// Adds elements (or element tombstones) to column `col`'s complex cell in `upd`.
pub(super) fn put_elems(upd: &mut RowData, col: u32, elems: Vec<Elem>) {
    match upd.complex.iter_mut().find(|c| c.col == col) {
        Some(c) => {
            let merged = ComplexCell {
                col,
                deletion: None,
                elems,
            };
            let mut cur = std::mem::take(c);
            cur.col = col;
            // later assignments of one statement win over earlier ones at the same timestamp
            for e in merged.elems {
                match cur.elems.binary_search_by(|x| x.path.cmp(&e.path)) {
                    Ok(i) => cur.elems[i] = e,
                    Err(i) => cur.elems.insert(i, e),
                }
            }
            *c = cur;
        }
        None => {
            let mut elems = elems;
            elems.sort_by(|a, b| a.path.cmp(&b.path));
            upd.complex.push(ComplexCell {
                col,
                deletion: None,
                elems,
            });
        }
    }
}

pub(super) fn sort_update(upd: &mut RowData) {
    upd.cells.sort_by_key(|c| c.col);
    upd.complex.sort_by_key(|c| c.col);
}

pub(super) fn reject_counter_table(table: &TableDef, what: &str) -> Result<()> {
    if table.is_counter_table() {
        return Err(invalid(format!(
            "{what} statements are not allowed on counter tables, use UPDATE instead"
        )));
    }
    Ok(())
}
