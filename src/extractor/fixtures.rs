//! Test fixtures shared by the decoders' unit tests: the raw events of the
//! binlog files under `tests/fixtures/binlog/events/`.

use std::path::PathBuf;

use crate::position::BinlogPosition;

use super::{RawEvent, BINLOG_MAGIC};

/// The raw events of fixture `tests/fixtures/binlog/events/{dir}/{file}`:
/// the 4-byte magic, then events by `event_size`.
pub(crate) fn fixture_events(dir: &str, file: &str) -> Vec<RawEvent> {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests/fixtures/binlog/events",
        dir,
        file,
    ]
    .iter()
    .collect();
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(data[..4], BINLOG_MAGIC, "{}", path.display());
    let mut events = Vec::new();
    let mut at = 4;
    while at < data.len() {
        let size = u32::from_le_bytes(data[at + 9..at + 13].try_into().unwrap()) as usize;
        events.push(RawEvent {
            position: BinlogPosition::new(file, at as u64).unwrap(),
            bytes: data[at..at + size].to_vec(),
        });
        at += size;
    }
    assert_eq!(at, data.len(), "{}: last event truncated", path.display());
    events
}

/// The raw event of a fixture at `offset`.
pub(crate) fn fixture_event(dir: &str, file: &str, offset: u64) -> RawEvent {
    fixture_events(dir, file)
        .into_iter()
        .find(|e| e.position.offset() == offset)
        .unwrap_or_else(|| panic!("{dir}/{file}: no event at {offset}"))
}
