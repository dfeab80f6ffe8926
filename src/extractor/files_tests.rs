//! Unit tests of [`super`] (`extractor/files.rs`).

use super::*;

/// Builds a synthetic binlog file with CRC-32 trailers.
struct Binlog {
    bytes: Vec<u8>,
}

impl Binlog {
    fn new() -> Binlog {
        let mut b = Binlog {
            bytes: BINLOG_MAGIC.to_vec(),
        };
        let mut fde = Vec::new();
        fde.extend_from_slice(&4u16.to_le_bytes());
        let mut version = b"10.11.19-MariaDB-log".to_vec();
        version.resize(50, 0);
        fde.extend_from_slice(&version);
        fde.extend_from_slice(&0u32.to_le_bytes());
        fde.push(19);
        fde.extend_from_slice(&[0u8; 40]); // post-header lengths
        fde.push(1); // CRC32
        b.push(FORMAT_DESCRIPTION_EVENT, &fde);
        b
    }

    /// Appends an event with `body` and a CRC; returns its offset.
    fn push(&mut self, type_code: u8, body: &[u8]) -> u64 {
        let start = self.bytes.len() as u64;
        let size = (EVENT_HEADER_LEN + body.len() + 4) as u32;
        let mut e = Vec::new();
        e.extend_from_slice(&1_700_000_000u32.to_le_bytes());
        e.push(type_code);
        e.extend_from_slice(&1u32.to_le_bytes());
        e.extend_from_slice(&size.to_le_bytes());
        e.extend_from_slice(&((start + u64::from(size)) as u32).to_le_bytes());
        e.extend_from_slice(&0u16.to_le_bytes());
        e.extend_from_slice(body);
        let crc = crc32fast::hash(&e);
        e.extend_from_slice(&crc.to_le_bytes());
        self.bytes.extend_from_slice(&e);
        start
    }

    fn query(&mut self, n: usize) -> u64 {
        self.push(2, &vec![b'q'; n])
    }

    fn rotate(&mut self, next: &str) -> u64 {
        let mut body = 4u64.to_le_bytes().to_vec();
        body.extend_from_slice(next.as_bytes());
        self.push(ROTATE_EVENT, &body)
    }

    fn write(&self, dir: &Path, name: &str) {
        std::fs::write(dir.join(name), &self.bytes).unwrap();
    }
}

fn tempdir(label: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "shardrep-files-{label}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn pos(text: &str) -> BinlogPosition {
    text.parse().unwrap()
}

fn case_file(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/binlog/events/b16/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

#[test]
fn a_missing_file_named_by_rotate_is_an_error() {
    let dir = tempdir("missing");
    std::fs::write(
        dir.join("mariadb-bin.000001"),
        case_file("mariadb-bin.000001"),
    )
    .unwrap();
    std::fs::write(
        dir.join("mariadb-bin.index"),
        "./mariadb-bin.000001\n./mariadb-bin.000002\n",
    )
    .unwrap();
    let mut source =
        FileSource::new(&dir, pos("mariadb-bin.000001:4"), FileOptions::default()).unwrap();
    let err = read_all(&mut source).unwrap_err().to_string();
    assert!(
        err.contains("names mariadb-bin.000002, which is missing"),
        "{err}"
    );
    assert!(err.contains("mariadb-bin.000001"), "{err}");
}

#[test]
fn a_partial_event_in_a_file_still_being_written_ends_the_read_cleanly() {
    let dir = tempdir("in-use");
    let mut bytes = case_file("mariadb-bin.000005");
    bytes[4 + 17] |= 0x01; // LOG_EVENT_BINLOG_IN_USE_F on the FORMAT_DESCRIPTION
                           // Event start offsets (walk event_size from the magic).
    let mut starts = Vec::new();
    let mut at = 4usize;
    while at + 13 <= bytes.len() {
        starts.push(at);
        at += u32::from_le_bytes(bytes[at + 9..at + 13].try_into().unwrap()) as usize;
    }
    // Keep everything before the second-to-last event and half of it
    // (the last event, a ROTATE, goes).
    let (start, next) = (starts[starts.len() - 2], starts[starts.len() - 1]);
    let cut = start + (next - start) / 2;
    std::fs::write(dir.join("mariadb-bin.000005"), &bytes[..cut]).unwrap();
    let mut source =
        FileSource::new(&dir, pos("mariadb-bin.000005:4"), FileOptions::default()).unwrap();
    let events = read_all(&mut source).unwrap();
    assert_eq!(events.len(), starts.len() - 2);
    assert!(source.ended_in_active_file());
    // Without the flag the same bytes are a truncated binlog.
    bytes[4 + 17] &= !0x01;
    std::fs::write(dir.join("mariadb-bin.000005"), &bytes[..cut]).unwrap();
    let mut source =
        FileSource::new(&dir, pos("mariadb-bin.000005:4"), FileOptions::default()).unwrap();
    let err = read_all(&mut source).unwrap_err().to_string();
    assert!(err.contains("truncated event"), "{err}");
}

fn read_all(source: &mut FileSource) -> Result<Vec<RawEvent>, ExtractError> {
    let mut out = Vec::new();
    while let Some(e) = source.try_next_event()? {
        out.push(e);
    }
    Ok(out)
}

fn positions(events: &[RawEvent]) -> Vec<String> {
    events.iter().map(|e| e.position.to_string()).collect()
}

fn file_error(e: ExtractError) -> (String, u64, String) {
    match e {
        ExtractError::File {
            file,
            offset,
            message,
        } => (file, offset, message),
        other => panic!("expected a File error, got {other:?}"),
    }
}

#[test]
fn follows_rotation_and_index() {
    let dir = tempdir("rotation");
    let mut a = Binlog::new();
    let q1 = a.query(10);
    let r = a.rotate("bin.000002");
    a.write(&dir, "bin.000001");
    let mut b = Binlog::new();
    let q2 = b.query(20);
    b.write(&dir, "bin.000002");
    // bin.000002 ends without a ROTATE (crash): the index leads on.
    let mut c = Binlog::new();
    let q3 = c.query(30);
    c.write(&dir, "bin.000003");
    std::fs::write(
        dir.join("bin.index"),
        format!("{}/bin.000001\n./bin.000002\nbin.000003\n\n", dir.display()),
    )
    .unwrap();

    let mut s = FileSource::new(&dir, pos("bin.000001:0"), FileOptions::default()).unwrap();
    let events = read_all(&mut s).unwrap();
    assert_eq!(
        positions(&events),
        vec![
            "bin.000001:4".to_owned(),
            format!("bin.000001:{q1}"),
            format!("bin.000001:{r}"),
            "bin.000002:4".to_owned(),
            format!("bin.000002:{q2}"),
            "bin.000003:4".to_owned(),
            format!("bin.000003:{q3}"),
        ]
    );
    for e in &events {
        let h = EventHeader::parse(&e.bytes).unwrap();
        assert_eq!(h.event_size as usize, e.bytes.len());
        assert_eq!(
            u64::from(h.log_pos),
            e.position.offset() + e.bytes.len() as u64
        );
        assert!(has_valid_crc(&e.bytes));
    }
    assert_eq!(
        s.position().to_string(),
        format!("bin.000003:{}", c.bytes.len())
    );
    // At the end it stays at the end.
    assert!(s.try_next_event().unwrap().is_none());

    // Without an index file, the directory listing does the same.
    std::fs::remove_file(dir.join("bin.index")).unwrap();
    let mut s = FileSource::new(&dir, pos("bin.000001:4"), FileOptions::default()).unwrap();
    assert_eq!(read_all(&mut s).unwrap().len(), 7);
}

#[test]
fn mid_file_start_replays_the_format_description() {
    let dir = tempdir("midfile");
    let mut a = Binlog::new();
    a.query(10);
    let q2 = a.query(11);
    a.write(&dir, "bin.000001");
    let mut s = FileSource::new(
        &dir,
        pos(&format!("bin.000001:{q2}")),
        FileOptions::default(),
    )
    .unwrap();
    let events = read_all(&mut s).unwrap();
    assert_eq!(
        positions(&events),
        vec!["bin.000001:4".to_owned(), format!("bin.000001:{q2}")]
    );
    assert_eq!(EventHeader::parse(&events[0].bytes).unwrap().type_code, 15);
    assert!(events[0].position < *s.start());
    assert!(events[1].position >= *s.start());
    assert_eq!(fde_has_crc(&events[0].bytes), Some(true));
}

#[test]
fn bad_files_give_file_errors() {
    let dir = tempdir("bad");
    // Bad magic.
    std::fs::write(dir.join("m.000001"), b"\xfebix rest of file").unwrap();
    let mut s = FileSource::new(&dir, pos("m.000001:4"), FileOptions::default()).unwrap();
    let (file, offset, message) = file_error(s.try_next_event().unwrap_err());
    assert!(file.ends_with("m.000001"), "{file}");
    assert_eq!(offset, 0);
    assert!(message.contains("magic"), "{message}");
    // Shorter than the magic.
    std::fs::write(dir.join("m.000002"), b"\xfe").unwrap();
    let mut s = FileSource::new(&dir, pos("m.000002:4"), FileOptions::default()).unwrap();
    let (_, offset, message) = file_error(s.try_next_event().unwrap_err());
    assert_eq!(offset, 0);
    assert!(message.contains("1 bytes"), "{message}");
    // Missing file.
    let mut s = FileSource::new(&dir, pos("m.000009:4"), FileOptions::default()).unwrap();
    let (file, _, message) = file_error(s.try_next_event().unwrap_err());
    assert!(file.ends_with("m.000009") && message.contains("not found"));
    // Offset inside the magic.
    assert!(FileSource::new(&dir, pos("m.000001:2"), FileOptions::default()).is_err());

    // event_size < 19.
    let mut b = Binlog::new();
    let q = b.query(5);
    b.bytes[q as usize + 9..q as usize + 13].copy_from_slice(&7u32.to_le_bytes());
    b.write(&dir, "s.000001");
    let mut s = FileSource::new(&dir, pos("s.000001:4"), FileOptions::default()).unwrap();
    assert!(s.try_next_event().unwrap().is_some());
    let (file, offset, message) = file_error(s.try_next_event().unwrap_err());
    assert!(file.ends_with("s.000001"));
    assert_eq!(offset, q);
    assert!(message.contains("bad event size 7"), "{message}");

    // event_size beyond the limit.
    let mut b = Binlog::new();
    let q = b.query(5);
    b.bytes[q as usize + 9..q as usize + 13].copy_from_slice(&u32::MAX.to_le_bytes());
    b.write(&dir, "s.000002");
    let mut s = FileSource::new(&dir, pos("s.000002:4"), FileOptions::default()).unwrap();
    s.try_next_event().unwrap();
    let (_, offset, message) = file_error(s.try_next_event().unwrap_err());
    assert_eq!(offset, q);
    assert!(message.contains("larger than"), "{message}");

    // A start offset inside an event: log_pos does not match.
    let mut b = Binlog::new();
    let q = b.query(40);
    b.write(&dir, "s.000003");
    let mut s = FileSource::new(
        &dir,
        pos(&format!("s.000003:{}", q + 5)),
        FileOptions::default(),
    )
    .unwrap();
    assert!(s.try_next_event().unwrap().is_some()); // the FDE
    let (_, offset, message) = file_error(s.try_next_event().unwrap_err());
    assert_eq!(offset, q + 5);
    assert!(
        message.contains("no event starts here") || message.contains("bad event size"),
        "{message}"
    );
    // A plausible size there, but log_pos disagrees.
    let mut b = Binlog::new();
    let q = b.query(40) as usize;
    let fake_at = q + EVENT_HEADER_LEN + 4;
    b.bytes[fake_at + 9..fake_at + 13].copy_from_slice(&20u32.to_le_bytes());
    b.bytes[fake_at + 13..fake_at + 17].copy_from_slice(&7u32.to_le_bytes());
    b.write(&dir, "s.000004");
    let mut s = FileSource::new(
        &dir,
        pos(&format!("s.000004:{fake_at}")),
        FileOptions::default(),
    )
    .unwrap();
    assert!(s.try_next_event().unwrap().is_some());
    let (_, offset, message) = file_error(s.try_next_event().unwrap_err());
    assert_eq!(offset, fake_at as u64);
    assert!(message.contains("no event starts here"), "{message}");

    // A start offset beyond the end.
    let mut s = FileSource::new(&dir, pos("s.000003:100000"), FileOptions::default()).unwrap();
    let (_, offset, message) = file_error(s.try_next_event().unwrap_err());
    assert_eq!(offset, 100000);
    assert!(message.contains("beyond the end"), "{message}");
}

#[test]
fn truncated_events_are_errors_without_follow() {
    let dir = tempdir("trunc");
    let mut b = Binlog::new();
    b.query(10);
    let last = b.query(100);
    let full = b.bytes.clone();
    // Cut inside the event body, then inside the header.
    for (cut, need, have) in [
        (last as usize + 50, 123u64, 50u64),
        (last as usize + 7, 19, 7),
    ] {
        std::fs::write(dir.join("t.000001"), &full[..cut]).unwrap();
        let mut s = FileSource::new(&dir, pos("t.000001:4"), FileOptions::default()).unwrap();
        s.try_next_event().unwrap().unwrap();
        s.try_next_event().unwrap().unwrap();
        let (file, offset, message) = file_error(s.try_next_event().unwrap_err());
        assert!(file.ends_with("t.000001"));
        assert_eq!(offset, last);
        assert!(
            message.contains(&format!("expected {need} bytes"))
                && message.contains(&format!("has {have} bytes")),
            "{message}"
        );
    }
}

#[tokio::test]
async fn follow_waits_for_a_partly_written_event() {
    let dir = tempdir("follow");
    let mut b = Binlog::new();
    b.query(10);
    let last = b.query(3000);
    let full = b.bytes.clone();
    let path = dir.join("f.000001");
    std::fs::write(&path, &full[..last as usize + 1000]).unwrap();
    let options = FileOptions {
        poll_interval: Duration::from_millis(5),
        ..FileOptions::follow(true)
    };
    let mut s = FileSource::new(&dir, pos("f.000001:4"), options).unwrap();
    s.next_event().await.unwrap().unwrap();
    s.next_event().await.unwrap().unwrap();
    // Not handed out while incomplete, whatever the wait.
    assert!(s.try_next_event().unwrap().is_none());
    assert!(
        tokio::time::timeout(Duration::from_millis(50), s.next_event())
            .await
            .is_err()
    );
    // Written in two more steps.
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(&full[last as usize + 1000..last as usize + 2000])
        .unwrap();
    assert!(s.try_next_event().unwrap().is_none());
    f.write_all(&full[last as usize + 2000..]).unwrap();
    let e = tokio::time::timeout(Duration::from_secs(5), s.next_event())
        .await
        .expect("event within 5 s")
        .unwrap()
        .unwrap();
    assert_eq!(e.position.offset(), last);
    assert_eq!(e.bytes, full[last as usize..]);

    // A new file appears (without a ROTATE in this one): followed.
    let mut c = Binlog::new();
    let q = c.query(5);
    std::fs::write(dir.join("f.000002"), &c.bytes[..2]).unwrap();
    std::fs::write(dir.join("f.index"), "f.000001\nf.000002\n").unwrap();
    assert!(s.try_next_event().unwrap().is_none()); // magic not complete yet
    c.write(&dir, "f.000002");
    let mut got = Vec::new();
    while got.len() < 2 {
        let e = tokio::time::timeout(Duration::from_secs(5), s.next_event())
            .await
            .expect("event within 5 s")
            .unwrap()
            .unwrap();
        got.push(e.position.to_string());
    }
    assert_eq!(got, vec!["f.000002:4".to_owned(), format!("f.000002:{q}")]);
}

#[test]
fn follow_errors_on_a_partial_event_in_a_finished_file() {
    let dir = tempdir("followtrunc");
    let mut b = Binlog::new();
    let last = b.query(100);
    std::fs::write(dir.join("g.000001"), &b.bytes[..last as usize + 30]).unwrap();
    Binlog::new().write(&dir, "g.000002");
    std::fs::write(dir.join("g.index"), "g.000001\ng.000002\n").unwrap();
    let mut s = FileSource::new(&dir, pos("g.000001:4"), FileOptions::follow(true)).unwrap();
    s.try_next_event().unwrap().unwrap();
    let (file, offset, _) = file_error(s.try_next_event().unwrap_err());
    assert!(file.ends_with("g.000001"));
    assert_eq!(offset, last);
}

#[test]
fn rotate_targets() {
    let mut b = Binlog::new();
    let r = b.rotate("mariadb-bin.000042") as usize;
    let event = &b.bytes[r..];
    assert_eq!(
        rotate_target(event, Some(true)),
        Some((&b"mariadb-bin.000042"[..], 4))
    );
    assert_eq!(
        rotate_target(event, None),
        Some((&b"mariadb-bin.000042"[..], 4))
    );
    let no_crc = &event[..event.len() - 4];
    assert_eq!(
        rotate_target(no_crc, None),
        Some((&b"mariadb-bin.000042"[..], 4))
    );
    assert_eq!(rotate_target(&event[..20], None), None);
    assert_eq!(
        parse_index(b"/a/b/x.000001\r\n  ./x.000002 \n\nx.000003"),
        ["x.000001", "x.000002", "x.000003"]
    );
}

proptest::proptest! {
    #[test]
    fn prop_never_panics_on_mutated_files(
        cut in 0usize..400,
        flips in proptest::collection::vec((0usize..400, 0u8..=255), 0..6),
        follow in proptest::bool::ANY,
    ) {
        let dir = tempdir("prop");
        let mut b = Binlog::new();
        b.query(30);
        b.rotate("p.000002");
        let mut bytes = b.bytes.clone();
        for (at, v) in flips {
            if at < bytes.len() {
                bytes[at] = v;
            }
        }
        bytes.truncate(cut.min(bytes.len()));
        std::fs::write(dir.join("p.000001"), &bytes).unwrap();
        let mut s = FileSource::new(&dir, pos("p.000001:4"), FileOptions::follow(follow)).unwrap();
        for _ in 0..20 {
            match s.try_next_event() {
                Ok(Some(e)) => {
                    let h = EventHeader::parse(&e.bytes).unwrap();
                    proptest::prop_assert_eq!(h.event_size as usize, e.bytes.len());
                }
                Ok(None) | Err(_) => break,
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
