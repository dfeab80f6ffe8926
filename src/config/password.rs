//! Where a password comes from: exactly one of `password` (the text),
//! `password_file` (a file holding it, relative to the configuration
//! file's directory; one trailing newline is removed) or `password_env`
//! (an environment variable holding it). A problem never quotes the
//! password.

use std::env::VarError;
use std::path::Path;

use super::{ConfigProblem, Secret};

/// Reads an environment variable: the process's, or a fixed set in tests.
pub(super) type EnvLookup<'a> = &'a dyn Fn(&str) -> Result<String, VarError>;

/// The three password keys of one section as written.
pub(super) struct PasswordKeys {
    /// `password`.
    pub(super) text: Option<String>,
    /// `password_file`.
    pub(super) file: Option<String>,
    /// `password_env`.
    pub(super) env: Option<String>,
}

/// Resolves the password of `section` (`source` or `replica`) from exactly
/// one of its keys; `origin` is the configuration file.
///
/// # Errors
/// The problem of the key at fault: none or several keys given, an empty
/// or unreadable file, an unset, empty or non-UTF-8 variable.
pub(super) fn resolve(
    section: &str,
    keys: PasswordKeys,
    origin: &Path,
    env: EnvLookup<'_>,
) -> Result<Secret, ConfigProblem> {
    let given: Vec<&str> = [
        ("password", keys.text.is_some()),
        ("password_file", keys.file.is_some()),
        ("password_env", keys.env.is_some()),
    ]
    .iter()
    .filter(|(_, set)| *set)
    .map(|(name, _)| *name)
    .collect();
    let key = format!("{section}.password");
    match (given.len(), keys.text, keys.file, keys.env) {
        (0, ..) => Err(ConfigProblem::new(
            key,
            "missing: set one of password, password_file, password_env",
        )),
        (1, Some(text), _, _) => Ok(Secret::new(text)),
        (1, _, Some(file), _) => from_file(section, &file, origin),
        (1, _, _, Some(var)) => from_env(section, &var, env),
        _ => Err(ConfigProblem::new(
            key,
            format!(
                "set only one of password, password_file, password_env (found {})",
                given.join(", ")
            ),
        )),
    }
}

/// `password_file`: the file's text less one trailing `\n` or `\r\n`.
fn from_file(section: &str, file: &str, origin: &Path) -> Result<Secret, ConfigProblem> {
    let problem = |message: String| ConfigProblem::new(format!("{section}.password_file"), message);
    if file.is_empty() {
        return Err(problem("must not be empty".into()));
    }
    let path = origin.parent().unwrap_or(Path::new("")).join(file);
    let mut text = std::fs::read_to_string(&path)
        .map_err(|e| problem(format!("cannot read {}: {e}", path.display())))?;
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    if text.is_empty() {
        return Err(problem(format!("{} is empty", path.display())));
    }
    Ok(Secret::new(text))
}

/// `password_env`: the variable's value.
fn from_env(section: &str, var: &str, env: EnvLookup<'_>) -> Result<Secret, ConfigProblem> {
    let problem = |message: String| ConfigProblem::new(format!("{section}.password_env"), message);
    if var.is_empty() {
        return Err(problem("must name an environment variable".into()));
    }
    match env(var) {
        Ok(text) if text.is_empty() => Err(problem(format!("environment variable {var} is empty"))),
        Ok(text) => Ok(Secret::new(text)),
        Err(VarError::NotPresent) => Err(problem(format!(
            "environment variable {var} is not set in shardrep's environment: export it before \
             starting shardrep (under systemd: Environment= or EnvironmentFile= in the unit), \
             or name another variable"
        ))),
        Err(VarError::NotUnicode(_)) => Err(problem(format!(
            "environment variable {var} is not valid UTF-8"
        ))),
    }
}
