//! The node an in-process engine of a test describes in system.local.

use ringgate::schema::system::NodeInfo;
use ringgate::storage::Store;

pub fn test_node(store: &dyn Store) -> NodeInfo {
    NodeInfo {
        listen: "127.0.0.1:9042".parse().unwrap(),
        host_id: ringgate::schema::system::host_id(store).unwrap(),
        cluster_name: "t".into(),
        data_center: "dc".into(),
        rack: "r".into(),
        tokens: ringgate::schema::system::node_tokens(1),
        native_protocol_version: "5".into(),
        cluster: None,
    }
}
