//! The control socket's client: connect, send one [`Request`] line, read
//! one [`Response`] line.

use std::io::{BufRead, BufReader, ErrorKind as IoErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::protocol::{ControlError, Request, Response};

/// How long the client waits for a response, beyond a `wait`'s own
/// time-out, in seconds.
pub const RESPONSE_TIMEOUT_SECS: u64 = 60;

/// Why a request got no result.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing listens on the socket (no file, or a stale one).
    #[error("no shardrep service is listening on {}: is it running?", path.display())]
    NotRunning {
        /// The socket path.
        path: PathBuf,
    },
    /// Connecting failed otherwise (permissions: the socket is mode 0600,
    /// only the service's user may connect).
    #[error("cannot connect to the control socket {}: {cause}", path.display())]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// Sending or receiving failed, or no response came in time.
    #[error("control socket {}: {message}", path.display())]
    Io {
        /// The socket path.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The response is not a valid response line.
    #[error("control socket {}: bad response from the service: {message}", path.display())]
    BadResponse {
        /// The socket path.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The configuration file does not name a control socket.
    #[error("{}: {message}", file.display())]
    Config {
        /// The configuration file.
        file: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The service answered with an error.
    #[error("{0}")]
    Remote(ControlError),
}

/// A client of one control socket.
#[derive(Debug, Clone)]
pub struct Client {
    path: PathBuf,
}

impl Client {
    /// A client of the socket at `path` (nothing is connected yet).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Client { path: path.into() }
    }

    /// A client of the socket named by `[control] socket` in the
    /// configuration file `config` (see [`socket_from_config`]).
    ///
    /// # Errors
    /// [`ClientError::Config`].
    pub fn from_config(config: impl AsRef<Path>) -> Result<Self, ClientError> {
        Ok(Client::new(socket_from_config(config.as_ref())?))
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sends `request` on a new connection and returns the result. Waits
    /// for the response at most [`RESPONSE_TIMEOUT_SECS`] seconds (plus the
    /// time-out of a `wait`).
    ///
    /// # Errors
    /// [`ClientError::Remote`] when the service answered with an error;
    /// the other [`ClientError`]s when it could not be asked.
    pub fn request(&self, request: &Request) -> Result<Value, ClientError> {
        let mut stream = UnixStream::connect(&self.path).map_err(|source| {
            if matches!(
                source.kind(),
                IoErrorKind::NotFound | IoErrorKind::ConnectionRefused
            ) {
                ClientError::NotRunning {
                    path: self.path.clone(),
                }
            } else {
                ClientError::Connect {
                    path: self.path.clone(),
                    cause: source,
                }
            }
        })?;
        let extra = match request {
            Request::Wait { timeout_secs, .. } | Request::SourceSet { timeout_secs, .. } => {
                *timeout_secs
            }
            _ => 0,
        };
        let limit = RESPONSE_TIMEOUT_SECS.saturating_add(extra);
        let io = |message: String| ClientError::Io {
            path: self.path.clone(),
            message,
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(limit)))
            .map_err(|e| io(format!("cannot set a read time-out: {e}")))?;
        let mut line = serde_json::to_vec(request)
            .map_err(|e| io(format!("cannot encode the request: {e}")))?;
        line.push(b'\n');
        stream
            .write_all(&line)
            .and_then(|()| stream.flush())
            .map_err(|e| io(format!("cannot send the request: {e}")))?;
        let mut reader = BufReader::new(stream);
        let mut response = String::new();
        match reader.read_line(&mut response) {
            Ok(0) => {
                return Err(io(
                    "the service closed the connection without answering".into()
                ))
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), IoErrorKind::WouldBlock | IoErrorKind::TimedOut) => {
                return Err(io(format!("no response within {limit} s")))
            }
            Err(e) => return Err(io(format!("cannot read the response: {e}"))),
        }
        let response: Response =
            serde_json::from_str(response.trim_end()).map_err(|e| ClientError::BadResponse {
                path: self.path.clone(),
                message: e.to_string(),
            })?;
        response.into_result().map_err(ClientError::Remote)
    }
}

/// The `[control] socket` path of a configuration file.
///
/// Only that key is read: the rest of the file is not validated and
/// passwords are not resolved, so `shardrepctl` works where the service's
/// password file or environment variable is not available. A relative
/// path is relative to the current directory, as for the service.
///
/// # Errors
/// [`ClientError::Config`] when the file cannot be read, is not TOML, or
/// has no string `control.socket`.
pub fn socket_from_config(config: &Path) -> Result<PathBuf, ClientError> {
    let err = |message: String| ClientError::Config {
        file: config.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(config)
        .map_err(|e| err(format!("cannot read configuration file: {e}")))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| err(e.message().to_string()))?;
    match table
        .get("control")
        .and_then(|c| c.as_table())
        .and_then(|c| c.get("socket"))
    {
        Some(toml::Value::String(s)) if !s.is_empty() => Ok(PathBuf::from(s)),
        Some(_) => Err(err("control.socket must be a non-empty string".into())),
        None => Err(err("control.socket is missing".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_path_from_config_only() {
        let dir = std::env::temp_dir().join(format!("shardrep-client-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.toml");
        std::fs::write(
            &file,
            "[replica]\npassword_env = \"NOT_SET_ANYWHERE\"\n[control]\nsocket = \"/tmp/x/ctl.sock\"\n",
        )
        .unwrap();
        assert_eq!(
            socket_from_config(&file).unwrap(),
            PathBuf::from("/tmp/x/ctl.sock")
        );
        std::fs::write(&file, "[control]\nsocket = 3\n").unwrap();
        assert_eq!(
            socket_from_config(&file).unwrap_err().to_string(),
            format!(
                "{}: control.socket must be a non-empty string",
                file.display()
            )
        );
        std::fs::write(&file, "[service]\nname = \"a\"\n").unwrap();
        assert_eq!(
            socket_from_config(&file).unwrap_err().to_string(),
            format!("{}: control.socket is missing", file.display())
        );
        std::fs::write(&file, "[control\n").unwrap();
        assert!(socket_from_config(&file).is_err());
        let missing = dir.join("missing.toml");
        assert!(socket_from_config(&missing)
            .unwrap_err()
            .to_string()
            .contains("cannot read configuration file"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
