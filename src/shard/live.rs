//! The shard map exchanged between a service and its running router: the
//! DBA's edits go one way ([`LiveMap::update`], taken by the router before
//! the next transaction it routes), the shards the filter auto-created
//! (`[shard_filter] auto_create`) the other ([`LiveMap::created`], stored
//! in the catalog's `shard_map` by the running service within
//! `AUTO_CREATED_STORE_INTERVAL`, as a run ends, and at any read or edit
//! of the map: `shard list`, `shard insert|update|delete`, a check).

use std::sync::{Arc, Mutex};

use crate::shard::map::{ShardEntry, ShardMap};

/// What the service and its running router hand each other.
#[derive(Debug, Default)]
pub struct LiveMap {
    /// The stored map after an edit, for the running filter (`None`: no
    /// edit since the router last looked).
    pub update: Option<ShardMap>,
    /// Entries the running filter auto-created, in order, not yet stored.
    pub created: Vec<ShardEntry>,
}

/// A [`LiveMap`] shared by the service and the run's router.
pub type SharedLiveMap = Arc<Mutex<LiveMap>>;

impl LiveMap {
    /// Adds to `map` each auto-created entry whose shard it does not list
    /// (an entry the DBA inserted meanwhile wins); returns how many were
    /// added.
    pub fn merge_created(created: &[ShardEntry], map: &mut ShardMap) -> usize {
        let mut n = 0;
        for entry in created {
            // Refused (not added) when the map lists the shard already.
            if map.insert(entry.clone()).is_ok() {
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::map::Master;

    fn entry(id: &str, master: &str, critical: bool) -> ShardEntry {
        ShardEntry::new(id, Master::Service(master.to_string()), critical).unwrap()
    }

    #[test]
    fn created_entries_fill_gaps_and_never_replace_the_dbas() {
        let mut map = ShardMap::new();
        map.insert(entry("a", "nyc", true)).unwrap();
        let created = [
            entry("a", "sjc", false),
            entry("b", "sjc", false),
            entry("b", "sjc", false),
        ];
        assert_eq!(LiveMap::merge_created(&created, &mut map), 1);
        let rows: Vec<_> = map
            .iter()
            .map(|e| (e.shard_id.as_str(), e.master.as_str(), e.critical))
            .collect();
        assert_eq!(rows, [("a", "nyc", true), ("b", "sjc", false)]);
    }
}
