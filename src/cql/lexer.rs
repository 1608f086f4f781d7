//! CQL lexer: turns statement text into tokens that borrow nothing and copy nothing.
//!
//! A token is its kind plus its byte span in the source, with the line (1-based) and column
//! (0-based, in characters) where it starts. Identifier and string contents are sliced out of the
//! source by the parser only when it builds the syntax tree, so lexing allocates nothing but the
//! token vector itself.
//!
//! The rules follow Cassandra's `Lexer.g`: keywords are case-insensitive, `true`/`false` are
//! booleans, `NaN` and `Infinity` are keywords, unquoted identifiers are ASCII letters, digits
//! and `_` starting with a letter, durations (`1h30m`, `P1DT2H`, `P0001-02-03T04:05:06`) and
//! uuids (unquoted `8-4-4-4-12` hex) are single tokens. One deliberate difference: `-` is always
//! its own token (Cassandra folds it into integer and float tokens); the parser folds `-` that
//! precedes a numeric literal into that literal, so `c - 1` and `c -1` both mean subtraction.

/// Declares the keywords: the enum, the name ANTLR gives the token in error messages, whether
/// Cassandra's grammar reserves it (a reserved keyword can't be an unquoted identifier) and the
/// words (lower case) that lex as it.
macro_rules! keywords {
    ($($variant:ident $name:literal $reserved:literal [$($word:literal)|+];)*) => {
        /// A CQL keyword.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Kw {
            $($variant,)*
        }

        impl Kw {
            /// The token name Cassandra's parser uses in messages: `K_FROM`.
            pub fn antlr_name(self) -> &'static str {
                match self {
                    $(Kw::$variant => $name,)*
                }
            }

            /// True when the grammar reserves the keyword: it cannot name anything unquoted.
            pub fn is_reserved(self) -> bool {
                match self {
                    $(Kw::$variant => $reserved,)*
                }
            }
        }

        fn lookup_lower(word: &[u8]) -> Option<Kw> {
            match word {
                $($($word)|+ => Some(Kw::$variant),)*
                _ => None,
            }
        }
    };
}

keywords! {
    // Reserved by the grammar (not in its `unreserved_keyword` rule).
    Add "K_ADD" true [b"add"];
    Allow "K_ALLOW" true [b"allow"];
    Alter "K_ALTER" true [b"alter"];
    And "K_AND" true [b"and"];
    Apply "K_APPLY" true [b"apply"];
    Asc "K_ASC" true [b"asc"];
    Authorize "K_AUTHORIZE" true [b"authorize"];
    Batch "K_BATCH" true [b"batch"];
    Begin "K_BEGIN" true [b"begin"];
    By "K_BY" true [b"by"];
    ColumnFamily "K_COLUMNFAMILY" true [b"columnfamily" | b"table"];
    Create "K_CREATE" true [b"create"];
    Delete "K_DELETE" true [b"delete"];
    Desc "K_DESC" true [b"desc"];
    Describe "K_DESCRIBE" true [b"describe"];
    Drop "K_DROP" true [b"drop"];
    Entries "K_ENTRIES" true [b"entries"];
    Execute "K_EXECUTE" true [b"execute"];
    From "K_FROM" true [b"from"];
    Full "K_FULL" true [b"full"];
    Grant "K_GRANT" true [b"grant"];
    If "K_IF" true [b"if"];
    In "K_IN" true [b"in"];
    Index "K_INDEX" true [b"index"];
    Infinity "K_POSITIVE_INFINITY" true [b"infinity"];
    Insert "K_INSERT" true [b"insert"];
    Into "K_INTO" true [b"into"];
    Is "K_IS" true [b"is"];
    Keyspace "K_KEYSPACE" true [b"keyspace"];
    Limit "K_LIMIT" true [b"limit"];
    Materialized "K_MATERIALIZED" true [b"materialized"];
    Modify "K_MODIFY" true [b"modify"];
    Nan "K_POSITIVE_NAN" true [b"nan"];
    Norecursive "K_NORECURSIVE" true [b"norecursive"];
    Not "K_NOT" true [b"not"];
    Null "K_NULL" true [b"null"];
    Of "K_OF" true [b"of"];
    On "K_ON" true [b"on"];
    Or "K_OR" true [b"or"];
    Order "K_ORDER" true [b"order"];
    Primary "K_PRIMARY" true [b"primary"];
    Rename "K_RENAME" true [b"rename"];
    Revoke "K_REVOKE" true [b"revoke"];
    Schema "K_SCHEMA" true [b"schema"];
    Select "K_SELECT" true [b"select"];
    Set "K_SET" true [b"set"];
    To "K_TO" true [b"to"];
    Token "K_TOKEN" true [b"token"];
    Truncate "K_TRUNCATE" true [b"truncate"];
    Unlogged "K_UNLOGGED" true [b"unlogged"];
    Update "K_UPDATE" true [b"update"];
    Use "K_USE" true [b"use"];
    Using "K_USING" true [b"using"];
    View "K_VIEW" true [b"view"];
    Where "K_WHERE" true [b"where"];
    With "K_WITH" true [b"with"];
    // Keywords the parser looks for that remain usable as names.
    Aggregate "K_AGGREGATE" false [b"aggregate"];
    Aggregates "K_AGGREGATES" false [b"aggregates"];
    As "K_AS" false [b"as"];
    Cast "K_CAST" false [b"cast"];
    Cluster "K_CLUSTER" false [b"cluster"];
    Clustering "K_CLUSTERING" false [b"clustering"];
    Compact "K_COMPACT" false [b"compact"];
    Contains "K_CONTAINS" false [b"contains"];
    Count "K_COUNT" false [b"count"];
    Counter "K_COUNTER" false [b"counter"];
    Custom "K_CUSTOM" false [b"custom"];
    Default "K_DEFAULT" false [b"default"];
    Distinct "K_DISTINCT" false [b"distinct"];
    Exists "K_EXISTS" false [b"exists"];
    Filtering "K_FILTERING" false [b"filtering"];
    Frozen "K_FROZEN" false [b"frozen"];
    Function "K_FUNCTION" false [b"function"];
    Functions "K_FUNCTIONS" false [b"functions"];
    Group "K_GROUP" false [b"group"];
    Internals "K_INTERNALS" false [b"internals"];
    Json "K_JSON" false [b"json"];
    Key "K_KEY" false [b"key"];
    Keys "K_KEYS" false [b"keys"];
    Keyspaces "K_KEYSPACES" false [b"keyspaces"];
    Like "K_LIKE" false [b"like"];
    List "K_LIST" false [b"list"];
    Map "K_MAP" false [b"map"];
    Maxwritetime "K_MAXWRITETIME" false [b"maxwritetime"];
    Only "K_ONLY" false [b"only"];
    Partition "K_PARTITION" false [b"partition"];
    Per "K_PER" false [b"per"];
    Static "K_STATIC" false [b"static"];
    Storage "K_STORAGE" false [b"storage"];
    Tables "K_TABLES" false [b"tables" | b"columnfamilies"];
    Timestamp "K_TIMESTAMP" false [b"timestamp"];
    Ttl "K_TTL" false [b"ttl"];
    Tuple "K_TUPLE" false [b"tuple"];
    Type "K_TYPE" false [b"type"];
    Types "K_TYPES" false [b"types"];
    Unset "K_UNSET" false [b"unset"];
    Values "K_VALUES" false [b"values"];
    Vector "K_VECTOR" false [b"vector"];
    Writetime "K_WRITETIME" false [b"writetime"];
}

/// The longest keyword (`columnfamilies`).
const MAX_KEYWORD_LEN: usize = 14;

/// The keyword `word` spells, in any case.
pub fn keyword(word: &[u8]) -> Option<Kw> {
    if word.len() < 2 || word.len() > MAX_KEYWORD_LEN {
        return None;
    }
    let mut buf = [0u8; MAX_KEYWORD_LEN];
    for (d, s) in buf.iter_mut().zip(word) {
        *d = s.to_ascii_lowercase();
    }
    lookup_lower(&buf[..word.len()])
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// An unquoted identifier that is not a keyword.
    Ident,
    Keyword(Kw),
    /// `"Name"` (span includes the quotes; `""` inside stands for `"`).
    QuotedName,
    /// `""`
    EmptyQuotedName,
    /// `'text'` (span includes the quotes; `''` inside stands for `'`).
    String,
    /// `$$text$$` (span includes the dollars).
    DollarString,
    Integer,
    Float,
    /// `true` / `false` in any case.
    Boolean,
    Duration,
    Uuid,
    /// `0x...`
    Hex,
    /// `?`
    Qmark,
    Colon,
    Comma,
    Semicolon,
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Dot,
    /// `..`
    Range,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    PlusEq,
    MinusEq,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// End of input; always the last token unless lexing failed.
    Eof,
    /// Lexing stopped here; the error is in `Lexed::error`. Always the last token when present.
    Error,
}

impl TokenKind {
    /// The name Cassandra's grammar gives the token, as used in `expecting ...` messages.
    pub fn antlr_name(self) -> &'static str {
        use TokenKind as T;
        match self {
            T::Ident => "IDENT",
            T::Keyword(k) => k.antlr_name(),
            T::QuotedName => "QUOTED_NAME",
            T::EmptyQuotedName => "EMPTY_QUOTED_NAME",
            T::String | T::DollarString => "STRING_LITERAL",
            T::Integer => "INTEGER",
            T::Float => "FLOAT",
            T::Boolean => "BOOLEAN",
            T::Duration => "DURATION",
            T::Uuid => "UUID",
            T::Hex => "HEXNUMBER",
            T::Qmark => "QMARK",
            T::Colon => "':'",
            T::Comma => "','",
            T::Semicolon => "';'",
            T::LParen => "'('",
            T::RParen => "')'",
            T::LBracket => "'['",
            T::RBracket => "']'",
            T::LBrace => "'{'",
            T::RBrace => "'}'",
            T::Dot => "'.'",
            T::Range => "RANGE",
            T::Plus => "'+'",
            T::Minus => "'-'",
            T::Star => "'*'",
            T::Slash => "'/'",
            T::Percent => "'%'",
            T::PlusEq => "'+='",
            T::MinusEq => "'-='",
            T::Eq => "'='",
            T::Ne => "'!='",
            T::Lt => "'<'",
            T::Le => "'<='",
            T::Gt => "'>'",
            T::Ge => "'>='",
            T::Eof => "EOF",
            T::Error => "<invalid>",
        }
    }
}

/// One token: kind, byte span `start..end` in the source, and where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub kind: TokenKind,
    pub start: u32,
    pub end: u32,
    /// 1-based line.
    pub line: u32,
    /// 0-based column, in characters.
    pub col: u32,
}

impl Token {
    /// The token's text as written.
    pub fn text<'a>(&self, src: &'a str) -> &'a str {
        &src[self.start as usize..self.end as usize]
    }
}

/// A lexing failure, positioned where Cassandra's lexer reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError {
    pub line: usize,
    pub col: usize,
    /// `mismatched character '<EOF>' expecting '''`, `no viable alternative at character '&'`.
    pub message: String,
}

/// The tokens of a text. The last token is `Eof`, or `Error` when `error` is set (tokens before
/// the error are kept so that a parser error earlier in the text can win, as in Cassandra).
#[derive(Debug, Clone)]
pub struct Lexed {
    pub tokens: Vec<Token>,
    pub error: Option<LexError>,
}

/// Splits `src` into tokens.
pub fn tokenize(src: &str) -> Lexed {
    let mut lexer = Lexer {
        src,
        b: src.as_bytes(),
        pos: 0,
        lc_pos: 0,
        line: 1,
        col: 0,
        tokens: Vec::with_capacity(src.len() / 4 + 2),
    };
    let error = lexer.run();
    Lexed {
        tokens: lexer.tokens,
        error,
    }
}

struct Lexer<'a> {
    src: &'a str,
    b: &'a [u8],
    pos: usize,
    /// Line and column are computed by catching up from `lc_pos` to each token start: every byte
    /// is looked at once more, which is cheaper than tracking them in every scanning loop.
    lc_pos: usize,
    line: u32,
    col: u32,
    tokens: Vec<Token>,
}

/// What a scanning step found wrong: the byte offset and the message.
type Fail = (usize, String);

impl Lexer<'_> {
    fn run(&mut self) -> Option<LexError> {
        if self.b.len() >= u32::MAX as usize {
            self.push(TokenKind::Error, 0, 0);
            return Some(LexError {
                line: 1,
                col: 0,
                message: "query too large".to_string(),
            });
        }
        loop {
            let step = self.skip_trivia().and_then(|()| self.next_token());
            match step {
                Ok(true) => {}
                Ok(false) => {
                    let end = self.b.len();
                    self.push(TokenKind::Eof, end, end);
                    return None;
                }
                Err((at, message)) => {
                    let (line, col) = self.position(at);
                    self.push(TokenKind::Error, at, at);
                    return Some(LexError {
                        line: line as usize,
                        col: col as usize,
                        message,
                    });
                }
            }
        }
    }

    fn position(&mut self, at: usize) -> (u32, u32) {
        for &c in &self.b[self.lc_pos..at] {
            if c == b'\n' {
                self.line += 1;
                self.col = 0;
            } else if c & 0xC0 != 0x80 {
                self.col += 1;
            }
        }
        self.lc_pos = at;
        (self.line, self.col)
    }

    fn push(&mut self, kind: TokenKind, start: usize, end: usize) {
        let (line, col) = self.position(start);
        self.tokens.push(Token {
            kind,
            start: start as u32,
            end: end as u32,
            line,
            col,
        });
    }

    fn at(&self, i: usize) -> u8 {
        self.b.get(i).copied().unwrap_or(0)
    }

    /// Skips whitespace and comments (`-- ...`, `// ...`, `/* ... */`).
    fn skip_trivia(&mut self) -> Result<(), Fail> {
        loop {
            match self.at(self.pos) {
                b' ' | b'\t' | b'\n' | b'\r' => self.pos += 1,
                b'-' if self.at(self.pos + 1) == b'-' => self.skip_line(),
                b'/' if self.at(self.pos + 1) == b'/' => self.skip_line(),
                b'/' if self.at(self.pos + 1) == b'*' => match find(self.b, self.pos + 2, b"*/") {
                    Some(i) => self.pos = i + 2,
                    None => return Err(eof_expecting(self.b.len(), '*')),
                },
                _ => return Ok(()),
            }
        }
    }

    fn skip_line(&mut self) {
        self.pos = self.b[self.pos..]
            .iter()
            .position(|&c| c == b'\n' || c == b'\r')
            .map_or(self.b.len(), |i| self.pos + i + 1);
    }

    /// Lexes one token at `pos`; false at the end of input.
    fn next_token(&mut self) -> Result<bool, Fail> {
        use TokenKind as T;
        let start = self.pos;
        let Some(&c) = self.b.get(start) else {
            return Ok(false);
        };
        let next = self.at(start + 1);
        let (kind, end) = match c {
            b'\'' => (T::String, self.quoted(start, b'\'')?),
            b'"' => {
                let end = self.quoted(start, b'"')?;
                let kind = if end == start + 2 {
                    T::EmptyQuotedName
                } else {
                    T::QuotedName
                };
                (kind, end)
            }
            b'$' => {
                if next != b'$' {
                    return Err(mismatched_char(self.src, start + 1, '$'));
                }
                match find(self.b, start + 2, b"$$") {
                    Some(i) => (T::DollarString, i + 2),
                    None => return Err(eof_expecting(self.b.len(), '$')),
                }
            }
            b'0'..=b'9' => self.number(start),
            b'a'..=b'z' | b'A'..=b'Z' => self.word(start),
            b'?' => (T::Qmark, start + 1),
            b':' => (T::Colon, start + 1),
            b',' => (T::Comma, start + 1),
            b';' => (T::Semicolon, start + 1),
            b'(' => (T::LParen, start + 1),
            b')' => (T::RParen, start + 1),
            b'[' => (T::LBracket, start + 1),
            b']' => (T::RBracket, start + 1),
            b'{' => (T::LBrace, start + 1),
            b'}' => (T::RBrace, start + 1),
            b'.' if next == b'.' => (T::Range, start + 2),
            b'.' => (T::Dot, start + 1),
            b'+' if next == b'=' => (T::PlusEq, start + 2),
            b'+' => (T::Plus, start + 1),
            b'-' if next == b'=' => (T::MinusEq, start + 2),
            b'-' => (T::Minus, start + 1),
            b'*' => (T::Star, start + 1),
            b'/' => (T::Slash, start + 1),
            b'%' => (T::Percent, start + 1),
            b'=' => (T::Eq, start + 1),
            b'!' if next == b'=' => (T::Ne, start + 2),
            b'!' => return Err(mismatched_char(self.src, start + 1, '=')),
            b'<' if next == b'=' => (T::Le, start + 2),
            b'<' => (T::Lt, start + 1),
            b'>' if next == b'=' => (T::Ge, start + 2),
            b'>' => (T::Gt, start + 1),
            _ => {
                return Err((
                    start,
                    format!(
                        "no viable alternative at character {}",
                        char_display(self.src, start)
                    ),
                ))
            }
        };
        self.push(kind, start, end);
        self.pos = end;
        Ok(true)
    }

    /// A `'...'` string or `"..."` name starting at `start`, with the quote doubled as escape.
    /// Returns the end (after the closing quote).
    fn quoted(&self, start: usize, quote: u8) -> Result<usize, Fail> {
        let mut i = start + 1;
        loop {
            match self.b[i..].iter().position(|&c| c == quote) {
                None => return Err(eof_expecting(self.b.len(), quote as char)),
                Some(off) => {
                    let q = i + off;
                    if self.at(q + 1) == quote {
                        i = q + 2;
                    } else {
                        return Ok(q + 1);
                    }
                }
            }
        }
    }

    /// A token starting with a digit: uuid, hex blob, duration, float or integer.
    fn number(&self, start: usize) -> (TokenKind, usize) {
        use TokenKind as T;
        let b = self.b;
        if is_uuid_at(b, start) {
            return (T::Uuid, start + 36);
        }
        if b[start] == b'0' && matches!(self.at(start + 1), b'x' | b'X') {
            let mut i = start + 2;
            while self.at(i).is_ascii_hexdigit() {
                i += 1;
            }
            return (T::Hex, i);
        }
        let mut i = digits_end(b, start);
        if let Some(unit) = duration_unit_len(b, i) {
            // (DIGIT+ UNIT)+
            let mut end = i + unit;
            loop {
                let d = digits_end(b, end);
                if d == end {
                    break;
                }
                match duration_unit_len(b, d) {
                    Some(unit) => end = d + unit,
                    None => break,
                }
            }
            return (T::Duration, end);
        }
        let mut float = false;
        if self.at(i) == b'.' && self.at(i + 1) != b'.' {
            float = true;
            i = digits_end(b, i + 1);
        }
        if matches!(self.at(i), b'e' | b'E') {
            let mut j = i + 1;
            if matches!(self.at(j), b'+' | b'-') {
                j += 1;
            }
            let d = digits_end(b, j);
            if d > j {
                float = true;
                i = d;
            }
        }
        (if float { T::Float } else { T::Integer }, i)
    }

    /// A token starting with a letter: uuid, ISO duration, boolean, keyword or identifier.
    fn word(&self, start: usize) -> (TokenKind, usize) {
        use TokenKind as T;
        let b = self.b;
        if b[start].is_ascii_hexdigit() && is_uuid_at(b, start) {
            return (T::Uuid, start + 36);
        }
        let mut end = start + 1;
        while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
            end += 1;
        }
        if b[start] == b'P' {
            // ANTLR takes the longest match and, on a tie, DURATION (declared before IDENT).
            if let Some(d) = iso_duration_end(b, start) {
                if d >= end {
                    return (T::Duration, d);
                }
            }
        }
        let word = &b[start..end];
        if word.eq_ignore_ascii_case(b"true") || word.eq_ignore_ascii_case(b"false") {
            return (T::Boolean, end);
        }
        match keyword(word) {
            Some(kw) => (T::Keyword(kw), end),
            None => (T::Ident, end),
        }
    }
}

fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if from > b.len() {
        return None;
    }
    b[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| from + i)
}

fn digits_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    i
}

fn is_uuid_at(b: &[u8], p: usize) -> bool {
    let Some(s) = b.get(p..p + 36) else {
        return false;
    };
    if s[8] != b'-' {
        return false;
    }
    s.iter().enumerate().all(|(i, &c)| match i {
        8 | 13 | 18 | 23 => c == b'-',
        _ => c.is_ascii_hexdigit(),
    })
}

/// Length of the duration unit at `i` (y, mo, w, d, h, m, s, ms, us, µs, ns; any case).
fn duration_unit_len(b: &[u8], i: usize) -> Option<usize> {
    let c = b.get(i)?.to_ascii_lowercase();
    let next = b.get(i + 1).map(|c| c.to_ascii_lowercase());
    match c {
        b'y' | b'w' | b'd' | b'h' | b's' => Some(1),
        b'm' => match next {
            Some(b'o') | Some(b's') => Some(2),
            _ => Some(1),
        },
        b'u' | b'n' if next == Some(b's') => Some(2),
        // µ: U+00B5 (micro sign) or U+03BC (Greek mu)
        0xC2 if next == Some(0xB5) && matches!(b.get(i + 2), Some(b's' | b'S')) => Some(3),
        0xCE if next == Some(0xBC) && matches!(b.get(i + 2), Some(b's' | b'S')) => Some(3),
        _ => None,
    }
}

/// End of an ISO 8601 duration starting with `P` at `p`, if one starts there.
fn iso_duration_end(b: &[u8], p: usize) -> Option<usize> {
    let q = p + 1;
    // Alternative format: PYYYY-MM-DDThh:mm:ss
    if let Some(s) = b.get(q..q + 19) {
        let shape = b"dddd-dd-ddTdd:dd:dd";
        if s.iter().zip(shape).all(|(&c, &f)| {
            if f == b'd' {
                c.is_ascii_digit()
            } else {
                c == f
            }
        }) {
            return Some(q + 19);
        }
    }
    if b.get(q) == Some(&b'T') {
        return designators(b, q + 1, b"HMS");
    }
    let d = digits_end(b, q);
    if d > q && b.get(d) == Some(&b'W') {
        return Some(d + 1);
    }
    let end = designators(b, q, b"YMD")?;
    if b.get(end) == Some(&b'T') {
        if let Some(t) = designators(b, end + 1, b"HMS") {
            return Some(t);
        }
    }
    Some(end)
}

/// `(DIGIT+ L)+` where the letters L come from `order`, each at most once and in that order.
fn designators(b: &[u8], mut i: usize, order: &[u8]) -> Option<usize> {
    let mut next_allowed = 0;
    let mut any = false;
    loop {
        let d = digits_end(b, i);
        if d == i {
            break;
        }
        let Some(k) = b
            .get(d)
            .and_then(|c| order[next_allowed..].iter().position(|o| o == c))
        else {
            break;
        };
        next_allowed += k + 1;
        i = d + 1;
        any = true;
        if next_allowed == order.len() {
            break;
        }
    }
    any.then_some(i)
}

/// ANTLR's display of a character in lexer messages: `'x'`, `'\n'`, `'<EOF>'`. `at` is on a
/// character boundary: it starts a token or follows an ASCII character.
fn char_display(src: &str, at: usize) -> String {
    match src.get(at..).and_then(|rest| rest.chars().next()) {
        None => "'<EOF>'".to_string(),
        Some('\n') => "'\\n'".to_string(),
        Some('\r') => "'\\r'".to_string(),
        Some('\t') => "'\\t'".to_string(),
        Some(c) => format!("'{c}'"),
    }
}

fn mismatched_char(src: &str, at: usize, expecting: char) -> Fail {
    (
        at,
        format!(
            "mismatched character {} expecting '{expecting}'",
            char_display(src, at)
        ),
    )
}

fn eof_expecting(len: usize, expecting: char) -> Fail {
    (
        len,
        format!("mismatched character '<EOF>' expecting '{expecting}'"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use TokenKind as T;

    fn kinds(s: &str) -> Vec<TokenKind> {
        let lexed = tokenize(s);
        assert!(lexed.error.is_none(), "{s}: {:?}", lexed.error);
        lexed.tokens.iter().map(|t| t.kind).collect()
    }

    fn texts(s: &str) -> Vec<(TokenKind, &str)> {
        let lexed = tokenize(s);
        assert!(lexed.error.is_none(), "{s}: {:?}", lexed.error);
        lexed
            .tokens
            .iter()
            .filter(|t| t.kind != T::Eof)
            .map(|t| (t.kind, t.text(s)))
            .collect()
    }

    fn one(s: &str) -> TokenKind {
        let t = texts(s);
        assert_eq!(t.len(), 1, "{s}: {t:?}");
        assert_eq!(t[0].1, s);
        t[0].0
    }

    fn lex_err(s: &str) -> LexError {
        let lexed = tokenize(s);
        assert_eq!(lexed.tokens.last().unwrap().kind, T::Error);
        lexed.error.expect("an error")
    }

    #[test]
    fn keywords_are_case_insensitive() {
        assert_eq!(
            kinds("SELECT select SeLeCt"),
            vec![
                T::Keyword(Kw::Select),
                T::Keyword(Kw::Select),
                T::Keyword(Kw::Select),
                T::Eof
            ]
        );
        assert_eq!(one("TABLE"), T::Keyword(Kw::ColumnFamily));
        assert_eq!(one("ColumnFamily"), T::Keyword(Kw::ColumnFamily));
        assert_eq!(one("columnfamilies"), T::Keyword(Kw::Tables));
        assert_eq!(one("selects"), T::Ident);
        assert_eq!(one("peers_v2"), T::Ident);
        assert_eq!(one("a"), T::Ident);
        assert_eq!(one("TRUE"), T::Boolean);
        assert_eq!(one("false"), T::Boolean);
        assert_eq!(one("NaN"), T::Keyword(Kw::Nan));
        assert_eq!(one("infinity"), T::Keyword(Kw::Infinity));
        assert!(Kw::Select.is_reserved());
        assert!(!Kw::Key.is_reserved());
        assert_eq!(Kw::From.antlr_name(), "K_FROM");
    }

    #[test]
    fn reserved_keywords_agree_with_the_catalog_list() {
        // Every keyword the grammar reserves is in keywords.rs (which also lists a few words
        // Cassandra reserves for output quoting only).
        for word in [
            "add",
            "allow",
            "alter",
            "and",
            "apply",
            "asc",
            "authorize",
            "batch",
            "begin",
            "by",
            "columnfamily",
            "create",
            "delete",
            "desc",
            "describe",
            "drop",
            "entries",
            "execute",
            "from",
            "full",
            "grant",
            "if",
            "in",
            "index",
            "infinity",
            "insert",
            "into",
            "is",
            "keyspace",
            "limit",
            "materialized",
            "modify",
            "nan",
            "norecursive",
            "not",
            "null",
            "of",
            "on",
            "or",
            "order",
            "primary",
            "rename",
            "revoke",
            "schema",
            "select",
            "set",
            "table",
            "to",
            "token",
            "truncate",
            "unlogged",
            "update",
            "use",
            "using",
            "view",
            "where",
            "with",
        ] {
            let kw = keyword(word.as_bytes()).unwrap();
            assert!(kw.is_reserved(), "{word}");
            assert!(crate::cql::keywords::is_reserved(word), "{word}");
        }
    }

    #[test]
    fn strings_and_names() {
        assert_eq!(one("'it''s'"), T::String);
        assert_eq!(one("''"), T::String);
        assert_eq!(one("$$a 'b' $ c$$"), T::DollarString);
        assert_eq!(one("$$$$"), T::DollarString);
        assert_eq!(one("\"MyTable\""), T::QuotedName);
        assert_eq!(one("\"a\"\"b\""), T::QuotedName);
        assert_eq!(one("\"\""), T::EmptyQuotedName);
        assert_eq!(one("'héllo wörld'"), T::String);
    }

    #[test]
    fn numbers() {
        assert_eq!(one("0"), T::Integer);
        assert_eq!(one("123"), T::Integer);
        assert_eq!(one("1.5"), T::Float);
        assert_eq!(one("1."), T::Float);
        assert_eq!(one("1e10"), T::Float);
        assert_eq!(one("2.5E-3"), T::Float);
        assert_eq!(one("2E+3"), T::Float);
        assert_eq!(
            texts("-2.5E-3"),
            vec![(T::Minus, "-"), (T::Float, "2.5E-3")]
        );
        assert_eq!(
            texts("1..2"),
            vec![(T::Integer, "1"), (T::Range, ".."), (T::Integer, "2")]
        );
        assert_eq!(texts("1e"), vec![(T::Integer, "1"), (T::Ident, "e")]);
        assert_eq!(one("0xCAFE"), T::Hex);
        assert_eq!(one("0x"), T::Hex);
        assert_eq!(one("0Xcafe"), T::Hex);
    }

    #[test]
    fn durations() {
        for d in [
            "1h30m",
            "12mo3d",
            "1y2mo",
            "2d",
            "1us",
            "1µs",
            "1μs",
            "3ns",
            "10ms",
            "1W",
            "1Y",
            "P1DT2H",
            "P1W",
            "P0001-02-03T04:05:06",
            "PT5M",
            "P1Y2M3DT4H5M6S",
            "P2M",
            "PT1S",
        ] {
            assert_eq!(one(d), T::Duration, "{d}");
        }
        assert_eq!(texts("-2d"), vec![(T::Minus, "-"), (T::Duration, "2d")]);
        // Lower-case p is an identifier; a longer identifier wins over a duration prefix.
        assert_eq!(one("p1d"), T::Ident);
        assert_eq!(one("P1Dx"), T::Ident);
        assert_eq!(one("Pxyz"), T::Ident);
        assert_eq!(texts("1h30"), vec![(T::Duration, "1h"), (T::Integer, "30")]);
    }

    #[test]
    fn uuids() {
        assert_eq!(one("550e8400-e29b-41d4-a716-446655440000"), T::Uuid);
        assert_eq!(one("DEADBEEF-dead-BEEF-dead-beefdeadbeef"), T::Uuid);
        assert_eq!(
            texts("deadbeef-dead"),
            vec![(T::Ident, "deadbeef"), (T::Minus, "-"), (T::Ident, "dead")]
        );
    }

    #[test]
    fn operators() {
        assert_eq!(
            kinds("= != < <= > >= + - * / % , ; ( ) [ ] { } . : .. ? += -="),
            vec![
                T::Eq,
                T::Ne,
                T::Lt,
                T::Le,
                T::Gt,
                T::Ge,
                T::Plus,
                T::Minus,
                T::Star,
                T::Slash,
                T::Percent,
                T::Comma,
                T::Semicolon,
                T::LParen,
                T::RParen,
                T::LBracket,
                T::RBracket,
                T::LBrace,
                T::RBrace,
                T::Dot,
                T::Colon,
                T::Range,
                T::Qmark,
                T::PlusEq,
                T::MinusEq,
                T::Eof
            ]
        );
    }

    #[test]
    fn comments_and_positions() {
        let s = "-- comment\nSELECT /* multi\nline */ a // tail\n  FROM\tt";
        let lexed = tokenize(s);
        assert!(lexed.error.is_none());
        let pos: Vec<(u32, u32, &str)> = lexed
            .tokens
            .iter()
            .map(|t| (t.line, t.col, t.text(s)))
            .collect();
        assert_eq!(
            pos,
            vec![
                (2, 0, "SELECT"),
                (3, 8, "a"),
                (4, 2, "FROM"),
                (4, 7, "t"),
                (4, 8, "")
            ]
        );
        // Columns count characters, not bytes.
        let s = "'é' x";
        let lexed = tokenize(s);
        assert_eq!(lexed.tokens[1].col, 4);
        assert_eq!(kinds("a--"), vec![T::Ident, T::Eof]);
    }

    #[test]
    fn errors() {
        let e = lex_err("SELECT 'abc");
        assert_eq!(
            (e.line, e.col, e.message.as_str()),
            (1, 11, "mismatched character '<EOF>' expecting '''")
        );
        let e = lex_err("a\n \"abc");
        assert_eq!((e.line, e.col), (2, 5));
        assert_eq!(e.message, "mismatched character '<EOF>' expecting '\"'");
        let e = lex_err("x = $$abc");
        assert_eq!(e.message, "mismatched character '<EOF>' expecting '$'");
        let e = lex_err("x = $a");
        assert_eq!(
            (e.col, e.message.as_str()),
            (5, "mismatched character 'a' expecting '$'")
        );
        let e = lex_err("a & b");
        assert_eq!(
            (e.col, e.message.as_str()),
            (2, "no viable alternative at character '&'")
        );
        let e = lex_err("a /* b");
        assert_eq!(e.message, "mismatched character '<EOF>' expecting '*'");
        let e = lex_err("a !");
        assert_eq!(e.message, "mismatched character '<EOF>' expecting '='");
        let e = lex_err("a é");
        assert_eq!(e.message, "no viable alternative at character 'é'");
        // Tokens before the error are kept.
        let lexed = tokenize("SELECT a & b");
        assert_eq!(lexed.tokens.len(), 3);
    }
}
