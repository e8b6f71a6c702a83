//! (stub until the real reader lands)
use crate::{Error, Result, Space};
use std::path::Path;
pub fn read_trace_json(path: &Path, _host: &str) -> Result<Space> {
    Err(Error::new(format!("{}: trace JSON not supported yet", path.display()), "use the .xplane.pb"))
}
