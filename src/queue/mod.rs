//! On-disk transaction queue (sled).
