//! Unknown keys: every key of the document that no section accepts is a
//! problem of its dotted path, naming the accepted key it is closest to
//! when one is near (`replica.pasword: unknown key (did you mean
//! `password`?)`).
//!
//! serde itself tells which keys it ignores ([`serde_ignored`]); the keys a
//! section accepts are the field names its derived `Deserialize` declares
//! ([`serde_introspect`]), so neither can drift from the raw sections; the
//! nearness is the Levenshtein distance ([`strsim::levenshtein`]).

use serde_aux::serde_introspection::serde_introspect;

use super::raw::{
    RawApply, RawConfig, RawControl, RawMetrics, RawQueue, RawReplica, RawService, RawShardFilter,
    RawSource,
};
use super::ConfigProblem;

/// Largest edit distance between an unknown key and the key it is taken
/// for a misspelling of.
const MAX_SUGGESTION_DISTANCE: usize = 2;

/// The sections, in the order of the document's description (the order
/// problems are listed in).
pub(super) fn sections() -> &'static [&'static str] {
    serde_introspect::<RawConfig>()
}

/// The keys `section` accepts, or `None` for a section that does not
/// exist.
pub(super) fn section_fields(section: &str) -> Option<&'static [&'static str]> {
    Some(match section {
        "service" => serde_introspect::<RawService>(),
        "source" => serde_introspect::<RawSource>(),
        "replica" => serde_introspect::<RawReplica>(),
        "queue" => serde_introspect::<RawQueue>(),
        "apply" => serde_introspect::<RawApply>(),
        "shard_filter" => serde_introspect::<RawShardFilter>(),
        "control" => serde_introspect::<RawControl>(),
        "metrics" => serde_introspect::<RawMetrics>(),
        _ => return None,
    })
}

/// Removes from `table` every section and every key of a section that the
/// raw sections do not accept, and returns one problem per key removed
/// (a key inside a free-form table such as `source.origin_services` is the
/// value's business, not an unknown key).
///
/// Each key is judged alone (deserialized on its own into [`RawConfig`]),
/// so that a wrongly typed value cannot hide the unknown keys after it.
pub(super) fn strip_unknown_keys(table: &mut toml::Table) -> Vec<ConfigProblem> {
    let mut problems = Vec::new();
    table.retain(|section, value| {
        if let Some(path) = ignored_path(section, None) {
            problems.push(unknown_key(path, sections(), section));
            return false;
        }
        if let toml::Value::Table(keys) = value {
            let fields = section_fields(section).unwrap_or_default();
            keys.retain(
                |key, value| match ignored_path(section, Some((key, &*value))) {
                    Some(path) => {
                        problems.push(unknown_key(path, fields, key));
                        false
                    }
                    None => true,
                },
            );
        }
        true
    });
    problems
}

/// The dotted path serde ignores when the document holds only `section`
/// (empty) or only `section.key = value`; `None` when it takes it.
fn ignored_path(section: &str, key: Option<(&str, &toml::Value)>) -> Option<String> {
    let mut inner = toml::Table::new();
    if let Some((key, value)) = key {
        inner.insert(key.to_string(), value.clone());
    }
    let mut probe = toml::Table::new();
    probe.insert(section.to_string(), toml::Value::Table(inner));
    let mut ignored = None;
    // A wrongly typed value fails here; it is a known key, and the real
    // deserialization reports the type error.
    let _ = serde_ignored::deserialize::<_, _, RawConfig>(toml::Value::Table(probe), |path| {
        ignored.get_or_insert_with(|| path.to_string());
    });
    ignored
}

/// `unknown key`, with `(did you mean `K`?)` for the nearest of `known`
/// within [`MAX_SUGGESTION_DISTANCE`] edits (the first in name order on a
/// tie).
fn unknown_key(path: String, known: &[&str], key: &str) -> ConfigProblem {
    let closest = known
        .iter()
        .map(|k| (strsim::levenshtein(k, key), *k))
        .filter(|(d, _)| *d <= MAX_SUGGESTION_DISTANCE)
        .min();
    match closest {
        Some((_, k)) => ConfigProblem::new(path, format!("unknown key (did you mean `{k}`?)")),
        None => ConfigProblem::new(path, "unknown key"),
    }
}
