//! The CQL language: lexer, parser, typed AST, types and values.

pub mod ast;
pub mod keywords;
pub mod lexer;
pub mod parser;
pub mod type_size;
pub mod types;
pub mod value;

pub use parser::{parse, parse_many, SyntaxError};
