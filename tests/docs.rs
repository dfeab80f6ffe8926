//! The manual (`README.md` and the mdBook in `docs/`) against the code, with
//! no database and no `mdbook` binary:
//!
//! - every configuration key the parser accepts
//!   ([`shardrep::config::accepted_keys`]) appears, in backticks, in the
//!   configuration reference (`docs/src/configuration.md`);
//! - every key of `shardrepctl status --json` (a serialized
//!   [`Status`]) and every metric name the metrics module exports appear,
//!   in backticks, in the status and metrics reference
//!   (`docs/src/status-and-metrics.md`);
//! - every `shardrep ...` and `shardrepctl ...` command line of a ```` ```sh
//!   ```` block parses with the binaries' own argument parser: it is run
//!   with `--help` appended, which checks the subcommands, the option names
//!   and their values (conflicts and required options are checked only
//!   when the command runs). A word written `<placeholder>` or holding a
//!   shell variable (`$HOST`, `"$new_master_port"`) is a placeholder and is
//!   given as `1`;
//! - every subcommand of both binaries has a heading in the commands
//!   reference (`docs/src/commands.md`), and every one of its options
//!   appears there;
//! - no link leaves the repository, every relative link resolves to an
//!   existing file (and its `#anchor` to a heading there), and no text of
//!   the manual or of the commented configuration files names `shared/` or
//!   a `../` path.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use shardrep::control::protocol::Status;
use shardrep::replicator::state::State;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn chapter(name: &str) -> String {
    read(&root().join("docs/src").join(name))
}

/// `README.md` and every Markdown file under `docs/` (the built book in
/// `docs/book/` left out).
fn manual_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "book") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut files = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut files);
    files
}

fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The names of `names` that `text` does not hold as `` `name` `` (or
/// `` `name{`` for a metric shown with its labels).
fn missing_in<'a>(text: &str, names: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    names
        .into_iter()
        .filter(|n| !text.contains(&format!("`{n}`")) && !text.contains(&format!("`{n}{{")))
        .cloned()
        .collect()
}

#[test]
fn every_configuration_key_is_in_the_reference() {
    let keys = shardrep::config::accepted_keys();
    assert!(
        keys.len() > 40 && keys.contains(&"apply.channels".to_string()),
        "the key list looks wrong: {keys:?}"
    );
    let missing = missing_in(&chapter("configuration.md"), &keys);
    assert!(
        missing.is_empty(),
        "configuration keys the code accepts but docs/src/configuration.md does not \
         document (as `section.key`): {missing:?}"
    );
}

#[test]
fn every_status_field_is_in_the_reference() {
    let status = serde_json::to_value(Status::new("sjc", "applier", State::OfflineNormal))
        .expect("status serializes");
    let fields: Vec<String> = status
        .as_object()
        .expect("status is an object")
        .keys()
        .cloned()
        .collect();
    assert!(fields.len() > 40, "{fields:?}");
    let missing = missing_in(&chapter("status-and-metrics.md"), &fields);
    assert!(
        missing.is_empty(),
        "status fields missing in docs/src/status-and-metrics.md: {missing:?}"
    );
}

/// The metric names the metrics module registers: its string literals
/// `"shardrep_..."`.
fn exported_metrics() -> BTreeSet<String> {
    let source = read(&root().join("src/control/metrics.rs"));
    let mut names = BTreeSet::new();
    for (i, _) in source.match_indices("\"shardrep_") {
        let rest = &source[i + 1..];
        let end = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(rest.len());
        if rest[end..].starts_with('"') {
            names.insert(rest[..end].to_string());
        }
    }
    names
}

#[test]
fn every_metric_is_in_the_reference() {
    let metrics = exported_metrics();
    assert!(
        metrics.len() > 20 && metrics.contains("shardrep_state"),
        "the metric list looks wrong: {metrics:?}"
    );
    let missing = missing_in(&chapter("status-and-metrics.md"), &metrics);
    assert!(
        missing.is_empty(),
        "metrics missing in docs/src/status-and-metrics.md: {missing:?}"
    );
}

/// The lines of the ```` ```sh ```` (and `bash`, `shell`) blocks of `text`,
/// with their line numbers, continuation lines (`\` at the end) joined.
fn shell_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut in_other = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            if in_sh || in_other {
                in_sh = false;
                in_other = false;
            } else {
                let lang = info.split([',', ' ']).next().unwrap_or("");
                in_sh = matches!(lang, "sh" | "bash" | "shell");
                in_other = !in_sh;
            }
            continue;
        }
        if !in_sh {
            continue;
        }
        let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        joined.push_str(trimmed);
        if let Some(head) = joined.strip_suffix('\\') {
            pending = Some((start, format!("{head} ")));
        } else {
            out.push((start, joined));
        }
    }
    out
}

/// The commands of a shell line: words (quotes removed), a `#` comment
/// dropped, split at `|`, `||`, `&&`, `;`, `&` and redirections.
fn commands(line: &str) -> Vec<Vec<String>> {
    let mut cmds = vec![Vec::new()];
    let mut word: Option<String> = None;
    let mut chars = line.chars().peekable();
    let end_word = |word: &mut Option<String>, cmds: &mut Vec<Vec<String>>| {
        if let Some(w) = word.take() {
            cmds.last_mut().unwrap().push(w);
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    w.push(c);
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                w.push(n);
                            }
                        }
                        _ => w.push(c),
                    }
                }
            }
            '\\' => {
                if let Some(n) = chars.next() {
                    word.get_or_insert_with(String::new).push(n);
                }
            }
            '#' if word.is_none() => break,
            ' ' | '\t' => end_word(&mut word, &mut cmds),
            '|' | '&' | ';' => {
                end_word(&mut word, &mut cmds);
                cmds.push(Vec::new());
            }
            '>' | '<' => {
                // A redirection: drop it (with a file descriptor number
                // before it) and its target.
                if word
                    .as_deref()
                    .is_some_and(|w| w.chars().all(|c| c.is_ascii_digit()))
                {
                    word = None;
                }
                end_word(&mut word, &mut cmds);
                cmds.push(Vec::new());
                while chars.peek().is_some_and(|c| matches!(c, '>' | '&' | ' ')) {
                    chars.next();
                }
                while chars.peek().is_some_and(|c| !c.is_whitespace()) {
                    chars.next();
                }
            }
            _ => word.get_or_insert_with(String::new).push(c),
        }
    }
    end_word(&mut word, &mut cmds);
    cmds.retain(|c| !c.is_empty());
    cmds
}

const SHARDREP_SUBCOMMANDS: [&str; 5] = ["run", "check-config", "extract", "log", "help"];

/// The binary and its arguments when `words` runs `shardrep` or
/// `shardrepctl` (also behind `ssh host`, `sudo`, `runuser -u shardrep --`,
/// a path or environment assignments); `None` otherwise.
fn shardrep_invocation(words: &[String]) -> Option<(&'static str, Vec<String>)> {
    for (i, w) in words.iter().enumerate() {
        let base = w.rsplit('/').next().unwrap_or(w);
        let next = words.get(i + 1).map(String::as_str);
        let bin = match base {
            "shardrepctl" => "shardrepctl",
            "shardrep"
                if next.is_some_and(|n| {
                    SHARDREP_SUBCOMMANDS.contains(&n)
                        || matches!(n, "--help" | "-h" | "--version" | "-V")
                }) =>
            {
                "shardrep"
            }
            _ => continue,
        };
        let args = words[i + 1..]
            .iter()
            .map(|a| {
                let placeholder = a.contains('$') || (a.starts_with('<') && a.ends_with('>'));
                if placeholder {
                    "1".to_string()
                } else {
                    a.clone()
                }
            })
            .collect();
        return Some((bin, args));
    }
    None
}

fn binary(name: &str) -> &'static str {
    match name {
        "shardrep" => env!("CARGO_BIN_EXE_shardrep"),
        _ => env!("CARGO_BIN_EXE_shardrepctl"),
    }
}

#[test]
fn every_command_line_of_the_manual_parses() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in manual_files() {
        for (line_no, line) in shell_lines(&read(&file)) {
            for words in commands(&line) {
                let Some((bin, mut args)) = shardrep_invocation(&words) else {
                    continue;
                };
                if !args
                    .iter()
                    .any(|a| matches!(a.as_str(), "--help" | "-h" | "--version" | "-V" | "help"))
                {
                    args.push("--help".to_string());
                }
                let out = Command::new(binary(bin))
                    .args(&args)
                    .output()
                    .unwrap_or_else(|e| panic!("{bin}: {e}"));
                checked += 1;
                if !out.status.success() {
                    failures.push(format!(
                        "{}:{line_no}: `{bin} {}` does not parse: {}",
                        rel(&file),
                        args.join(" "),
                        String::from_utf8_lossy(&out.stderr).trim()
                    ));
                }
            }
        }
    }
    assert!(checked > 30, "only {checked} command lines found");
    assert!(
        failures.is_empty(),
        "command lines the CLI rejects:\n{}",
        failures.join("\n")
    );
}

/// `bin`'s help for the subcommand `path`.
fn help(bin: &str, path: &[String]) -> String {
    let out = Command::new(binary(bin))
        .args(path)
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("{bin}: {e}"));
    assert!(out.status.success(), "{bin} {path:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The entries of a help text's section `title` (`Commands:`, `Options:`):
/// the first word of each line indented by two spaces.
fn help_section(text: &str, title: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| *l != title)
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Every leaf subcommand of `bin` (a path of names) with its long options.
fn subcommands(bin: &str) -> BTreeMap<Vec<String>, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![Vec::<String>::new()];
    while let Some(path) = todo.pop() {
        let text = help(bin, &path);
        let subs: Vec<String> = help_section(&text, "Commands:")
            .into_iter()
            .filter(|s| s != "help")
            .collect();
        if subs.is_empty() {
            let options = text
                .lines()
                .skip_while(|l| *l != "Options:")
                .flat_map(|l| l.split([' ', ',']))
                .filter(|w| w.starts_with("--"))
                .map(|w| {
                    w.chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                        .collect::<String>()
                })
                .filter(|w| w.len() > 2)
                .collect();
            out.insert(path, options);
        } else {
            for s in subs {
                let mut p = path.clone();
                p.push(s);
                todo.push(p);
            }
        }
    }
    out
}

#[test]
fn every_subcommand_and_option_is_in_the_commands_reference() {
    let text = chapter("commands.md");
    let (shardrep_part, ctl_part) = text
        .split_once("\n## `shardrepctl`")
        .expect("docs/src/commands.md has a section ## `shardrepctl`");
    let mut missing = Vec::new();
    for (bin, part) in [("shardrep", shardrep_part), ("shardrepctl", ctl_part)] {
        let headings: Vec<BTreeSet<&str>> = part
            .lines()
            .filter(|l| l.starts_with("### "))
            .map(|l| {
                l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                    .filter(|w| !w.is_empty())
                    .collect()
            })
            .collect();
        let subs = subcommands(bin);
        assert!(subs.len() >= 5, "{bin}: {subs:?}");
        for (path, options) in subs {
            let name = format!("{bin} {}", path.join(" "));
            if !headings
                .iter()
                .any(|h| path.iter().all(|p| h.contains(p.as_str())))
            {
                missing.push(format!("{name}: no ### heading names it"));
            }
            for option in options {
                if matches!(
                    option.as_str(),
                    "--help" | "--version" | "--config" | "--socket" | "--json"
                ) && !(bin == "shardrep" && option == "--json")
                {
                    continue;
                }
                let documented = part.match_indices(option.as_str()).any(|(i, _)| {
                    !part[i + option.len()..]
                        .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-')
                });
                if !documented {
                    missing.push(format!("{name}: option {option}"));
                }
            }
        }
    }
    for global in ["--config", "--socket", "--json"] {
        if !ctl_part.contains(global) {
            missing.push(format!("shardrepctl: global option {global}"));
        }
    }
    assert!(
        missing.is_empty(),
        "missing in docs/src/commands.md:\n{}",
        missing.join("\n")
    );
}

/// mdBook's id of a heading: lower case, spaces to `-`, punctuation
/// dropped.
fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut in_code = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#').trim()));
        }
    }
    out
}

/// The targets of the inline links `[text](target)` of `text`, outside
/// code blocks and code spans, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_code = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        // Code spans removed, so that `[a](b)` in backticks is no link.
        let mut plain = String::new();
        for (n, part) in line.split('`').enumerate() {
            if n % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(i_open) = rest.find("](") {
            let after = &rest[i_open + 2..];
            let Some(close) = after.find(')') else { break };
            out.push((i + 1, after[..close].trim().to_string()));
            rest = &after[close..];
        }
    }
    out
}

#[test]
fn links_stay_in_the_repository_and_resolve() {
    let root = root().canonicalize().unwrap();
    let mut problems = Vec::new();
    for file in manual_files() {
        let text = read(&file);
        for (line, target) in links(&text) {
            let at = format!("{}:{line}: ({target})", rel(&file));
            if target.starts_with("http://")
                || target.starts_with("https://")
                || target.starts_with("mailto:")
            {
                continue;
            }
            if target.is_empty() {
                problems.push(format!("{at}: an empty link"));
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                file.clone()
            } else if path.starts_with('/') {
                problems.push(format!("{at}: an absolute path"));
                continue;
            } else {
                file.parent().unwrap().join(path)
            };
            let Ok(resolved) = resolved.canonicalize() else {
                problems.push(format!("{at}: no such file"));
                continue;
            };
            if !resolved.starts_with(&root) {
                problems.push(format!("{at}: outside the repository"));
                continue;
            }
            if let Some(fragment) = fragment {
                if resolved.extension().is_some_and(|e| e == "md")
                    && !anchors(&read(&resolved)).contains(fragment)
                {
                    problems.push(format!("{at}: no heading #{fragment} there"));
                }
            }
        }
    }
    // Paths outside the repository named in the text: the manual, and the
    // comments of the files it documents.
    let mut texts = manual_files();
    texts.extend(
        ["shard.map", "conf/shard.list"]
            .iter()
            .map(|p| root.join(p)),
    );
    for entry in std::fs::read_dir(root.join("conf")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            texts.push(path);
        }
    }
    for file in texts {
        for (i, line) in read(&file).lines().enumerate() {
            for outside in ["shared/", "../"] {
                if line.contains(outside) {
                    problems.push(format!(
                        "{}:{}: names a path outside the repository ({outside}): {line}",
                        rel(&file),
                        i + 1
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_book_lists_every_chapter() {
    let summary = chapter("SUMMARY.md");
    let listed: BTreeSet<String> = links(&summary)
        .into_iter()
        .map(|(_, target)| target)
        .collect();
    let mut unlisted = Vec::new();
    for entry in std::fs::read_dir(root().join("docs/src")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if name.ends_with(".md") && name != "SUMMARY.md" && !listed.contains(&name) {
            unlisted.push(name);
        }
    }
    assert!(
        unlisted.is_empty(),
        "chapters missing in docs/src/SUMMARY.md: {unlisted:?}"
    );
    assert!(root().join("docs/book.toml").is_file());
}
