//! Targets (`HOST:PORT`), durations (`2s`, `1500ms`, `1m`) and sizes (`512MiB`, `2GiB`)
//! as users write them.

use std::fmt;
use std::time::Duration;

use crate::error::CaptureError;

/// A profiler server address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    pub port: u16,
}

impl Target {
    /// The `http://` URI gRPC connects to.
    pub fn uri(&self) -> String {
        if self.host.contains(':') {
            format!("http://[{}]:{}", self.host, self.port)
        } else {
            format!("http://{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl std::str::FromStr for Target {
    type Err = CaptureError;

    fn from_str(s: &str) -> Result<Target, CaptureError> {
        let s = s.trim();
        let s = s.strip_prefix("grpc://").or_else(|| s.strip_prefix("http://")).unwrap_or(s);
        let bad = |why: &str| {
            CaptureError::new(
                format!("{s:?} is not a target ({why})"),
                "write HOST:PORT with the port given to jax.profiler.start_server, e.g. 127.0.0.1:9012",
            )
        };
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (h, p) = rest.split_once(']').ok_or_else(|| bad("no closing ']'"))?;
            (h, p.strip_prefix(':').ok_or_else(|| bad("no port"))?)
        } else {
            let (h, p) = s.rsplit_once(':').ok_or_else(|| bad("no port"))?;
            if h.contains(':') {
                return Err(bad("write an IPv6 address in brackets, [::1]:9012"));
            }
            (h, p)
        };
        if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c == '/' || c == '@') {
            return Err(bad("no host"));
        }
        let port: u16 = port.parse().map_err(|_| bad("the port is not a number from 1 to 65535"))?;
        if port == 0 {
            return Err(bad("port 0"));
        }
        Ok(Target { host: host.to_string(), port })
    }
}

/// Parses `HOST:PORT[,HOST:PORT…]`; duplicates are an error.
pub fn parse_targets(list: &str) -> Result<Vec<Target>, CaptureError> {
    let mut out: Vec<Target> = Vec::new();
    for part in list.split(',').filter(|p| !p.trim().is_empty()) {
        let t: Target = part.parse()?;
        if out.contains(&t) {
            return Err(CaptureError::new(format!("{t} is listed twice"), "name each target once"));
        }
        out.push(t);
    }
    if out.is_empty() {
        return Err(CaptureError::new("no target given", "write HOST:PORT, e.g. 127.0.0.1:9012"));
    }
    Ok(out)
}

/// Parses a duration: a number (decimals allowed) and a unit `ms`, `s` or `m`.
pub fn parse_duration(s: &str) -> Result<Duration, CaptureError> {
    let t = s.trim();
    let bad =
        || CaptureError::new(format!("{s:?} is not a duration"), "write a number and a unit: 500ms, 2s, 1.5s, 1m");
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| bad())?;
    let ms = match unit.trim() {
        "ms" => v,
        "s" => v * 1e3,
        "m" | "min" => v * 60e3,
        _ => return Err(bad()),
    };
    if !ms.is_finite() || ms < 1.0 {
        return Err(CaptureError::new(format!("{s:?} is too short"), "capture for at least 1ms"));
    }
    if ms > 3_600_000.0 {
        return Err(CaptureError::new(format!("{s:?} is too long"), "capture for at most 1h; traces grow with time"));
    }
    Ok(Duration::from_micros((ms * 1e3).round() as u64))
}

/// The largest size [`parse_size`] accepts: a protobuf message is at most 2 GiB.
const MAX_SIZE_BYTES: u64 = 2 << 30;

/// Parses a size: a number (decimals allowed) and a unit `B`, `KiB`, `MiB` or `GiB`
/// (`K`, `M`, `G` mean the same; `KB`, `MB`, `GB` are powers of 1000), from 1 KiB to 2 GiB.
pub fn parse_size(s: &str) -> Result<u64, CaptureError> {
    let t = s.trim();
    let bad = || CaptureError::new(format!("{s:?} is not a size"), "write a number and a unit: 16MiB, 512MiB, 2GiB");
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| bad())?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        _ => return Err(bad()),
    };
    let bytes = v * scale;
    if !bytes.is_finite() || bytes < 1024.0 {
        return Err(CaptureError::new(format!("{s:?} is too small"), "allow at least 1KiB"));
    }
    if bytes > MAX_SIZE_BYTES as f64 {
        return Err(CaptureError::new(
            format!("{s:?} is too large"),
            "a trace is one protobuf message, at most 2GiB: allow at most 2GiB",
        ));
    }
    Ok(bytes.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!("127.0.0.1:9012".parse::<Target>().unwrap(), Target { host: "127.0.0.1".into(), port: 9012 });
        assert_eq!("[::1]:80".parse::<Target>().unwrap(), Target { host: "::1".into(), port: 80 });
        assert_eq!("[::1]:80".parse::<Target>().unwrap().to_string(), "[::1]:80");
        assert_eq!("grpc://h:1".parse::<Target>().unwrap().uri(), "http://h:1");
        for bad in ["h", "h:", ":1", "h:0", "h:70000", "::1:80", "[::1]80", "a b:1"] {
            assert!(bad.parse::<Target>().is_err(), "{bad}");
        }
        let t = parse_targets("a:1, b:2,").unwrap();
        assert_eq!(t.len(), 2);
        assert!(parse_targets("a:1,a:1").is_err());
        assert!(parse_targets(" , ").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1500ms").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("0.5s").unwrap(), Duration::from_millis(500));
        for bad in ["", "2", "s", "2 h", "0ms", "-1s", "2x", "61m", "1e3s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("16MiB").unwrap(), 16 << 20);
        assert_eq!(parse_size("512 MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5g").unwrap(), 3 << 29);
        assert_eq!(parse_size("64K").unwrap(), 64 << 10);
        assert_eq!(parse_size("100MB").unwrap(), 100_000_000);
        assert_eq!(parse_size("4096b").unwrap(), 4096);
        for bad in ["", "16", "MiB", "-1MiB", "1.2.3MiB", "16 TiB", "1e9B", "100B", "3GiB", "0.5KiB"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
