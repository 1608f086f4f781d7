//! Tests of the value layer.
