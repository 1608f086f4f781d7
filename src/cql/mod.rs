//! The CQL language: lexer, parser, typed AST, types and values.

pub mod ast;
pub mod keywords;
pub mod types;
pub mod value;
