//! Table options with a structure (compression, caching, speculative retry, compaction
//! sub-options, bloom filter chance), validated and normalised as Cassandra 5.0's
//! `CompressionParams`, `CachingParams`, `SpeculativeRetryPolicy`, compaction strategies'
//! `validateOptions` and `TableParams.validate` do, with their messages: drivers and tools match
//! on them, and the stored form is the one Cassandra stores (DESCRIBE and system_schema show it).

use super::*;

/// Bloom filters cannot be built below this false-positive chance (Cassandra's
/// `BloomCalculations.minSupportedBloomFilterFpChance()`, the last entry of its table).
const MIN_BLOOM_FP_CHANCE: f64 = 6.71e-05;

pub(super) fn bloom_filter_fp_chance(x: f64) -> Result<f64, SchemaError> {
    if x <= MIN_BLOOM_FP_CHANCE || x > 1.0 {
        return Err(config(format!(
            "bloom_filter_fp_chance must be larger than {} and less than or equal to 1.0 (got {})",
            java_double(MIN_BLOOM_FP_CHANCE),
            java_double(x)
        )));
    }
    Ok(x)
}

/// `max_index_interval` against `min_index_interval`, checked on the resulting options (a
/// statement may set either one).
pub(super) fn check_index_intervals(opts: &TableOptions) -> Result<(), SchemaError> {
    if opts.max_index_interval < opts.min_index_interval {
        return Err(config(format!(
            "max_index_interval must be greater than or equal to min_index_interval ({}) (got {})",
            opts.min_index_interval, opts.max_index_interval
        )));
    }
    Ok(())
}

const COMPRESSION_PACKAGE: &str = "org.apache.cassandra.io.compress.";

/// The compressors Cassandra 5.0 ships and the options each understands.
fn compressor_options(class: &str) -> Option<&'static [&'static str]> {
    Some(match class.strip_prefix(COMPRESSION_PACKAGE)? {
        "LZ4Compressor" => &["lz4_compressor_type", "lz4_high_compressor_level"],
        "ZstdCompressor" => &["compression_level"],
        "SnappyCompressor" | "DeflateCompressor" | "NoopCompressor" => &[],
        _ => return None,
    })
}

/// `compression = {...}` as `CompressionParams.fromMap`: `enabled: false` alone disables it;
/// otherwise a class is required, known options only, `chunk_length_in_kb` a power of two;
/// stored with the class's full name and the chunk length.
pub(super) fn compression_params(
    mut m: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, SchemaError> {
    let enabled = m
        .remove("enabled")
        .is_none_or(|v| v.eq_ignore_ascii_case("true"));
    if !enabled {
        if !m.is_empty() {
            return Err(config(
                "If the 'enabled' option is set to false no other options must be specified",
            ));
        }
        return Ok(BTreeMap::from([("enabled".into(), "false".into())]));
    }
    let Some(class) = m.remove("class") else {
        return Err(config(
            "Missing sub-option 'class' for the 'compression' option.",
        ));
    };
    if class.is_empty() {
        return Err(config(
            "The 'class' option must not be empty. To disable compression use 'enabled' : false",
        ));
    }
    let chunk_kb = match m.remove("chunk_length_in_kb") {
        None => 16,
        Some(s) => match s.parse::<i32>() {
            Ok(n) if n > i32::MAX / 1024 => {
                return Err(config(format!(
                    "Value of chunk_length_in_kb is too large ({n})"
                )))
            }
            Ok(n) => n,
            Err(_) => return Err(config("Invalid value for chunk_length_in_kb")),
        },
    };
    let min_ratio = m.remove("min_compress_ratio");
    let full = if class.contains('.') {
        class
    } else {
        format!("{COMPRESSION_PACKAGE}{class}")
    };
    let Some(known) = compressor_options(&full) else {
        return Err(config(format!(
            "Could not create Compression for type {full}"
        )));
    };
    if let Some(unknown) = m.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(config(format!("Unknown compression options {unknown}")));
    }
    if chunk_kb <= 0 {
        return Err(config("Invalid negative or null chunk_length_in_kb"));
    }
    if chunk_kb & (chunk_kb - 1) != 0 {
        return Err(config("chunk_length_in_kb must be a power of 2"));
    }
    if let Some(r) = min_ratio {
        let x: f64 = r
            .parse()
            .map_err(|_| config(format!("Invalid value for min_compress_ratio: {r}")))?;
        if x < 0.0 {
            return Err(config("Invalid negative min_compress_ratio"));
        }
        if x > 0.0 && x < 1.0 {
            return Err(config(
                "min_compress_ratio can either be 0 or greater than or equal to 1",
            ));
        }
        if x != 0.0 {
            m.insert("min_compress_ratio".into(), java_double(x));
        }
    }
    m.insert("class".into(), full);
    m.insert("chunk_length_in_kb".into(), chunk_kb.to_string());
    Ok(m)
}

/// `caching = {...}` as `CachingParams.fromMap`: `keys` ALL or NONE (absent: NONE),
/// `rows_per_partition` ALL, NONE or a count; stored as both keys.
pub(super) fn caching_params(
    mut m: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, SchemaError> {
    let keys = match m.remove("keys") {
        None => "NONE",
        Some(v) if v.eq_ignore_ascii_case("ALL") => "ALL",
        Some(v) if v.eq_ignore_ascii_case("NONE") => "NONE",
        Some(v) => {
            return Err(config(format!(
            "Invalid value '{v}' for caching sub-option 'keys': only 'ALL' and 'NONE' are allowed"
        )))
        }
    };
    let rows = match m.remove("rows_per_partition") {
        None => "NONE".to_string(),
        Some(v) if v.eq_ignore_ascii_case("ALL") => "ALL".into(),
        Some(v) if v.eq_ignore_ascii_case("NONE") => "NONE".into(),
        Some(v) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => {
            match v.parse::<i32>() {
                Ok(0) => "NONE".into(),
                Ok(i32::MAX) => "ALL".into(),
                Ok(n) => n.to_string(),
                Err(_) => return Err(config(format!("For input string: \"{v}\""))),
            }
        }
        Some(v) => {
            return Err(config(format!(
                "Invalid value '{v}' for caching sub-option 'rows_per_partition': only 'ALL', 'NONE', and integer values are allowed"
            )))
        }
    };
    if !m.is_empty() {
        let names: Vec<&str> = m.keys().map(String::as_str).collect();
        return Err(config(format!(
            "Invalid caching sub-options [{}]: only 'keys' and 'rows_per_partition' are allowed",
            names.join(", ")
        )));
    }
    Ok(BTreeMap::from([
        ("keys".into(), keys.into()),
        ("rows_per_partition".into(), rows),
    ]))
}

/// One speculative retry policy, as `SpeculativeRetryPolicy.fromString` reads it.
#[derive(Clone, Copy, PartialEq)]
enum Retry {
    Always,
    Never,
    Percentile(f64),
    FixedMs(i64),
}

impl Retry {
    fn kind(self) -> &'static str {
        match self {
            Retry::Always => "ALWAYS",
            Retry::Never => "NEVER",
            Retry::Percentile(_) => "PERCENTILE",
            Retry::FixedMs(_) => "FIXED",
        }
    }

    /// Cassandra's stored form: `99p` (at most 4 decimals), `10ms`, `ALWAYS`, `NEVER`.
    fn text(self) -> String {
        match self {
            Retry::Always | Retry::Never => self.kind().into(),
            Retry::Percentile(p) => {
                let s = format!("{p:.4}");
                format!("{}p", s.trim_end_matches('0').trim_end_matches('.'))
            }
            Retry::FixedMs(ms) => format!("{ms}ms"),
        }
    }
}

/// `[0-9.]+` followed by one of `suffixes` (ASCII case-insensitive): the number text.
fn number_with_suffix<'a>(s: &'a str, suffixes: &[&str]) -> Option<&'a str> {
    let digits = s
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b'.')
        .count();
    let rest = &s[digits..];
    (digits > 0 && suffixes.iter().any(|x| rest.eq_ignore_ascii_case(x))).then(|| &s[..digits])
}

fn retry_invalid(s: &str) -> SchemaError {
    config(format!("Invalid value {s} for option 'speculative_retry'"))
}

fn parse_retry(s: &str) -> Result<Retry, SchemaError> {
    if s.eq_ignore_ascii_case("ALWAYS") {
        return Ok(Retry::Always);
    }
    if s.eq_ignore_ascii_case("NEVER") || s.eq_ignore_ascii_case("NONE") {
        return Ok(Retry::Never);
    }
    if let Some(n) = number_with_suffix(s, &["p", "percentile"]) {
        let p: f64 = n.parse().map_err(|_| retry_invalid(s))?;
        if p <= 0.0 || p >= 100.0 {
            return Err(config(format!(
                "Invalid value {s} for PERCENTILE option 'speculative_retry': must be between (0.0 and 100.0)"
            )));
        }
        return Ok(Retry::Percentile(p));
    }
    if let Some(n) = number_with_suffix(s, &["ms"]) {
        let ms: f64 = n.parse().map_err(|_| retry_invalid(s))?;
        // Cassandra parses a double and keeps its int part.
        return Ok(Retry::FixedMs(
            ms.clamp(i32::MIN as f64, i32::MAX as f64) as i64
        ));
    }
    Err(retry_invalid(s))
}

/// `MIN(a, b)` / `MAX(a, b)`: the function's name and the two argument texts.
fn hybrid_parts(s: &str) -> Option<(&str, &str, &str)> {
    let open = s.find('(')?;
    let fun = &s[..open];
    if !(fun.eq_ignore_ascii_case("MIN") || fun.eq_ignore_ascii_case("MAX")) {
        return None;
    }
    let inner = s[open + 1..].strip_suffix(')')?;
    let (a, b) = inner.split_once(',')?;
    let arg = |x: &str| {
        let digits = x
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        let unit = &x[digits..];
        digits > 0 && !unit.is_empty() && unit.bytes().all(|b| b.is_ascii_alphabetic())
    };
    let (a, b) = (a.trim_end(), b.trim_start());
    (arg(a) && arg(b)).then_some((fun, a, b))
}

/// `speculative_retry` / `additional_write_policy`: validated, in Cassandra's stored form.
pub(super) fn speculative_retry(s: &str) -> Result<String, SchemaError> {
    if let Some((fun, a, b)) = hybrid_parts(s) {
        let (x, y) = match (parse_retry(a), parse_retry(b)) {
            (Ok(x), Ok(y)) => (x, y),
            _ => return Err(retry_invalid(s)),
        };
        if x.kind() == y.kind() {
            return Err(config(format!(
                "Invalid value {s} for option 'speculative_retry': MIN()/MAX() arguments should be of different types, but both are of type {}",
                x.kind()
            )));
        }
        let (p, f) = if matches!(x, Retry::Percentile(_)) {
            (x, y)
        } else {
            (y, x)
        };
        return Ok(format!(
            "{}({},{})",
            fun.to_ascii_uppercase(),
            p.text(),
            f.text()
        ));
    }
    parse_retry(s).map(Retry::text)
}

/// Sub-options every compaction strategy understands (`AbstractCompactionStrategy` and
/// `CompactionParams`).
const COMMON_COMPACTION_OPTIONS: [&str; 9] = [
    "enabled",
    "tombstone_threshold",
    "tombstone_compaction_interval",
    "unchecked_tombstone_compaction",
    "log_all",
    "only_purge_repaired_tombstones",
    "provide_overlapping_tombstones",
    "min_threshold",
    "max_threshold",
];
const SIZE_TIERED_OPTIONS: [&str; 3] = ["min_sstable_size", "bucket_low", "bucket_high"];

/// The sub-options a strategy (short name) understands beyond the common ones.
fn strategy_options(short: &str) -> Vec<&'static str> {
    let mut v: Vec<&str> = Vec::new();
    match short {
        "SizeTieredCompactionStrategy" => v.extend(SIZE_TIERED_OPTIONS),
        "LeveledCompactionStrategy" => {
            v.extend([
                "sstable_size_in_mb",
                "fanout_size",
                "single_sstable_uplevel",
            ]);
            v.extend(SIZE_TIERED_OPTIONS);
        }
        "TimeWindowCompactionStrategy" => {
            v.extend([
                "compaction_window_unit",
                "compaction_window_size",
                "timestamp_resolution",
                "expired_sstable_check_frequency_seconds",
                "unsafe_aggressive_sstable_expiration",
            ]);
            v.extend(SIZE_TIERED_OPTIONS);
        }
        "UnifiedCompactionStrategy" => v.extend([
            "scaling_parameters",
            "min_sstable_size",
            "flush_size_override",
            "base_shard_count",
            "target_sstable_size",
            "sstable_growth",
            "max_sstables_to_compact",
            "expired_sstable_check_frequency_seconds",
            "unsafe_aggressive_sstable_expiration",
            "overlap_inclusion_method",
            "max_space_overhead",
        ]),
        _ => {}
    }
    v
}

/// Refuses sub-options the strategy does not understand (`class` excluded).
pub(super) fn check_compaction_options(
    short: &str,
    m: &BTreeMap<String, String>,
) -> Result<(), SchemaError> {
    let known = strategy_options(short);
    let unknown: Vec<&str> = m
        .keys()
        .map(String::as_str)
        .filter(|k| *k != "class" && !COMMON_COMPACTION_OPTIONS.contains(k) && !known.contains(k))
        .collect();
    if !unknown.is_empty() {
        return Err(config(format!(
            "Properties specified [{}] are not understood by {short}",
            unknown.join(", ")
        )));
    }
    Ok(())
}
