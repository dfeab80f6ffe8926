//! PROVISIONAL stub: replaced by the writeset module (branch i16-writeset).

/// One dependency key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    /// A row.
    Row(u64),
    /// A table (or foreign-key group).
    Table {
        /// Its id.
        id: u64,
        /// Exclusive.
        exclusive: bool,
    },
    /// A shard.
    Shard {
        /// Its id.
        id: u64,
        /// Exclusive.
        exclusive: bool,
    },
    /// Everything.
    Global,
}
