//! What is wrong with a configuration: [`ConfigError`], one
//! [`ConfigProblem`] per key.

use std::fmt;
use std::path::PathBuf;

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read (missing, permissions, not UTF-8).
    #[error("{}: cannot read configuration file: {cause}", file.display())]
    Read {
        /// The configuration file.
        file: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The text is not valid TOML, or a value has the wrong TOML type. The
    /// message is toml's, with line and column where known; in the value
    /// of a password-like key it names line, column and key only, never
    /// any of the line.
    #[error("{}: {message}", file.display())]
    Parse {
        /// The configuration file (or the origin given to
        /// [`Config::from_toml_str`](super::Config::from_toml_str)).
        file: PathBuf,
        /// What is wrong and where.
        message: String,
    },
    /// The TOML is well formed but the configuration is not usable. Every
    /// problem found is listed, one per line, as `  key: message`.
    #[error("{}: invalid configuration:{}", file.display(), ProblemLines(problems))]
    Invalid {
        /// The configuration file (or the origin given to
        /// [`Config::from_toml_str`](super::Config::from_toml_str)).
        file: PathBuf,
        /// Every problem found, ordered by section (`service`, `source`,
        /// `replica`, `queue`, `apply`, `shard_filter`, `control`, then
        /// unknown sections) and by key within a section.
        problems: Vec<ConfigProblem>,
    },
}

impl ConfigError {
    /// The configuration file the error is about.
    pub fn file(&self) -> &std::path::Path {
        match self {
            ConfigError::Read { file, .. }
            | ConfigError::Parse { file, .. }
            | ConfigError::Invalid { file, .. } => file,
        }
    }
}

/// One thing wrong with one key of the configuration.
///
/// Displays as `key: message`, e.g.
/// `replica.pasword: unknown key (did you mean `password`?)`. A message never
/// contains a password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// Full dotted path of the key, e.g. `apply.channels`.
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

impl ConfigProblem {
    /// A problem with `key`.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigProblem {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

struct ProblemLines<'a>(&'a [ConfigProblem]);

impl fmt::Display for ProblemLines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in self.0 {
            write!(f, "\n  {p}")?;
        }
        Ok(())
    }
}
