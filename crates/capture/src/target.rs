//! Targets (`HOST:PORT`) and durations (`2s`, `1500ms`, `1m`) as users write them.

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
}
