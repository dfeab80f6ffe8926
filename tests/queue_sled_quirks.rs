//! Reproducers of the sled 0.34.7 behaviours the queue works around (see
//! the "sled notes" of `src/queue/mod.rs`). They test sled, not shardrep:
//! when one fails after a sled upgrade, revisit the matching workaround.

mod queue_support;

use std::path::Path;

use queue_support::TempDir;

fn open(path: &Path) -> sled::Result<sled::Db> {
    sled::Config::new().path(path).flush_every_ms(None).open()
}

/// sled writes a new database's `conf` as content then CRC, with no
/// rename: cut between the two writes, the database never opens again.
/// (Workaround: `Segment::create` makes the `conf` under a temporary
/// name.)
#[test]
fn conf_cut_short_makes_the_database_unopenable() {
    let dir = TempDir::new("sled-conf");
    drop(open(dir.path()).unwrap());
    let conf = std::fs::read(dir.path().join("conf")).unwrap();
    std::fs::write(dir.path().join("conf"), &conf[..conf.len() - 4]).unwrap();
    let Err(err) = open(dir.path()) else {
        panic!("sled opened a database with a cut conf");
    };
    assert!(err.to_string().contains("corrupted"), "{err}");
}

/// Nodes larger than a quarter of sled's 512 KiB log segment go to blob
/// files, which sled's `flush` never fsyncs. (Workaround: values of at
/// most 6 KiB.)
#[test]
fn large_values_go_to_blob_files() {
    let dir = TempDir::new("sled-blobs");
    let db = open(dir.path()).unwrap();
    for i in 0u32..20 {
        db.insert(i.to_be_bytes(), vec![7u8; 64 << 10]).unwrap();
    }
    db.flush().unwrap();
    let blobs = std::fs::read_dir(dir.path().join("blobs")).unwrap().count();
    assert!(blobs > 0, "no blob file for 64 KiB values");
    drop(db);

    let dir = TempDir::new("sled-small");
    let db = open(dir.path()).unwrap();
    for i in 0u32..400 {
        db.insert(i.to_be_bytes(), vec![7u8; 6 << 10]).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(
        std::fs::read_dir(dir.path().join("blobs")).unwrap().count(),
        0
    );
}

/// One flipped byte in the data file: sled panics while recovering
/// instead of returning an error, or recovers the database empty.
/// (Workaround: the panic is caught, and the HAS-DATA marker tells an
/// emptied segment from a new one.)
#[test]
fn flipped_byte_in_the_log_panics_or_loses_the_database() {
    let dir = TempDir::new("sled-flip");
    let db = open(dir.path()).unwrap();
    let marker = b"0123456789-marker-of-value-1000-abcdefghij";
    for i in 0u32..2000 {
        let mut v = vec![(i % 251) as u8; 700];
        if i == 1000 {
            v[100..100 + marker.len()].copy_from_slice(marker);
        }
        db.insert(i.to_be_bytes(), v).unwrap();
    }
    db.flush().unwrap();
    drop(db);
    let file = dir.path().join("db");
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker)
        .expect("marker in the data file");
    bytes[at + 5] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    let outcome = std::panic::catch_unwind(|| open(dir.path()).map(|db| db.len()));
    match outcome {
        Err(_) => {}     // panicked
        Ok(Err(_)) => {} // an error: fine too
        Ok(Ok(n)) => assert!(n < 2000, "sled recovered all {n} keys; update the notes"),
    }
}
