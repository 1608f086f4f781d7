//! EVENT responses and schema changes (spec v4 sections 4.2.5.5 and 4.2.6).

use std::net::SocketAddr;

use bytes::BytesMut;

use super::super::types::*;

/// Kind of schema change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaChangeType {
    /// `"CREATED"`
    Created,
    /// `"UPDATED"`
    Updated,
    /// `"DROPPED"`
    Dropped,
}

impl SchemaChangeType {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaChangeType::Created => "CREATED",
            SchemaChangeType::Updated => "UPDATED",
            SchemaChangeType::Dropped => "DROPPED",
        }
    }
}

/// What a schema change touched.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SchemaChangeTarget {
    /// `"KEYSPACE"` with the keyspace name.
    Keyspace(String),
    /// `"TABLE"` (also used for index and view changes).
    Table {
        /// Keyspace.
        keyspace: String,
        /// Table name.
        name: String,
    },
    /// `"TYPE"`: a user-defined type.
    Type {
        /// Keyspace.
        keyspace: String,
        /// Type name.
        name: String,
    },
    /// `"FUNCTION"` with its argument types (CQL type strings).
    Function {
        /// Keyspace.
        keyspace: String,
        /// Function name.
        name: String,
        /// Argument types.
        arg_types: Vec<String>,
    },
    /// `"AGGREGATE"` with its argument types.
    Aggregate {
        /// Keyspace.
        keyspace: String,
        /// Aggregate name.
        name: String,
        /// Argument types.
        arg_types: Vec<String>,
    },
}

/// A schema change, the body of a Schema_change RESULT and of a `SCHEMA_CHANGE` EVENT:
/// `<change_type><target><options>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SchemaChange {
    /// CREATED, UPDATED or DROPPED.
    pub change_type: SchemaChangeType,
    /// What changed.
    pub target: SchemaChangeTarget,
}

impl SchemaChange {
    /// Writes `<change_type><target><options>`.
    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        write_string(out, self.change_type.as_str())?;
        match &self.target {
            SchemaChangeTarget::Keyspace(ks) => {
                write_string(out, "KEYSPACE")?;
                write_string(out, ks)?;
            }
            SchemaChangeTarget::Table { keyspace, name } => {
                write_string(out, "TABLE")?;
                write_string(out, keyspace)?;
                write_string(out, name)?;
            }
            SchemaChangeTarget::Type { keyspace, name } => {
                write_string(out, "TYPE")?;
                write_string(out, keyspace)?;
                write_string(out, name)?;
            }
            SchemaChangeTarget::Function {
                keyspace,
                name,
                arg_types,
            } => {
                write_string(out, "FUNCTION")?;
                write_string(out, keyspace)?;
                write_string(out, name)?;
                write_string_list(out, arg_types)?;
            }
            SchemaChangeTarget::Aggregate {
                keyspace,
                name,
                arg_types,
            } => {
                write_string(out, "AGGREGATE")?;
                write_string(out, keyspace)?;
                write_string(out, name)?;
                write_string_list(out, arg_types)?;
            }
        }
        Ok(())
    }
}

/// `TOPOLOGY_CHANGE` kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TopologyChangeType {
    /// `"NEW_NODE"`
    NewNode,
    /// `"REMOVED_NODE"`
    RemovedNode,
    /// `"MOVED_NODE"` (still sent by Cassandra, not listed in the v4/v5 specs)
    MovedNode,
}

impl TopologyChangeType {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            TopologyChangeType::NewNode => "NEW_NODE",
            TopologyChangeType::RemovedNode => "REMOVED_NODE",
            TopologyChangeType::MovedNode => "MOVED_NODE",
        }
    }
}

/// `STATUS_CHANGE` kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusChangeType {
    /// `"UP"`
    Up,
    /// `"DOWN"`
    Down,
}

impl StatusChangeType {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusChangeType::Up => "UP",
            StatusChangeType::Down => "DOWN",
        }
    }
}

/// A server-pushed event. Always sent on stream -1.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Event {
    /// `TOPOLOGY_CHANGE` with the node's native-protocol address.
    TopologyChange {
        /// What happened.
        change: TopologyChangeType,
        /// The node (`[inet]`).
        addr: SocketAddr,
    },
    /// `STATUS_CHANGE` with the node's address.
    StatusChange {
        /// What happened.
        change: StatusChangeType,
        /// The node (`[inet]`).
        addr: SocketAddr,
    },
    /// `SCHEMA_CHANGE`.
    SchemaChange(SchemaChange),
}

impl Event {
    /// The event type string, as used in REGISTER.
    pub fn event_type(&self) -> &'static str {
        match self {
            Event::TopologyChange { .. } => "TOPOLOGY_CHANGE",
            Event::StatusChange { .. } => "STATUS_CHANGE",
            Event::SchemaChange(_) => "SCHEMA_CHANGE",
        }
    }

    /// Writes the event body.
    pub(crate) fn encode(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        write_string(out, self.event_type())?;
        match self {
            Event::TopologyChange { change, addr } => {
                write_string(out, change.as_str())?;
                write_inet(out, addr);
            }
            Event::StatusChange { change, addr } => {
                write_string(out, change.as_str())?;
                write_inet(out, addr);
            }
            Event::SchemaChange(sc) => sc.encode(out)?,
        }
        Ok(())
    }
}
