//! The service's state machine (DESIGN §6, issue 7), modelled on Tungsten's
//! replicator states.
//!
//! ```text
//!                    Online                      Synchronized
//!  OFFLINE:NORMAL ──────────> GOING-ONLINE: ──────────────> ONLINE
//!        ^                    SYNCHRONIZING                   │
//!        │                         │ Offline,                 │ Offline,
//!        │ OfflineDone             │ OfflineImmediate         │ OfflineImmediate
//!        │                         v                          v
//!        └──────────────────── GOING-OFFLINE <────────────────┘
//!                                 (OfflineImmediate: stays, now immediate)
//!
//!  GOING-ONLINE:SYNCHRONIZING, ONLINE, GOING-OFFLINE ──Fail──> OFFLINE:ERROR
//!  OFFLINE:ERROR ──Online (retry)──> GOING-ONLINE:SYNCHRONIZING
//!  OFFLINE:ERROR ──Offline, OfflineImmediate (acknowledge)──> OFFLINE:NORMAL
//!  OFFLINE:ERROR ──Fail──> OFFLINE:ERROR (the first error is kept)
//! ```
//!
//! [`transition`] is the pure rule; every pair not drawn above is an
//! [`IllegalTransition`]. [`StateMachine`] adds what the service shows in
//! `status`: the time of the last change, the [`PendingError`] of
//! `OFFLINE:ERROR` (kept, while offline, until the service says it is
//! resolved), and whether the last offline was clean (the condition of a
//! handback); and it numbers the offlines it completes ([`OfflineEnd`]),
//! so that a client waiting for its own offline is answered even when
//! another request changed the state right after.
//!
//! [`SkipSeqnos`] is the parsed `online --skip-seqno N[,M-K]` list.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// A state of the service; displays (and serializes) as trepctl spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    /// `OFFLINE:NORMAL`: nothing runs; the state at start and after a clean
    /// or immediate offline.
    OfflineNormal,
    /// `GOING-ONLINE:SYNCHRONIZING`: connecting, taking over, starting the
    /// extractor and the channels.
    GoingOnlineSynchronizing,
    /// `ONLINE`: extracting and applying.
    Online,
    /// `GOING-OFFLINE`: channels draining to a common seqno (clean), or
    /// stopping after their current block (immediate).
    GoingOffline,
    /// `OFFLINE:ERROR`: stopped on a definite error; see [`PendingError`].
    OfflineError,
}

impl State {
    /// Every state, in the order of the diagram.
    pub const ALL: [State; 5] = [
        State::OfflineNormal,
        State::GoingOnlineSynchronizing,
        State::Online,
        State::GoingOffline,
        State::OfflineError,
    ];

    /// The trepctl spelling, e.g. `GOING-ONLINE:SYNCHRONIZING`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::OfflineNormal => "OFFLINE:NORMAL",
            State::GoingOnlineSynchronizing => "GOING-ONLINE:SYNCHRONIZING",
            State::Online => "ONLINE",
            State::GoingOffline => "GOING-OFFLINE",
            State::OfflineError => "OFFLINE:ERROR",
        }
    }

    /// Whether nothing runs (`OFFLINE:NORMAL` or `OFFLINE:ERROR`).
    pub fn is_offline(self) -> bool {
        matches!(self, State::OfflineNormal | State::OfflineError)
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A text that is not a state name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown state {text:?}: expected one of OFFLINE:NORMAL, GOING-ONLINE:SYNCHRONIZING, ONLINE, GOING-OFFLINE, OFFLINE:ERROR")]
pub struct UnknownState {
    /// The text given.
    pub text: String,
}

impl FromStr for State {
    type Err = UnknownState;

    /// Parses the trepctl spelling, ASCII case-insensitively
    /// (`online` is `ONLINE`).
    ///
    /// # Errors
    /// [`UnknownState`] for anything else.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        State::ALL
            .into_iter()
            .find(|s| s.as_str().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| UnknownState {
                text: text.to_string(),
            })
    }
}

impl Serialize for State {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for State {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Longest `pendingExceptionMessage` kept, in characters; the rest is
/// elided (the message often quotes the failed SQL, which can be long).
pub const EXCEPTION_MESSAGE_MAX_CHARS: usize = 1000;

/// The definite error that put the service in `OFFLINE:ERROR`, with
/// trepctl's field names when serialized.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PendingError {
    /// `pendingError`: what failed, one line, e.g.
    /// `channel 3: duplicate key applying seqno 812`.
    #[serde(rename = "pendingError")]
    pub message: String,
    /// `pendingErrorCode`: the server's error code (e.g. 1062), when the
    /// error came from the replica.
    #[serde(rename = "pendingErrorCode")]
    pub code: Option<u32>,
    /// `pendingErrorSeqno`: the seqno of the failed transaction.
    #[serde(rename = "pendingErrorSeqno")]
    pub seqno: Option<u64>,
    /// `pendingErrorEventId`: its binlog position (`file:pos`).
    #[serde(rename = "pendingErrorEventId")]
    pub event_id: Option<String>,
    /// `pendingErrorShard`: its shard.
    #[serde(rename = "pendingErrorShard")]
    pub shard: Option<String>,
    /// `pendingErrorChannel`: the channel that failed.
    #[serde(rename = "pendingErrorChannel")]
    pub channel: Option<u16>,
    /// `pendingExceptionMessage`: the underlying error's text (server
    /// message, failed SQL), at most [`EXCEPTION_MESSAGE_MAX_CHARS`]
    /// characters; set it with [`PendingError::with_exception_message`].
    #[serde(rename = "pendingExceptionMessage")]
    pub exception_message: Option<String>,
}

impl PendingError {
    /// An error with only its message; fill the other fields as known.
    pub fn new(message: impl Into<String>) -> Self {
        PendingError {
            message: message.into(),
            code: None,
            seqno: None,
            event_id: None,
            shard: None,
            channel: None,
            exception_message: None,
        }
    }

    /// Sets `pendingExceptionMessage`, eliding what is beyond
    /// [`EXCEPTION_MESSAGE_MAX_CHARS`] characters as
    /// `... (N more characters)`.
    pub fn with_exception_message(mut self, text: &str) -> Self {
        self.exception_message = Some(elide(text, EXCEPTION_MESSAGE_MAX_CHARS));
        self
    }
}

impl fmt::Display for PendingError {
    /// The message, then `seqno N`, `event id F:P`, `shard S`, `channel C`,
    /// `code N` where known.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(n) = self.seqno {
            write!(f, "; seqno {n}")?;
        }
        if let Some(e) = &self.event_id {
            write!(f, "; event id {e}")?;
        }
        if let Some(s) = &self.shard {
            write!(f, "; shard {s}")?;
        }
        if let Some(c) = self.channel {
            write!(f, "; channel {c}")?;
        }
        if let Some(c) = self.code {
            write!(f, "; code {c}")?;
        }
        Ok(())
    }
}

/// `text` cut to `max` characters, with ` ... (N more characters)` when
/// something was cut.
pub fn elide(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept} ... ({} more characters)", total - max)
}

/// Something that happens to the service: a DBA request or the pipeline's
/// report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// DBA: `online` (from `OFFLINE:ERROR`: retry, clearing the error).
    Online,
    /// Pipeline: extractor and channels are running.
    Synchronized,
    /// DBA: clean `offline` (STOP marker after the last queued seqno), or
    /// a deferred `offline --at-seqno`/`online --until-seqno` reaching its
    /// seqno. From `OFFLINE:ERROR`: acknowledge the error.
    Offline,
    /// DBA: `offline --immediate` (each channel stops after its current
    /// block; restart rows may differ). From `GOING-OFFLINE`: escalate.
    OfflineImmediate,
    /// Pipeline: every thread stopped; `clean` when every channel's
    /// restart row holds the same seqno (the condition of a handback).
    OfflineDone {
        /// Whether every restart row ended at the same seqno.
        clean: bool,
    },
    /// Pipeline: a definite error.
    Fail(PendingError),
}

impl Event {
    /// The event's name, as in [`IllegalTransition`] messages: `online`,
    /// `synchronized`, `offline`, `offline-immediate`, `offline-done`,
    /// `fail`.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Online => "online",
            Event::Synchronized => "synchronized",
            Event::Offline => "offline",
            Event::OfflineImmediate => "offline-immediate",
            Event::OfflineDone { .. } => "offline-done",
            Event::Fail(_) => "fail",
        }
    }
}

/// An event that is not allowed in a state; the state is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot {event} in state {state}{}", hint(*state, event))]
pub struct IllegalTransition {
    /// The state the service was in (and stays in).
    pub state: State,
    /// The event's [`Event::name`].
    pub event: &'static str,
}

fn hint(state: State, event: &str) -> &'static str {
    match (state, event) {
        (State::Online | State::GoingOnlineSynchronizing, "online") => ": already going online",
        (State::GoingOffline, "online") => ": wait for OFFLINE:NORMAL, then go online",
        (State::GoingOffline, "offline") => {
            ": already going offline (offline --immediate stops sooner)"
        }
        (State::OfflineNormal, "offline" | "offline-immediate") => ": already offline",
        _ => "",
    }
}

/// The state after `event` in `state`: the rule drawn in the module doc.
///
/// # Errors
/// [`IllegalTransition`] for every pair not in the diagram.
pub fn transition(state: State, event: &Event) -> Result<State, IllegalTransition> {
    use State::*;
    let next = match (state, event) {
        (OfflineNormal | OfflineError, Event::Online) => GoingOnlineSynchronizing,
        (GoingOnlineSynchronizing, Event::Synchronized) => Online,
        (GoingOnlineSynchronizing | Online, Event::Offline | Event::OfflineImmediate) => {
            GoingOffline
        }
        (GoingOffline, Event::OfflineImmediate) => GoingOffline,
        (GoingOffline, Event::OfflineDone { .. }) => OfflineNormal,
        (OfflineError, Event::Offline | Event::OfflineImmediate) => OfflineNormal,
        (GoingOnlineSynchronizing | Online | GoingOffline | OfflineError, Event::Fail(_)) => {
            OfflineError
        }
        _ => {
            return Err(IllegalTransition {
                state,
                event: event.name(),
            })
        }
    };
    Ok(next)
}

/// How many completed offlines [`StateMachine`] remembers the end of
/// ([`StateMachine::offline_end`]).
pub const OFFLINE_ENDS_KEPT: usize = 16;

/// What became of the offline numbered `n` ([`StateMachine::offline_end`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfflineEnd {
    /// It has not completed yet.
    Pending,
    /// It completed in this state (`OFFLINE:NORMAL` or `OFFLINE:ERROR`).
    Ended(State),
    /// It completed, but more than [`OFFLINE_ENDS_KEPT`] offlines came
    /// after it: how it ended is no longer known.
    Forgotten,
}

/// The service's state with what `status` shows about it.
///
/// Starts in `OFFLINE:NORMAL` with `last_offline_clean` unknown (`false`:
/// a handback needs a clean offline of this process, or the replicator's
/// own check of the restart rows).
///
/// Every time the service becomes offline (a run ends, in `OFFLINE:NORMAL`
/// or `OFFLINE:ERROR`, or an `OFFLINE:ERROR` is acknowledged) is an
/// offline completed: they are numbered from 1 ([`StateMachine::offlines`]).
#[derive(Debug, Clone)]
pub struct StateMachine {
    state: State,
    since: Instant,
    /// The last definite error, until [`StateMachine::resolve_error`]
    /// (shown while offline only: a run retrying it hides it).
    error: Option<PendingError>,
    last_offline_clean: bool,
    offline_immediate: bool,
    /// Offlines completed.
    offlines: u64,
    /// The states the last offlines ended in, oldest first, at most
    /// [`OFFLINE_ENDS_KEPT`].
    offline_ends: std::collections::VecDeque<State>,
}

impl Default for StateMachine {
    fn default() -> Self {
        StateMachine::new()
    }
}

impl StateMachine {
    /// `OFFLINE:NORMAL`, entered now.
    pub fn new() -> Self {
        StateMachine {
            state: State::OfflineNormal,
            since: Instant::now(),
            error: None,
            last_offline_clean: false,
            offline_immediate: false,
            offlines: 0,
            offline_ends: std::collections::VecDeque::with_capacity(OFFLINE_ENDS_KEPT),
        }
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// How long the service has been in the current state
    /// (`timeInStateSeconds`).
    pub fn time_in_state(&self) -> Duration {
        self.since.elapsed()
    }

    /// The error of `OFFLINE:ERROR` (the first one, when several channels
    /// failed), and in `OFFLINE:NORMAL` the last error until the service
    /// resolves it ([`StateMachine::resolve_error`]: an acknowledged error
    /// stays while the restart rows show it unresolved); `None` while a
    /// run goes on.
    pub fn pending_error(&self) -> Option<&PendingError> {
        if self.state.is_offline() {
            self.error.as_ref()
        } else {
            None
        }
    }

    /// Forgets the last error: the service saw it resolved (the restart
    /// rows even again, or every seqno up to the failed one done), or the
    /// DBA reset or handed back.
    pub fn resolve_error(&mut self) {
        self.error = None;
    }

    /// The last error, whatever the state (while a run goes on it is the
    /// error the run retries): what [`StateMachine::resolve_error`]
    /// would forget.
    pub fn unresolved_error(&self) -> Option<&PendingError> {
        self.error.as_ref()
    }

    /// How many offlines completed since the machine started (see the
    /// type's doc): the number the next one will have, less one.
    pub fn offlines(&self) -> u64 {
        self.offlines
    }

    /// What became of offline number `n` (1 is the first).
    pub fn offline_end(&self, n: u64) -> OfflineEnd {
        if n > self.offlines {
            return OfflineEnd::Pending;
        }
        let back = self.offlines - n;
        match usize::try_from(back)
            .ok()
            .filter(|&b| b < self.offline_ends.len())
        {
            Some(b) => OfflineEnd::Ended(self.offline_ends[self.offline_ends.len() - 1 - b]),
            None => OfflineEnd::Forgotten,
        }
    }

    /// Whether the last offline ended with every restart row at the same
    /// seqno (reported by [`Event::OfflineDone`]); `false` after an error,
    /// while running, and before the first offline of this process.
    pub fn last_offline_clean(&self) -> bool {
        self.last_offline_clean
    }

    /// Whether the offline in progress is immediate (`GOING-OFFLINE` after
    /// [`Event::OfflineImmediate`]).
    pub fn offline_immediate(&self) -> bool {
        self.offline_immediate
    }

    /// Applies `event` and returns the new state. `Fail` records the
    /// error (in `OFFLINE:ERROR` it keeps the first error and the time in
    /// state). No event forgets an error: `Online` hides it while the run
    /// retries, and `Offline`/`OfflineImmediate` in `OFFLINE:ERROR`
    /// (acknowledged) and `OfflineDone` leave it to the service, which
    /// calls [`StateMachine::resolve_error`] when the restart rows show it
    /// resolved.
    ///
    /// # Errors
    /// [`IllegalTransition`]; nothing changes.
    pub fn apply(&mut self, event: Event) -> Result<State, IllegalTransition> {
        let next = transition(self.state, &event)?;
        let previous = self.state;
        match event {
            Event::Fail(error) => {
                if previous == State::OfflineError {
                    return Ok(next);
                }
                self.error = Some(error);
                self.last_offline_clean = false;
            }
            Event::Online => {
                self.last_offline_clean = false;
                self.offline_immediate = false;
            }
            Event::OfflineImmediate if previous != State::OfflineError => {
                self.offline_immediate = true;
            }
            Event::OfflineDone { clean } => {
                self.last_offline_clean = clean;
                self.offline_immediate = false;
            }
            Event::Offline | Event::OfflineImmediate | Event::Synchronized => {}
        }
        if next.is_offline() && (!previous.is_offline() || previous != next) {
            self.offlines += 1;
            if self.offline_ends.len() == OFFLINE_ENDS_KEPT {
                self.offline_ends.pop_front();
            }
            self.offline_ends.push_back(next);
        }
        if next != previous {
            self.since = Instant::now();
        }
        self.state = next;
        Ok(next)
    }
}

/// The seqnos of `online --skip-seqno N[,M-K]`: single seqnos and
/// inclusive ranges, kept sorted with overlapping and adjacent ranges
/// merged.
///
/// Text form (parse and display): items separated by commas, each `N` or
/// `M-K` with `M <= K`, decimal, spaces around items allowed. Serializes
/// as that text (normalized, e.g. `"3,5-7"`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SkipSeqnos {
    ranges: Vec<(u64, u64)>,
}

/// Why a `--skip-seqno` list could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkipSeqnosError {
    /// Nothing given.
    #[error("empty seqno list: expected N[,M-K...]")]
    Empty,
    /// An empty item (`3,,5` or a trailing comma).
    #[error("empty item at position {position} of {text:?}: expected N or M-K")]
    EmptyItem {
        /// The whole list.
        text: String,
        /// 1-based position of the item.
        position: usize,
    },
    /// An item that is not a decimal seqno or range.
    #[error(
        "{item:?} is not a seqno or a range M-K of seqnos (decimal, 0 to 18446744073709551615)"
    )]
    BadItem {
        /// The item.
        item: String,
    },
    /// A range whose low end is above its high end.
    #[error("range {item:?} runs backwards: {low} is above {high}")]
    Backwards {
        /// The item.
        item: String,
        /// Its low end.
        low: u64,
        /// Its high end.
        high: u64,
    },
}

fn parse_seqno_text(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

impl SkipSeqnos {
    /// No seqno.
    pub fn new() -> Self {
        SkipSeqnos::default()
    }

    /// Whether `seqno` is to be skipped.
    pub fn contains(&self, seqno: u64) -> bool {
        // Ranges are sorted and disjoint: find the last range starting at
        // or below seqno.
        let i = self.ranges.partition_point(|&(low, _)| low <= seqno);
        i > 0 && self.ranges[i - 1].1 >= seqno
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The inclusive ranges, sorted, disjoint and not adjacent.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    /// How many seqnos the list names (saturating at `u64::MAX`).
    pub fn count(&self) -> u64 {
        self.ranges
            .iter()
            .fold(0u64, |n, &(l, h)| n.saturating_add(h - l).saturating_add(1))
    }

    /// The highest seqno named, if any.
    pub fn max(&self) -> Option<u64> {
        self.ranges.last().map(|&(_, h)| h)
    }

    /// Adds an inclusive range, merging.
    fn add(&mut self, low: u64, high: u64) {
        self.ranges.push((low, high));
        self.ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(self.ranges.len());
        for &(l, h) in &self.ranges {
            match merged.last_mut() {
                Some(last) if l <= last.1.saturating_add(1) => last.1 = last.1.max(h),
                _ => merged.push((l, h)),
            }
        }
        self.ranges = merged;
    }
}

impl FromStr for SkipSeqnos {
    type Err = SkipSeqnosError;

    /// Parses `N[,M-K...]` (see the type's doc).
    ///
    /// # Errors
    /// [`SkipSeqnosError`] naming the bad item.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.trim().is_empty() {
            return Err(SkipSeqnosError::Empty);
        }
        let mut list = SkipSeqnos::new();
        for (i, raw) in text.split(',').enumerate() {
            let item = raw.trim();
            if item.is_empty() {
                return Err(SkipSeqnosError::EmptyItem {
                    text: text.to_string(),
                    position: i + 1,
                });
            }
            let bad = || SkipSeqnosError::BadItem {
                item: item.to_string(),
            };
            let (low, high) = match item.split_once('-') {
                Some((l, h)) => (
                    parse_seqno_text(l.trim()).ok_or_else(bad)?,
                    parse_seqno_text(h.trim()).ok_or_else(bad)?,
                ),
                None => {
                    let n = parse_seqno_text(item).ok_or_else(bad)?;
                    (n, n)
                }
            };
            if low > high {
                return Err(SkipSeqnosError::Backwards {
                    item: item.to_string(),
                    low,
                    high,
                });
            }
            list.add(low, high);
        }
        Ok(list)
    }
}

impl fmt::Display for SkipSeqnos {
    /// The normalized text, e.g. `3,5-7`; empty for an empty list.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(l, h)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if l == h {
                write!(f, "{l}")?;
            } else {
                write!(f, "{l}-{h}")?;
            }
        }
        Ok(())
    }
}

impl Serialize for SkipSeqnos {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SkipSeqnos {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use State::*;

    fn events() -> Vec<Event> {
        vec![
            Event::Online,
            Event::Synchronized,
            Event::Offline,
            Event::OfflineImmediate,
            Event::OfflineDone { clean: true },
            Event::OfflineDone { clean: false },
            Event::Fail(PendingError::new("boom")),
        ]
    }

    /// The whole table: (state, event name) → next state, `None` for
    /// illegal. Every state × event pair is listed exactly once.
    fn expected(state: State, event: &Event) -> Option<State> {
        let table: &[(State, &str, Option<State>)] = &[
            (OfflineNormal, "online", Some(GoingOnlineSynchronizing)),
            (OfflineNormal, "synchronized", None),
            (OfflineNormal, "offline", None),
            (OfflineNormal, "offline-immediate", None),
            (OfflineNormal, "offline-done", None),
            (OfflineNormal, "fail", None),
            (GoingOnlineSynchronizing, "online", None),
            (GoingOnlineSynchronizing, "synchronized", Some(Online)),
            (GoingOnlineSynchronizing, "offline", Some(GoingOffline)),
            (
                GoingOnlineSynchronizing,
                "offline-immediate",
                Some(GoingOffline),
            ),
            (GoingOnlineSynchronizing, "offline-done", None),
            (GoingOnlineSynchronizing, "fail", Some(OfflineError)),
            (Online, "online", None),
            (Online, "synchronized", None),
            (Online, "offline", Some(GoingOffline)),
            (Online, "offline-immediate", Some(GoingOffline)),
            (Online, "offline-done", None),
            (Online, "fail", Some(OfflineError)),
            (GoingOffline, "online", None),
            (GoingOffline, "synchronized", None),
            (GoingOffline, "offline", None),
            (GoingOffline, "offline-immediate", Some(GoingOffline)),
            (GoingOffline, "offline-done", Some(OfflineNormal)),
            (GoingOffline, "fail", Some(OfflineError)),
            (OfflineError, "online", Some(GoingOnlineSynchronizing)),
            (OfflineError, "synchronized", None),
            (OfflineError, "offline", Some(OfflineNormal)),
            (OfflineError, "offline-immediate", Some(OfflineNormal)),
            (OfflineError, "offline-done", None),
            (OfflineError, "fail", Some(OfflineError)),
        ];
        let rows: Vec<_> = table
            .iter()
            .filter(|(s, e, _)| *s == state && *e == event.name())
            .collect();
        assert_eq!(rows.len(), 1, "table row for {state} × {}", event.name());
        rows[0].2
    }

    #[test]
    fn every_state_event_pair() {
        let mut legal = 0;
        let mut illegal = 0;
        for state in State::ALL {
            for event in events() {
                let got = transition(state, &event);
                match expected(state, &event) {
                    Some(next) => {
                        legal += 1;
                        assert_eq!(got, Ok(next), "{state} × {}", event.name());
                    }
                    None => {
                        illegal += 1;
                        let err = got.unwrap_err();
                        assert_eq!(
                            err,
                            IllegalTransition {
                                state,
                                event: event.name()
                            }
                        );
                        assert!(err
                            .to_string()
                            .starts_with(&format!("cannot {} in state {state}", event.name())));
                    }
                }
            }
        }
        // 7 events (OfflineDone twice) × 5 states.
        assert_eq!(legal + illegal, 35);
        assert_eq!(legal, 16);
    }

    #[test]
    fn illegal_messages_say_why() {
        let e = transition(Online, &Event::Online).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot online in state ONLINE: already going online"
        );
        let e = transition(GoingOffline, &Event::Offline).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot offline in state GOING-OFFLINE: already going offline (offline --immediate stops sooner)"
        );
        let e = transition(OfflineNormal, &Event::Offline).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot offline in state OFFLINE:NORMAL: already offline"
        );
        let e = transition(OfflineNormal, &Event::Synchronized).unwrap_err();
        assert_eq!(e.to_string(), "cannot synchronized in state OFFLINE:NORMAL");
    }

    #[test]
    fn display_and_parse_states() {
        let names: Vec<String> = State::ALL.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            names,
            [
                "OFFLINE:NORMAL",
                "GOING-ONLINE:SYNCHRONIZING",
                "ONLINE",
                "GOING-OFFLINE",
                "OFFLINE:ERROR"
            ]
        );
        for s in State::ALL {
            assert_eq!(s.as_str().parse::<State>(), Ok(s));
            assert_eq!(s.as_str().to_lowercase().parse::<State>(), Ok(s));
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
            assert_eq!(
                serde_json::from_str::<State>(&format!("\"{s}\"")).unwrap(),
                s
            );
        }
        let e = "OFFLINE".parse::<State>().unwrap_err();
        assert!(e.to_string().starts_with("unknown state \"OFFLINE\""));
        assert!(serde_json::from_str::<State>("\"up\"").is_err());
    }

    #[test]
    fn machine_keeps_the_first_error_and_retries() {
        let mut m = StateMachine::new();
        assert_eq!(m.state(), OfflineNormal);
        assert!(!m.last_offline_clean());
        m.apply(Event::Online).unwrap();
        m.apply(Event::Synchronized).unwrap();
        let mut first = PendingError::new("channel 2: duplicate key");
        first.seqno = Some(812);
        first.code = Some(1062);
        m.apply(Event::Fail(first.clone())).unwrap();
        assert_eq!(m.state(), OfflineError);
        m.apply(Event::Fail(PendingError::new("channel 5: later")))
            .unwrap();
        assert_eq!(m.pending_error(), Some(&first));
        // online from OFFLINE:ERROR retries: the error is hidden while
        // the run goes on, not forgotten.
        assert_eq!(m.apply(Event::Online), Ok(GoingOnlineSynchronizing));
        assert_eq!(m.pending_error(), None);
        assert_eq!(m.unresolved_error(), Some(&first));
        // An illegal event changes nothing.
        assert!(m.apply(Event::OfflineDone { clean: true }).is_err());
        assert_eq!(m.state(), GoingOnlineSynchronizing);
        m.apply(Event::Synchronized).unwrap();
        m.apply(Event::Offline).unwrap();
        assert!(!m.offline_immediate());
        m.apply(Event::OfflineImmediate).unwrap();
        assert!(m.offline_immediate());
        m.apply(Event::OfflineDone { clean: false }).unwrap();
        assert_eq!(m.state(), OfflineNormal);
        assert!(!m.last_offline_clean());
        // Offline again and not resolved by the service: shown again.
        assert_eq!(m.pending_error(), Some(&first));
        m.resolve_error();
        assert_eq!(m.pending_error(), None);
        m.apply(Event::Online).unwrap();
        m.apply(Event::Synchronized).unwrap();
        m.apply(Event::Offline).unwrap();
        m.apply(Event::OfflineDone { clean: true }).unwrap();
        assert!(m.last_offline_clean());
        // Acknowledging an error keeps it until the service resolves it;
        // the clean flag stays false.
        m.apply(Event::Online).unwrap();
        m.apply(Event::Fail(PendingError::new("x"))).unwrap();
        m.apply(Event::OfflineImmediate).unwrap();
        assert_eq!(m.state(), OfflineNormal);
        assert!(!m.offline_immediate());
        assert_eq!(m.pending_error(), Some(&PendingError::new("x")));
        m.resolve_error();
        assert_eq!(m.pending_error(), None);
        assert!(!m.last_offline_clean());
    }

    #[test]
    fn offlines_are_numbered_with_how_they_ended() {
        let mut m = StateMachine::new();
        assert_eq!(m.offlines(), 0);
        assert_eq!(m.offline_end(1), OfflineEnd::Pending);
        m.apply(Event::Online).unwrap();
        m.apply(Event::Synchronized).unwrap();
        m.apply(Event::Offline).unwrap();
        assert_eq!(m.offline_end(1), OfflineEnd::Pending);
        m.apply(Event::OfflineDone { clean: true }).unwrap();
        assert_eq!(m.offlines(), 1);
        // Another request going online does not change how 1 ended.
        m.apply(Event::Online).unwrap();
        assert_eq!(m.offline_end(1), OfflineEnd::Ended(OfflineNormal));
        assert_eq!(m.offline_end(2), OfflineEnd::Pending);
        // A failure is an offline (2); its acknowledgement another (3); a
        // second failure reported in OFFLINE:ERROR is none.
        m.apply(Event::Fail(PendingError::new("x"))).unwrap();
        m.apply(Event::Fail(PendingError::new("y"))).unwrap();
        assert_eq!(m.offlines(), 2);
        assert_eq!(m.offline_end(2), OfflineEnd::Ended(OfflineError));
        m.apply(Event::Offline).unwrap();
        assert_eq!(m.offlines(), 3);
        assert_eq!(m.offline_end(3), OfflineEnd::Ended(OfflineNormal));
        for _ in 0..OFFLINE_ENDS_KEPT {
            m.apply(Event::Online).unwrap();
            m.apply(Event::Offline).unwrap();
            m.apply(Event::OfflineDone { clean: true }).unwrap();
        }
        assert_eq!(m.offlines(), 3 + OFFLINE_ENDS_KEPT as u64);
        assert_eq!(m.offline_end(3), OfflineEnd::Forgotten);
        assert_eq!(m.offline_end(4), OfflineEnd::Ended(OfflineNormal));
        assert_eq!(m.offline_end(0), OfflineEnd::Forgotten);
    }

    #[test]
    fn pending_error_fields_and_eliding() {
        let mut e = PendingError::new("channel 1: missing row")
            .with_exception_message(&format!("UPDATE t SET a = '{}'", "x".repeat(2000)));
        e.code = Some(1032);
        e.seqno = Some(7);
        e.event_id = Some("mariadb-bin.000002:1234".into());
        e.shard = Some("acme".into());
        e.channel = Some(1);
        let msg = e.exception_message.as_deref().unwrap();
        assert!(msg.ends_with(" ... (1019 more characters)"), "{msg}");
        assert_eq!(
            msg.chars().count(),
            1000 + " ... (1019 more characters)".len()
        );
        let json = serde_json::to_value(&e).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(
            keys,
            [
                "pendingError",
                "pendingErrorChannel",
                "pendingErrorCode",
                "pendingErrorEventId",
                "pendingErrorSeqno",
                "pendingErrorShard",
                "pendingExceptionMessage"
            ]
        );
        assert_eq!(serde_json::from_value::<PendingError>(json).unwrap(), e);
        assert_eq!(
            PendingError {
                exception_message: None,
                ..e
            }
            .to_string(),
            "channel 1: missing row; seqno 7; event id mariadb-bin.000002:1234; shard acme; channel 1; code 1032"
        );
        assert_eq!(elide("abc", 3), "abc");
        assert_eq!(elide("abcd", 3), "abc ... (1 more characters)");
    }

    #[test]
    fn skip_seqnos_parse() {
        let s: SkipSeqnos = "12".parse().unwrap();
        assert_eq!(s.ranges(), [(12, 12)]);
        let s: SkipSeqnos = " 9, 3-5 ,6,20-20,4 ".parse().unwrap();
        assert_eq!(s.ranges(), [(3, 6), (9, 9), (20, 20)]);
        assert_eq!(s.to_string(), "3-6,9,20");
        assert_eq!(s.count(), 6);
        assert_eq!(s.max(), Some(20));
        for n in [3, 4, 5, 6, 9, 20] {
            assert!(s.contains(n), "{n}");
        }
        for n in [0, 2, 7, 8, 10, 19, 21, u64::MAX] {
            assert!(!s.contains(n), "{n}");
        }
        let all: SkipSeqnos = "0-18446744073709551615".parse().unwrap();
        assert!(all.contains(u64::MAX) && all.contains(0));
        assert_eq!(all.count(), u64::MAX);
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            "\"3-6,9,20\"".to_string()
        );
        assert_eq!(
            serde_json::from_str::<SkipSeqnos>("\"9,3-6,20\"").unwrap(),
            s
        );
    }

    #[test]
    fn skip_seqnos_errors() {
        let err = |t: &str| t.parse::<SkipSeqnos>().unwrap_err().to_string();
        assert_eq!(err(""), "empty seqno list: expected N[,M-K...]");
        assert_eq!(err("  "), "empty seqno list: expected N[,M-K...]");
        assert_eq!(
            err("3,,5"),
            "empty item at position 2 of \"3,,5\": expected N or M-K"
        );
        assert_eq!(
            err("3,"),
            "empty item at position 2 of \"3,\": expected N or M-K"
        );
        let bad = "is not a seqno or a range M-K of seqnos (decimal, 0 to 18446744073709551615)";
        assert_eq!(err("x"), format!("\"x\" {bad}"));
        assert_eq!(err("-3"), format!("\"-3\" {bad}"));
        assert_eq!(err("+3"), format!("\"+3\" {bad}"));
        assert_eq!(err("1-2-3"), format!("\"1-2-3\" {bad}"));
        assert_eq!(err("5-"), format!("\"5-\" {bad}"));
        assert_eq!(
            err("18446744073709551616"),
            format!("\"18446744073709551616\" {bad}")
        );
        assert_eq!(err("1 2"), format!("\"1 2\" {bad}"));
        assert_eq!(err("7-3"), "range \"7-3\" runs backwards: 7 is above 3");
        assert!(serde_json::from_str::<SkipSeqnos>("\"7-3\"").is_err());
    }
}
