//! The shard filter: whether a transaction is applied at all
//! (shared/DESIGN.md §1, §4, §5; Tungsten's `ShardFilter`).
//!
//! # Words
//!
//! - **this service**: the [`ShardFilter`]'s service name. A service reads
//!   the binlog of one master (its source) and applies to one replica; the
//!   source master is named by the service (service `nyc` reads master
//!   `nyc`'s binlog and, in the system-of-record pair of DESIGN, applies to
//!   master `sjc`).
//! - **origin**: the service on whose master a transaction was written: the
//!   transaction's `server_id` looked up in `[source] origin_services`. A
//!   server id that is not listed (or an empty `origin_services`) means
//!   *this service*: the transaction was written on the source master this
//!   service reads. That is also what shardrep's own channels produce:
//!   they write through client connections, so what they apply is logged
//!   with the server id of the server they apply to, not the original one.
//!
//! # Rules
//!
//! Checked in this order for a transaction of shard `S`, seqno `N`; the
//! first that matches decides. Every [`Decision`] carries a [`Reason`]: the
//! [`Rule`] that decided and a message for status and logs, always of the
//! form `VERB transaction from WHAT: seqno=N shard=S[ key=value...]`,
//! where VERB is `accepted` ([`Decision::Accept`]), `dropped`
//! ([`Decision::Drop`], [`Decision::WarnDrop`]) or `rejected`
//! ([`Decision::Error`]).
//!
//! 1. **Catalog** ([`Rule::Catalog`]): `S` is the catalog schema of this
//!    service (`replica.catalog_schema`, default `shardrep_<service>`) or
//!    `shardrep_<name>` for a service name the filter knows (this service,
//!    the `origin_services` names, the map's masters) → `Drop`, whatever
//!    the policies: shardrep's restart rows are never a user shard and are
//!    never replicated further.
//!    `dropped transaction from shardrep catalog schema: seqno=N shard=S`
//! 2. **`#UNKNOWN`** not in the map ([`Rule::UnknownMarker`]): a
//!    transaction that touches no schema, several schemas, or a statement
//!    that cannot be attributed. It is *not* an unknown shard in the
//!    `unknown_shard_policy` sense (as in Tungsten): it is accepted, and it
//!    is critical, so it runs alone. Under `enforce_home`, when its origin
//!    is another service, rule 6 applies instead (it reached the source by
//!    replication; applying it again could loop). A map may list
//!    `"#UNKNOWN"` with a master: then it follows rules 4 to 7 like any
//!    shard (e.g. `#UNKNOWN sjc`: only service `sjc` replicates
//!    cross-shard transactions, under `enforce_home`).
//!    `accepted transaction from #UNKNOWN shard: seqno=N shard=#UNKNOWN`
//! 3. **Unknown shard** ([`Rule::UnknownShard`]): `S` is not in the map.
//!    - With `auto_create`, `S` is added to the map (not critical) with its
//!      master the transaction's origin service — this service when the
//!      origin is unknown, as Tungsten does — and the transaction goes on
//!      to rules 4 to 7 (messages then say `auto-created shard`, or end with
//!      ` (shard auto-created)`). [`ShardFilter::take_created`] hands the
//!      new entries to the caller to persist.
//!    - Else `unknown_shard_policy` decides: `accept` → `Accept`, `drop` →
//!      `Drop`, `warn` → `WarnDrop`, `error` (the default) → `Error`.
//!      `rejected transaction from unknown shard: seqno=8 shard=newshard`
//! 4. **`#LOCAL`** ([`Rule::LocalShard`]): the map says `S` is written where
//!    it is and never replicated out of the service where it is written.
//!    Every applier moves a master's writes to another server, so every
//!    applier drops it — whatever `enforce_home`, the origin or the
//!    policies say (a transaction of a `#LOCAL` shard written on this
//!    service's master must not leave it; one written elsewhere reached the
//!    source by replication, which `#LOCAL` forbids as well).
//!    `dropped transaction from #LOCAL shard: seqno=N shard=S service=nyc`
//! 5. **Not home** ([`Rule::NotHome`], only with `enforce_home`): `S` is
//!    mastered by another service than this one → `unwanted_shard_policy`
//!    (default `drop`). Such a transaction reached this service's source by
//!    replication from its home; forwarding it would loop back or conflict.
//!    `dropped transaction from shard mastered by another service: seqno=N shard=S master=sjc service=nyc`
//! 6. **Foreign origin** ([`Rule::ForeignOrigin`], only with
//!    `enforce_home`): `S` is mastered by this service (or is `#UNKNOWN`)
//!    but the transaction's origin is another service (its server id maps
//!    to another name) → `unwanted_shard_policy`. It was written on the
//!    wrong master (a conflicting write) or replicated in natively.
//!    `dropped transaction from another service's master: seqno=N shard=S origin=sjc service=nyc`
//! 7. Otherwise `Accept`: [`Rule::HomeShard`] under `enforce_home`
//!    (`accepted transaction from home shard: seqno=N shard=S master=nyc`),
//!    [`Rule::MappedShard`] without it
//!    (`accepted transaction from mapped shard: seqno=N shard=S master=sjc`).
//!
//! Policies map to decisions as: `accept` → `Accept`, `drop` → `Drop`,
//! `warn` → `WarnDrop` (dropped and logged as a warning, as Tungsten's
//! `warn`), `error` → `Error` (the service stops `OFFLINE:ERROR` with the
//! message; [`Decision::rejection`] gives it as an error value).
//!
//! # The example of DESIGN
//!
//! Map `acme sjc`, `pinnacle nyc`, `superior #LOCAL`; service `nyc` with
//! `enforce_home = true` and `unknown_shard_policy = error`: `acme` is
//! dropped (rule 5: it reached `nyc` by replication from its home `sjc`),
//! `pinnacle` is accepted (rule 7), `superior` is dropped (rule 4) and a
//! transaction of `newshard` stops the service (rule 3):
//! `rejected transaction from unknown shard: seqno=8 shard=newshard`.
//!
//! The map can be edited between two decisions ([`ShardFilter::map_mut`]):
//! edits take effect at the next transaction.

use std::collections::BTreeMap;
use std::fmt;

use super::map::{check_service_name, check_shard_id, Master, ShardEntry, ShardMap};
use crate::catalog;
use crate::config::{Config, ShardFilterConfig, ShardPolicy};
use crate::event::{Transaction, UNKNOWN_SHARD};
use crate::position::Seqno;

/// Which rule of the filter decided (numbered as in the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// 1: the shardrep catalog schema.
    Catalog,
    /// 2: `#UNKNOWN`, not listed in the map.
    UnknownMarker,
    /// 3: a shard missing from the map.
    UnknownShard,
    /// 4: a `#LOCAL` shard.
    LocalShard,
    /// 5: mastered by another service (`enforce_home`).
    NotHome,
    /// 6: written on another service's master (`enforce_home`).
    ForeignOrigin,
    /// 7: mastered by this service and written on its master
    /// (`enforce_home`).
    HomeShard,
    /// 7: in the map, home not enforced.
    MappedShard,
}

impl Rule {
    /// A short name for status output: `catalog`, `unknown-marker`,
    /// `unknown-shard`, `local-shard`, `not-home`, `foreign-origin`,
    /// `home-shard`, `mapped-shard`.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Catalog => "catalog",
            Rule::UnknownMarker => "unknown-marker",
            Rule::UnknownShard => "unknown-shard",
            Rule::LocalShard => "local-shard",
            Rule::NotHome => "not-home",
            Rule::ForeignOrigin => "foreign-origin",
            Rule::HomeShard => "home-shard",
            Rule::MappedShard => "mapped-shard",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the filter decided as it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    /// The rule that decided.
    pub rule: Rule,
    /// The transaction's seqno.
    pub seqno: Seqno,
    /// The transaction's shard.
    pub shard: String,
    /// Whether this decision added the shard to the map (`auto_create`).
    pub created: bool,
    /// The message for status and logs (forms in the module doc).
    pub message: String,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// What to do with one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Apply it.
    Accept(Reason),
    /// Skip it (counted in status).
    Drop(Reason),
    /// Skip it and log the reason as a warning.
    WarnDrop(Reason),
    /// Stop the service (`OFFLINE:ERROR`) with the reason.
    Error(Reason),
}

impl Decision {
    /// The reason, whatever the decision.
    pub fn reason(&self) -> &Reason {
        match self {
            Decision::Accept(r)
            | Decision::Drop(r)
            | Decision::WarnDrop(r)
            | Decision::Error(r) => r,
        }
    }

    /// Whether the transaction is to be applied.
    pub fn applies(&self) -> bool {
        matches!(self, Decision::Accept(_))
    }

    /// For [`Decision::Error`], the error to stop with.
    pub fn rejection(&self) -> Option<Rejected> {
        match self {
            Decision::Error(r) => Some(Rejected {
                seqno: r.seqno,
                shard: r.shard.clone(),
                rule: r.rule,
                message: r.message.clone(),
            }),
            _ => None,
        }
    }
}

/// A transaction the filter refused under an `error` policy. Displays as
/// the reason's message, e.g.
/// `rejected transaction from unknown shard: seqno=8 shard=newshard`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Rejected {
    /// The transaction's seqno.
    pub seqno: Seqno,
    /// Its shard.
    pub shard: String,
    /// The rule that rejected it.
    pub rule: Rule,
    /// The message.
    pub message: String,
}

/// The shard filter of one service (rules in the module doc).
#[derive(Debug, Clone)]
pub struct ShardFilter {
    service: String,
    map: ShardMap,
    enforce_home: bool,
    unknown_shard_policy: ShardPolicy,
    unwanted_shard_policy: ShardPolicy,
    auto_create: bool,
    origin_services: BTreeMap<u32, String>,
    catalog_schema: String,
    created: Vec<ShardEntry>,
}

impl ShardFilter {
    /// A filter for service `service` with `map` and the default settings
    /// of `[shard_filter]` (`enforce_home = false`,
    /// `unknown_shard_policy = error`, `unwanted_shard_policy = drop`,
    /// `auto_create = false`), no `origin_services`, and the catalog schema
    /// `shardrep_<service>`.
    pub fn new(service: impl Into<String>, map: ShardMap) -> Self {
        let service = service.into();
        let d = ShardFilterConfig::default();
        ShardFilter {
            catalog_schema: catalog::default_schema(&service),
            service,
            map,
            enforce_home: d.enforce_home,
            unknown_shard_policy: d.unknown_shard_policy,
            unwanted_shard_policy: d.unwanted_shard_policy,
            auto_create: d.auto_create,
            origin_services: BTreeMap::new(),
            created: Vec::new(),
        }
    }

    /// The filter a configuration describes: `service.name`,
    /// `[shard_filter]`, `[source] origin_services` and
    /// [`Config::catalog_schema`], with `map` (loaded by the caller from
    /// `shard_filter.map_file` or the service's store).
    pub fn from_config(config: &Config, map: ShardMap) -> Self {
        ShardFilter::new(config.service.name.clone(), map)
            .with_settings(&config.shard_filter)
            .with_origin_services(config.source.origin_services.clone())
            .with_catalog_schema(config.catalog_schema())
    }

    /// Takes `enforce_home`, the two policies and `auto_create` from
    /// `settings` (`map_file` is the caller's).
    pub fn with_settings(mut self, settings: &ShardFilterConfig) -> Self {
        self.enforce_home = settings.enforce_home;
        self.unknown_shard_policy = settings.unknown_shard_policy;
        self.unwanted_shard_policy = settings.unwanted_shard_policy;
        self.auto_create = settings.auto_create;
        self
    }

    /// Sets `[source] origin_services`: server id → service name.
    pub fn with_origin_services(mut self, origin_services: BTreeMap<u32, String>) -> Self {
        self.origin_services = origin_services;
        self
    }

    /// Sets the catalog schema (default `shardrep_<service>`).
    pub fn with_catalog_schema(mut self, schema: impl Into<String>) -> Self {
        self.catalog_schema = schema.into();
        self
    }

    /// This service's name.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// The shard map.
    pub fn map(&self) -> &ShardMap {
        &self.map
    }

    /// The shard map, to edit; edits apply from the next decision.
    pub fn map_mut(&mut self) -> &mut ShardMap {
        &mut self.map
    }

    /// The entries `auto_create` added since the last call, in order, for
    /// the caller to persist.
    pub fn take_created(&mut self) -> Vec<ShardEntry> {
        std::mem::take(&mut self.created)
    }

    /// The origin service of `server_id` per `origin_services`, `None`
    /// when not listed (which the rules read as this service).
    pub fn origin_of(&self, server_id: u32) -> Option<&str> {
        self.origin_services.get(&server_id).map(String::as_str)
    }

    /// Decides for a transaction: its shard, its origin (its `server_id`
    /// through `origin_services`) and its seqno.
    pub fn decide_transaction(&mut self, txn: &Transaction) -> Decision {
        let origin = self.origin_of(txn.server_id).map(str::to_string);
        self.decide(&txn.shard, origin.as_deref(), txn.seqno)
    }

    /// Decides for a transaction of shard `shard`, written on the master of
    /// `origin_service` (`None`: unknown, read as this service), numbered
    /// `seqno`. Rules and messages in the module doc.
    pub fn decide(&mut self, shard: &str, origin_service: Option<&str>, seqno: Seqno) -> Decision {
        let origin = origin_service.unwrap_or(&self.service).to_string();
        let ctx = Ctx {
            seqno,
            shard,
            created: false,
        };
        if self.is_catalog(shard) {
            return ctx.decide(
                ShardPolicy::Drop,
                Rule::Catalog,
                "shardrep catalog schema",
                String::new(),
            );
        }
        let mut ctx = ctx;
        let entry = match self.map.get(shard) {
            Some(entry) => entry.clone(),
            None if shard == UNKNOWN_SHARD => {
                if self.enforce_home && origin != self.service {
                    return self.foreign_origin(&ctx, &origin);
                }
                return ctx.decide(
                    ShardPolicy::Accept,
                    Rule::UnknownMarker,
                    "#UNKNOWN shard",
                    String::new(),
                );
            }
            None => {
                if !self.auto_create || check_shard_id(shard).is_err() {
                    return ctx.decide(
                        self.unknown_shard_policy,
                        Rule::UnknownShard,
                        "unknown shard",
                        String::new(),
                    );
                }
                let master = if check_service_name(&origin).is_ok() {
                    origin.clone()
                } else {
                    self.service.clone()
                };
                let entry = ShardEntry {
                    shard_id: shard.to_string(),
                    master: Master::Service(master),
                    critical: false,
                };
                self.map
                    .insert(entry.clone())
                    .expect("absent and checked above");
                self.created.push(entry.clone());
                ctx.created = true;
                entry
            }
        };
        match &entry.master {
            Master::Local => ctx.decide(
                ShardPolicy::Drop,
                Rule::LocalShard,
                "#LOCAL shard",
                format!(" service={}", self.service),
            ),
            Master::Service(master) if self.enforce_home => {
                if *master != self.service {
                    ctx.decide(
                        self.unwanted_shard_policy,
                        Rule::NotHome,
                        "shard mastered by another service",
                        format!(" master={master} service={}", self.service),
                    )
                } else if origin != self.service {
                    self.foreign_origin(&ctx, &origin)
                } else {
                    ctx.decide(
                        ShardPolicy::Accept,
                        Rule::HomeShard,
                        "home shard",
                        format!(" master={master}"),
                    )
                }
            }
            Master::Service(master) => ctx.decide(
                ShardPolicy::Accept,
                Rule::MappedShard,
                "mapped shard",
                format!(" master={master}"),
            ),
        }
    }

    fn foreign_origin(&self, ctx: &Ctx<'_>, origin: &str) -> Decision {
        ctx.decide(
            self.unwanted_shard_policy,
            Rule::ForeignOrigin,
            "another service's master",
            format!(" origin={origin} service={}", self.service),
        )
    }

    /// Rule 1: the configured catalog schema, or `shardrep_<name>` for a
    /// known service name.
    fn is_catalog(&self, shard: &str) -> bool {
        if shard == self.catalog_schema {
            return true;
        }
        let Some(name) = shard.strip_prefix(catalog::PREFIX) else {
            return false;
        };
        name == self.service
            || self.origin_services.values().any(|s| s == name)
            || self.map.iter().any(|e| e.master.is_service(name))
    }
}

/// The transaction being decided.
struct Ctx<'a> {
    seqno: Seqno,
    shard: &'a str,
    created: bool,
}

impl Ctx<'_> {
    fn decide(&self, policy: ShardPolicy, rule: Rule, what: &str, extra: String) -> Decision {
        let (verb, make): (&str, fn(Reason) -> Decision) = match policy {
            ShardPolicy::Accept => ("accepted", Decision::Accept),
            ShardPolicy::Drop => ("dropped", Decision::Drop),
            ShardPolicy::Warn => ("dropped", Decision::WarnDrop),
            ShardPolicy::Error => ("rejected", Decision::Error),
        };
        let accepted_as_created = self.created && policy == ShardPolicy::Accept;
        let what = if accepted_as_created {
            "auto-created shard"
        } else {
            what
        };
        let suffix = if self.created && !accepted_as_created {
            " (shard auto-created)"
        } else {
            ""
        };
        make(Reason {
            rule,
            seqno: self.seqno,
            shard: self.shard.to_string(),
            created: self.created,
            message: format!(
                "{verb} transaction from {what}: seqno={} shard={}{extra}{suffix}",
                self.seqno, self.shard
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn design_map() -> ShardMap {
        ShardMap::parse(
            "shard_id master critical\nacme sjc false\npinnacle nyc false\nsuperior #LOCAL false\n",
            "design",
        )
        .unwrap()
    }

    fn settings(
        enforce_home: bool,
        unknown: ShardPolicy,
        unwanted: ShardPolicy,
    ) -> ShardFilterConfig {
        ShardFilterConfig {
            map_file: None,
            enforce_home,
            unknown_shard_policy: unknown,
            unwanted_shard_policy: unwanted,
            auto_create: false,
        }
    }

    fn nyc(enforce_home: bool, unknown: ShardPolicy, unwanted: ShardPolicy) -> ShardFilter {
        ShardFilter::new("nyc", design_map()).with_settings(&settings(
            enforce_home,
            unknown,
            unwanted,
        ))
    }

    /// (kind, rule, message) of a decision.
    fn outcome(d: &Decision) -> (&'static str, Rule, &str) {
        let kind = match d {
            Decision::Accept(_) => "accept",
            Decision::Drop(_) => "drop",
            Decision::WarnDrop(_) => "warn-drop",
            Decision::Error(_) => "error",
        };
        (kind, d.reason().rule, d.reason().message.as_str())
    }

    #[test]
    fn design_example() {
        let mut f = nyc(true, ShardPolicy::Error, ShardPolicy::Drop);
        let acme = f.decide("acme", None, Seqno(5));
        assert_eq!(
            outcome(&acme),
            (
                "drop",
                Rule::NotHome,
                "dropped transaction from shard mastered by another service: seqno=5 shard=acme master=sjc service=nyc"
            )
        );
        let pinnacle = f.decide("pinnacle", None, Seqno(6));
        assert_eq!(
            outcome(&pinnacle),
            (
                "accept",
                Rule::HomeShard,
                "accepted transaction from home shard: seqno=6 shard=pinnacle master=nyc"
            )
        );
        assert!(pinnacle.applies());
        let superior = f.decide("superior", None, Seqno(7));
        assert_eq!(
            outcome(&superior),
            (
                "drop",
                Rule::LocalShard,
                "dropped transaction from #LOCAL shard: seqno=7 shard=superior service=nyc"
            )
        );
        let newshard = f.decide("newshard", None, Seqno(8));
        assert_eq!(
            outcome(&newshard),
            (
                "error",
                Rule::UnknownShard,
                "rejected transaction from unknown shard: seqno=8 shard=newshard"
            )
        );
        let rejected = newshard.rejection().unwrap();
        assert_eq!(
            rejected.to_string(),
            "rejected transaction from unknown shard: seqno=8 shard=newshard"
        );
        assert_eq!(
            (rejected.seqno, rejected.shard.as_str()),
            (Seqno(8), "newshard")
        );
        assert_eq!(f.map(), &design_map(), "no auto-create");
        assert!(acme.rejection().is_none());
    }

    #[test]
    fn design_example_with_origins() {
        // With origin_services, the same holds whether acme's transactions
        // keep sjc's server id (native replication) or carry nyc's
        // (shardrep's sjc service applied them to nyc).
        let origins = BTreeMap::from([(1, "sjc".to_string()), (2, "nyc".to_string())]);
        let mut f = nyc(true, ShardPolicy::Error, ShardPolicy::Drop).with_origin_services(origins);
        for origin in [Some("sjc"), Some("nyc"), None] {
            assert_eq!(
                outcome(&f.decide("acme", origin, Seqno(1))).1,
                Rule::NotHome
            );
            assert_eq!(
                outcome(&f.decide("superior", origin, Seqno(1))).1,
                Rule::LocalShard
            );
        }
        assert_eq!(f.origin_of(1), Some("sjc"));
        assert_eq!(f.origin_of(3), None);
    }

    #[test]
    fn transactions_are_decided_by_their_server_id() {
        let origins = BTreeMap::from([(1, "sjc".to_string()), (2, "nyc".to_string())]);
        let mut f = nyc(true, ShardPolicy::Error, ShardPolicy::Drop).with_origin_services(origins);
        let txn = |server_id: u32, shard: &str| Transaction {
            seqno: Seqno(3),
            server_id,
            gtid: None,
            commit_id: None,
            start_position: crate::position::BinlogPosition::new("b.000001", 4).unwrap(),
            end_position: crate::position::BinlogPosition::new("b.000001", 40).unwrap(),
            commit_timestamp: 0,
            shard: shard.to_string(),
            tables: Vec::new(),
            changes: Vec::new(),
            row_events: None,
            fragment: None,
        };
        assert_eq!(
            outcome(&f.decide_transaction(&txn(2, "pinnacle"))).1,
            Rule::HomeShard
        );
        assert_eq!(
            outcome(&f.decide_transaction(&txn(9, "pinnacle"))).1,
            Rule::HomeShard
        );
        assert_eq!(
            outcome(&f.decide_transaction(&txn(1, "pinnacle"))),
            (
                "drop",
                Rule::ForeignOrigin,
                "dropped transaction from another service's master: seqno=3 shard=pinnacle origin=sjc service=nyc"
            )
        );
    }

    #[test]
    fn unknown_shard_policies() {
        for (policy, kind, verb) in [
            (ShardPolicy::Accept, "accept", "accepted"),
            (ShardPolicy::Drop, "drop", "dropped"),
            (ShardPolicy::Warn, "warn-drop", "dropped"),
            (ShardPolicy::Error, "error", "rejected"),
        ] {
            for enforce_home in [false, true] {
                let mut f = nyc(enforce_home, policy, ShardPolicy::Drop);
                let d = f.decide("superior2", Some("sjc"), Seqno(8));
                assert_eq!(
                    outcome(&d),
                    (
                        kind,
                        Rule::UnknownShard,
                        format!("{verb} transaction from unknown shard: seqno=8 shard=superior2")
                            .as_str()
                    )
                );
                assert_eq!(d.applies(), policy == ShardPolicy::Accept);
            }
        }
        // The text of the issue.
        let mut f = ShardFilter::new("nyc", ShardMap::new());
        assert_eq!(
            f.decide("superior", None, Seqno(8)).reason().to_string(),
            "rejected transaction from unknown shard: seqno=8 shard=superior"
        );
    }

    #[test]
    fn unwanted_shard_policies() {
        for (policy, kind, verb) in [
            (ShardPolicy::Accept, "accept", "accepted"),
            (ShardPolicy::Drop, "drop", "dropped"),
            (ShardPolicy::Warn, "warn-drop", "dropped"),
            (ShardPolicy::Error, "error", "rejected"),
        ] {
            let mut f = nyc(true, ShardPolicy::Error, policy);
            assert_eq!(
                outcome(&f.decide("acme", None, Seqno(2))),
                (
                    kind,
                    Rule::NotHome,
                    format!("{verb} transaction from shard mastered by another service: seqno=2 shard=acme master=sjc service=nyc").as_str()
                )
            );
            assert_eq!(
                outcome(&f.decide("pinnacle", Some("sjc"), Seqno(3))),
                (
                    kind,
                    Rule::ForeignOrigin,
                    format!("{verb} transaction from another service's master: seqno=3 shard=pinnacle origin=sjc service=nyc").as_str()
                )
            );
            // #LOCAL ignores the unwanted policy.
            assert_eq!(outcome(&f.decide("superior", None, Seqno(4))).0, "drop");
        }
    }

    #[test]
    fn without_enforce_home_every_mapped_shard_but_local_is_applied() {
        let mut f = nyc(false, ShardPolicy::Error, ShardPolicy::Error);
        assert_eq!(
            outcome(&f.decide("acme", Some("sjc"), Seqno(1))),
            (
                "accept",
                Rule::MappedShard,
                "accepted transaction from mapped shard: seqno=1 shard=acme master=sjc"
            )
        );
        assert_eq!(
            outcome(&f.decide("pinnacle", Some("sjc"), Seqno(2))).1,
            Rule::MappedShard
        );
        assert_eq!(
            outcome(&f.decide("superior", None, Seqno(3))),
            (
                "drop",
                Rule::LocalShard,
                "dropped transaction from #LOCAL shard: seqno=3 shard=superior service=nyc"
            )
        );
    }

    #[test]
    fn unknown_marker_is_accepted_unless_it_came_from_elsewhere_under_enforce_home() {
        for enforce_home in [false, true] {
            let mut f = nyc(enforce_home, ShardPolicy::Error, ShardPolicy::Drop);
            assert_eq!(
                outcome(&f.decide(UNKNOWN_SHARD, None, Seqno(4))),
                (
                    "accept",
                    Rule::UnknownMarker,
                    "accepted transaction from #UNKNOWN shard: seqno=4 shard=#UNKNOWN"
                )
            );
            assert_eq!(
                outcome(&f.decide(UNKNOWN_SHARD, Some("nyc"), Seqno(4))).1,
                Rule::UnknownMarker
            );
            let from_sjc = f.decide(UNKNOWN_SHARD, Some("sjc"), Seqno(5));
            if enforce_home {
                assert_eq!(
                    outcome(&from_sjc),
                    (
                        "drop",
                        Rule::ForeignOrigin,
                        "dropped transaction from another service's master: seqno=5 shard=#UNKNOWN origin=sjc service=nyc"
                    )
                );
            } else {
                assert_eq!(outcome(&from_sjc).1, Rule::UnknownMarker);
            }
            assert!(
                f.take_created().is_empty(),
                "#UNKNOWN is never auto-created"
            );
        }
    }

    #[test]
    fn a_mapped_unknown_marker_follows_its_master() {
        let map =
            ShardMap::parse("shard_id master critical\n\"#UNKNOWN\" sjc true\n", "t").unwrap();
        let mut f = ShardFilter::new("nyc", map.clone()).with_settings(&settings(
            true,
            ShardPolicy::Error,
            ShardPolicy::Drop,
        ));
        assert_eq!(
            outcome(&f.decide(UNKNOWN_SHARD, None, Seqno(1))).1,
            Rule::NotHome
        );
        let mut f = ShardFilter::new("sjc", map).with_settings(&settings(
            true,
            ShardPolicy::Error,
            ShardPolicy::Drop,
        ));
        assert_eq!(
            outcome(&f.decide(UNKNOWN_SHARD, None, Seqno(1))).1,
            Rule::HomeShard
        );
    }

    #[test]
    fn catalog_schemas_are_always_dropped() {
        let origins = BTreeMap::from([(1, "sjc".to_string())]);
        let mut f = nyc(false, ShardPolicy::Accept, ShardPolicy::Accept)
            .with_origin_services(origins)
            .with_catalog_schema("repl_meta");
        for shard in ["repl_meta", "shardrep_nyc", "shardrep_sjc"] {
            assert_eq!(
                outcome(&f.decide(shard, None, Seqno(9))),
                (
                    "drop",
                    Rule::Catalog,
                    format!(
                        "dropped transaction from shardrep catalog schema: seqno=9 shard={shard}"
                    )
                    .as_str()
                )
            );
        }
        // Not a known service: an ordinary (here unknown) shard.
        assert_eq!(
            outcome(&f.decide("shardrep_x", None, Seqno(9))).1,
            Rule::UnknownShard
        );
        // Default catalog schema.
        let mut f = ShardFilter::new("lon", ShardMap::new());
        assert_eq!(
            outcome(&f.decide("shardrep_lon", None, Seqno(1))).1,
            Rule::Catalog
        );
    }

    #[test]
    fn auto_create_adds_the_shard_with_its_origin_as_master() {
        let mut s = settings(false, ShardPolicy::Error, ShardPolicy::Drop);
        s.auto_create = true;
        let mut f = ShardFilter::new("nyc", design_map()).with_settings(&s);
        assert_eq!(
            outcome(&f.decide("newshard", None, Seqno(8))),
            (
                "accept",
                Rule::MappedShard,
                "accepted transaction from auto-created shard: seqno=8 shard=newshard master=nyc"
            )
        );
        assert_eq!(
            f.map().get("newshard"),
            Some(&ShardEntry::new("newshard", Master::Service("nyc".into()), false).unwrap())
        );
        // Second transaction: an ordinary mapped shard now.
        let d = f.decide("newshard", None, Seqno(9));
        assert!(!d.reason().created);
        assert_eq!(outcome(&d).1, Rule::MappedShard);
        // Under enforce_home, a shard first seen in a transaction from sjc
        // is mastered by sjc, and that transaction is not nyc's to forward.
        s.enforce_home = true;
        f = f.with_settings(&s);
        let d = f.decide("born_at_sjc", Some("sjc"), Seqno(10));
        assert_eq!(
            outcome(&d),
            (
                "drop",
                Rule::NotHome,
                "dropped transaction from shard mastered by another service: seqno=10 shard=born_at_sjc master=sjc service=nyc (shard auto-created)"
            )
        );
        assert!(d.reason().created);
        assert_eq!(
            outcome(&f.decide("born_here", None, Seqno(11))).1,
            Rule::HomeShard
        );
        let created: Vec<String> = f
            .take_created()
            .into_iter()
            .map(|e| format!("{} {}", e.shard_id, e.master))
            .collect();
        assert_eq!(
            created,
            ["newshard nyc", "born_at_sjc sjc", "born_here nyc"]
        );
        assert!(f.take_created().is_empty());
        // A shard id the map cannot hold falls back to the unknown policy.
        assert_eq!(
            outcome(&f.decide("#odd", None, Seqno(12))).1,
            Rule::UnknownShard
        );
    }

    #[test]
    fn map_edits_apply_to_the_next_decision() {
        let mut f = nyc(true, ShardPolicy::Error, ShardPolicy::Drop);
        assert_eq!(outcome(&f.decide("acme", None, Seqno(1))).0, "drop");
        f.map_mut()
            .update(ShardEntry::new("acme", Master::Service("nyc".into()), false).unwrap())
            .unwrap();
        assert_eq!(outcome(&f.decide("acme", None, Seqno(2))).0, "accept");
        f.map_mut().delete("acme").unwrap();
        assert_eq!(outcome(&f.decide("acme", None, Seqno(3))).0, "error");
    }

    #[test]
    fn from_config_takes_every_setting() {
        let text = r#"
[service]
name = "nyc"
[source]
kind = "files"
binlog_dir = "/tmp/b"
[source.origin_services]
1 = "sjc"
[replica]
host = "127.0.0.1"
user = "u"
password = "p"
catalog_schema = "meta"
[queue]
dir = "/tmp/q"
[shard_filter]
enforce_home = true
unknown_shard_policy = "warn"
unwanted_shard_policy = "error"
[control]
socket = "/tmp/s.sock"
"#;
        let config = Config::from_toml_str(text, "t.toml").unwrap();
        let mut f = ShardFilter::from_config(&config, design_map());
        assert_eq!(f.service(), "nyc");
        assert_eq!(outcome(&f.decide("x", None, Seqno(1))).0, "warn-drop");
        assert_eq!(outcome(&f.decide("acme", None, Seqno(1))).0, "error");
        assert_eq!(outcome(&f.decide("meta", None, Seqno(1))).1, Rule::Catalog);
        assert_eq!(
            outcome(&f.decide("shardrep_sjc", None, Seqno(1))).1,
            Rule::Catalog
        );
        assert_eq!(f.origin_of(1), Some("sjc"));
    }
}
