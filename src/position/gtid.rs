//! MariaDB [`Gtid`] (`domain-server-seqno`) and [`GtidPos`] (one GTID per domain).

use super::*;

/// A MariaDB global transaction id, `domain_id-server_id-sequence_number`
/// (e.g. `0-1-100`), as defined in the MariaDB Knowledge Base ("Global
/// Transaction ID").
///
/// Parsing is strict: exactly three `-`-separated decimal numbers, no signs,
/// no whitespace; leading zeros are accepted but printing is canonical
/// (`00-1-100` prints as `0-1-100`). Serializes as the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gtid {
    /// Replication domain (`gtid_domain_id`), an independent stream of
    /// transactions.
    pub domain_id: u32,
    /// `server_id` of the server that originally wrote the transaction.
    pub server_id: u32,
    /// Sequence number within the domain; increases with each transaction.
    pub seq_no: u64,
}

impl Gtid {
    /// A GTID from its three parts.
    pub const fn new(domain_id: u32, server_id: u32, seq_no: u64) -> Self {
        Gtid {
            domain_id,
            server_id,
            seq_no,
        }
    }
}

/// Parses a GTID, returning the reason text on failure.
fn parse_gtid(text: &str) -> Result<Gtid, String> {
    if text.is_empty() {
        return Err("expected DOMAIN-SERVER-SEQ, found an empty string".to_owned());
    }
    if text.chars().any(char::is_whitespace) {
        return Err("expected DOMAIN-SERVER-SEQ without whitespace".to_owned());
    }
    let parts: Vec<&str> = text.split('-').collect();
    let [domain, server, seq] = parts[..] else {
        let n = parts.len();
        let plural = if n == 1 { "" } else { "s" };
        return Err(format!(
            "expected DOMAIN-SERVER-SEQ (3 numbers separated by '-'), found {n} part{plural}"
        ));
    };
    let max32 = u64::from(u32::MAX);
    let domain_id =
        parse_decimal(domain, max32).ok_or_else(|| number_reason("domain_id", domain, max32))?;
    let server_id =
        parse_decimal(server, max32).ok_or_else(|| number_reason("server_id", server, max32))?;
    let seq_no =
        parse_decimal(seq, u64::MAX).ok_or_else(|| number_reason("seq_no", seq, u64::MAX))?;
    // Both were capped at u32::MAX by parse_decimal.
    Ok(Gtid::new(domain_id as u32, server_id as u32, seq_no))
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.domain_id, self.server_id, self.seq_no)
    }
}

impl FromStr for Gtid {
    type Err = PositionError;

    /// Parses `DOMAIN-SERVER-SEQ`.
    ///
    /// # Errors
    /// [`PositionError::InvalidGtid`] for an empty text, whitespace, a part
    /// count other than 3, a non-decimal part, or a part out of range
    /// (`domain_id`/`server_id` beyond `u32::MAX`, `seq_no` beyond
    /// `u64::MAX`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse_gtid(text).map_err(|reason| PositionError::InvalidGtid {
            text: text.to_owned(),
            reason,
        })
    }
}

serde_as_text!(Gtid);

/// A MariaDB GTID position: at most one [`Gtid`] per replication domain, the
/// text of `gtid_slave_pos` / `gtid_binlog_pos` / `gtid_current_pos`
/// (e.g. `0-1-100,1-2-7`; the empty string is the empty position).
///
/// Kept ordered by domain id. Printing is canonical: sorted by domain, comma
/// separated, no spaces. Parsing accepts whitespace around items and around
/// the whole text. Serializes as the text.
///
/// `==` compares the exact GTIDs (server ids included); [`GtidPos::compare`]
/// compares progress (seq_no per domain) the way MariaDB does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct GtidPos {
    by_domain: BTreeMap<u32, Gtid>,
}

impl GtidPos {
    /// The empty position (no domain seen).
    pub fn new() -> Self {
        GtidPos::default()
    }

    /// Whether no domain has a GTID.
    pub fn is_empty(&self) -> bool {
        self.by_domain.is_empty()
    }

    /// Number of domains.
    pub fn len(&self) -> usize {
        self.by_domain.len()
    }

    /// The GTID of `domain_id`, if any.
    pub fn get(&self, domain_id: u32) -> Option<&Gtid> {
        self.by_domain.get(&domain_id)
    }

    /// Sets `gtid` as its domain's position, replacing (and returning) any
    /// previous GTID of that domain — even one with a larger seq_no.
    pub fn update(&mut self, gtid: Gtid) -> Option<Gtid> {
        self.by_domain.insert(gtid.domain_id, gtid)
    }

    /// Whether `gtid` is at or before this position: this position has a
    /// GTID for `gtid`'s domain with `seq_no >= gtid.seq_no`. As in MariaDB,
    /// only the seq_no counts within a domain, whatever the server_id.
    pub fn contains(&self, gtid: &Gtid) -> bool {
        self.get(gtid.domain_id)
            .is_some_and(|ours| gtid.seq_no <= ours.seq_no)
    }

    /// Compares progress domain by domain (by seq_no; a domain missing on one
    /// side counts as behind the other side).
    ///
    /// Returns `Some(Equal)` when every domain has the same seq_no on both
    /// sides (server ids may differ), `Some(Less)` when `self` is behind or
    /// equal in every domain and behind in at least one, `Some(Greater)`
    /// symmetrically, and `None` when the positions diverged (`self` ahead in
    /// one domain and behind in another).
    pub fn compare(&self, other: &GtidPos) -> Option<Ordering> {
        let mut behind = false;
        let mut ahead = false;
        let domains = self.by_domain.keys().chain(other.by_domain.keys());
        for domain in domains {
            let ours = self.get(*domain).map(|g| g.seq_no);
            let theirs = other.get(*domain).map(|g| g.seq_no);
            // None < Some(_): a missing domain is behind.
            match ours.cmp(&theirs) {
                Ordering::Less => behind = true,
                Ordering::Greater => ahead = true,
                Ordering::Equal => {}
            }
        }
        match (behind, ahead) {
            (false, false) => Some(Ordering::Equal),
            (true, false) => Some(Ordering::Less),
            (false, true) => Some(Ordering::Greater),
            (true, true) => None,
        }
    }

    /// The GTIDs in domain order.
    pub fn iter(&self) -> std::collections::btree_map::Values<'_, u32, Gtid> {
        self.by_domain.values()
    }
}

impl<'a> IntoIterator for &'a GtidPos {
    type Item = &'a Gtid;
    type IntoIter = std::collections::btree_map::Values<'a, u32, Gtid>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl fmt::Display for GtidPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, gtid) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{gtid}")?;
        }
        Ok(())
    }
}

impl FromStr for GtidPos {
    type Err = PositionError;

    /// Parses comma separated GTIDs; whitespace around items is ignored; an
    /// empty or all-whitespace text is the empty position.
    ///
    /// # Errors
    /// [`PositionError::InvalidGtidPos`] for an empty item (`0-1-1,,1-1-1`,
    /// trailing comma) or an invalid GTID (the reason quotes the item);
    /// [`PositionError::DuplicateGtidDomain`] when a domain appears twice.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut pos = GtidPos::new();
        if text.trim().is_empty() {
            return Ok(pos);
        }
        for (i, item) in text.split(',').enumerate() {
            let item = item.trim();
            if item.is_empty() {
                return Err(PositionError::InvalidGtidPos {
                    text: text.to_owned(),
                    reason: format!(
                        "expected comma separated DOMAIN-SERVER-SEQ items, found an empty item at position {}",
                        i + 1
                    ),
                });
            }
            let gtid = parse_gtid(item).map_err(|reason| PositionError::InvalidGtidPos {
                text: text.to_owned(),
                reason: format!("item {item:?}: {reason}"),
            })?;
            if pos.update(gtid).is_some() {
                return Err(PositionError::DuplicateGtidDomain {
                    text: text.to_owned(),
                    domain_id: gtid.domain_id,
                });
            }
        }
        Ok(pos)
    }
}

serde_as_text!(GtidPos);
