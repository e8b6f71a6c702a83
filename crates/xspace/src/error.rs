//! The one error type of this crate: what is wrong, and what to do about it.

use std::fmt;
use std::path::Path;

/// A reading error. Displays as `<what is wrong> — <what to do>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What is wrong, naming the file and the place in it where that helps.
    pub what: String,
    /// What the user can do about it.
    pub fix: String,
    /// Where reading was refused because the hosts would not fit in memory
    /// ([`crate::room::check`]): how many hosts were to be read at once. Where several,
    /// a surface may read them one at a time instead.
    pub memory_refused: Option<usize>,
}

impl Error {
    /// An error with a message and a fix.
    pub fn new(what: impl Into<String>, fix: impl Into<String>) -> Error {
        Error { what: what.into(), fix: fix.into(), memory_refused: None }
    }

    /// A file that exists but is damaged: truncated, corrupt or not what its name says.
    pub fn corrupt(path: &Path, detail: impl fmt::Display) -> Error {
        Error::new(
            format!("{} is not a readable profile: {detail}", path.display()),
            "the file is truncated or corrupt; copy it again or capture a new profile",
        )
    }

    /// An I/O failure on `path`.
    pub fn io(path: &Path, err: &std::io::Error) -> Error {
        let fix = match err.kind() {
            std::io::ErrorKind::NotFound => "check the path; `stepscope ls DIR` lists the runs in a log directory",
            std::io::ErrorKind::PermissionDenied => "check the file's permissions",
            _ => "check that the path is a readable file or folder",
        };
        Error::new(format!("cannot read {}: {err}", path.display()), fix)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} — {}", self.what, self.fix)
    }
}

impl std::error::Error for Error {}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
