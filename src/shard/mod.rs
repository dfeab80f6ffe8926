//! Shards: shard.map, the shard filter and channel assignment.
