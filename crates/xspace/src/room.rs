//! Whether a run fits in memory before it is read: what reading its hosts takes
//! ([`needed_bytes`]) against the memory there is ([`limit`]: the machine's free memory,
//! its container's, or the user's `STEPSCOPE_MEMORY_LIMIT`). A run that does not fit
//! is an error that names the ways to read it one host at a time, instead of a process
//! the system kills halfway (or a machine that swaps to a halt).

use std::path::Path;

use crate::error::{Error, Result};
use crate::model::Format;

/// The variable that sets the memory a run may take: bytes, or with a unit (`512MB`,
/// `8GB`, `8GiB`), or `none` for no check.
pub const LIMIT_VAR: &str = "STEPSCOPE_MEMORY_LIMIT";

/// Memory a host's decoded profile takes, per byte of its file: an XSpace's columns and
/// the model built on them come to about its size (0.97 for `summary` of the
/// `bench/gen_large.sh 1500` capture, the mapped file's pages aside: those the system
/// can drop).
const XSPACE_BYTES_PER_BYTE: u64 = 1;

/// Per byte of a trace JSON's text (a gzip file's inflated): its decoded profile takes
/// about half (0.45 for `summary` of that capture exported as `.trace.json.gz`, 312 MB
/// of text).
const JSON_TEXT_BYTES_PER_MEMORY_BYTE: u64 = 2;

/// Memory held already that the error leaves unsaid (a process's own at its start).
const HELD_UNSAID_BYTES: u64 = 64 << 20;

/// The limit reading may not pass, and where it comes from.
struct Limit {
    bytes: u64,
    /// `free memory` or `STEPSCOPE_MEMORY_LIMIT`: what the error names.
    from: &'static str,
}

/// The memory reading may take: `STEPSCOPE_MEMORY_LIMIT` where set (`None` for `none`),
/// else the memory the system has free for this process (Linux: the lesser of the
/// machine's available memory and its control group's room; elsewhere unknown: `None`).
fn limit() -> Result<Option<Limit>> {
    match std::env::var(LIMIT_VAR) {
        Ok(v) if v.trim().eq_ignore_ascii_case("none") => Ok(None),
        Ok(v) => parse_bytes(&v).map(|bytes| Some(Limit { bytes, from: LIMIT_VAR })).ok_or_else(|| {
            Error::new(
                format!("{LIMIT_VAR}={v:?} is not an amount of memory"),
                "give bytes or a size with its unit (512MB, 8GB, 8GiB), or none to read without the check",
            )
        }),
        Err(_) => Ok(free_bytes().map(|bytes| Limit { bytes, from: "free memory" })),
    }
}

/// `8GB`, `8 GiB`, `512mb`, `1000000` as bytes.
fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = (t[..split].trim(), t[split..].trim().to_ascii_lowercase());
    let scale: f64 = match unit.as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0f64.powi(4),
        _ => return None,
    };
    let value: f64 = number.parse().ok()?;
    (value.is_finite() && value >= 0.0).then_some((value * scale) as u64)
}

/// Memory the system can give this process now, where it says.
fn free_bytes() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        let field = |text: &str, key: &str| -> Option<u64> {
            text.lines().find_map(|l| l.strip_prefix(key)?.split_whitespace().next()?.parse().ok())
        };
        let machine = read("/proc/meminfo").and_then(|m| field(&m, "MemAvailable:")).map(|kib| kib * 1024);
        // A container's control group (v2, else v1): its limit less the memory its
        // processes hold (their page cache aside, which the system drops first).
        let group = match read("/sys/fs/cgroup/memory.max") {
            Some(max) => max.trim().parse::<u64>().ok().map(|max| {
                let anon = read("/sys/fs/cgroup/memory.stat").and_then(|s| field(&s, "anon ")).unwrap_or(0);
                max.saturating_sub(anon)
            }),
            None => read("/sys/fs/cgroup/memory/memory.limit_in_bytes")
                .and_then(|l| l.trim().parse::<u64>().ok())
                // v1 says "no limit" with a number near 2^63.
                .filter(|l| *l < 1 << 60)
                .map(|max| {
                    let rss = read("/sys/fs/cgroup/memory/memory.stat").and_then(|s| field(&s, "rss ")).unwrap_or(0);
                    max.saturating_sub(rss)
                }),
        };
        match (machine, group) {
            (Some(m), Some(g)) => Some(m.min(g)),
            (m, g) => m.or(g),
        }
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// About the memory that reading a host file of `bytes` takes: an XSpace's
/// [`XSPACE_BYTES_PER_BYTE`] a byte, a trace JSON's half its text (a gzip file's by the
/// size it inflates to).
pub fn needed_bytes(path: &Path, format: Format, bytes: u64) -> u64 {
    match format {
        Format::TraceJson => inflated_bytes(path).unwrap_or(bytes) / JSON_TEXT_BYTES_PER_MEMORY_BYTE,
        Format::XSpace => bytes.saturating_mul(XSPACE_BYTES_PER_BYTE),
    }
}

/// A gzip file's size inflated, from its last member's trailer, or `None` where it is no
/// gzip file. The trailer holds the size mod 4 GiB: past that the estimate is low (at
/// least the file's own size is taken), and the check errs towards reading.
fn inflated_bytes(path: &Path) -> Option<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let (mut file, file_bytes) = crate::files::open_regular(path).ok()?;
    let mut magic = [0u8; 2];
    file.read_exact(&mut magic).ok()?;
    if magic != [0x1f, 0x8b] || file_bytes < 18 {
        return None;
    }
    file.seek(SeekFrom::End(-4)).ok()?;
    let mut size = [0u8; 4];
    file.read_exact(&mut size).ok()?;
    Some(u64::from(u32::from_le_bytes(size)).max(file_bytes))
}

/// Memory this process holds of its own (its resident anonymous pages: Linux), where
/// the system says.
fn own_bytes() -> Option<u64> {
    status_kib("RssAnon:").map(|k| k * 1024)
}

/// Checks that reading `hosts` at once (each a name and the bytes [`needed_bytes`] gives
/// it) fits in the room there is: the free memory, or
/// `STEPSCOPE_MEMORY_LIMIT` less what this process holds already (a server's cached
/// runs). The error says how much it needs, what there is, and how to read fewer hosts
/// at once.
pub fn check(hosts: &[(&str, u64)]) -> Result<()> {
    let Some(limit) = limit()? else { return Ok(()) };
    let needed = hosts.iter().map(|h| h.1).fold(0u64, u64::saturating_add);
    let held = if limit.from == LIMIT_VAR { own_bytes().unwrap_or(0) } else { 0 };
    let room = limit.bytes.saturating_sub(held);
    if needed <= room {
        return Ok(());
    }
    let gb = in_words;
    // What a process holds at its start is not worth a word, unless it is what leaves
    // too little; a server's cached runs, a notebook's data are.
    let there = if held >= HELD_UNSAID_BYTES || needed <= limit.bytes {
        format!("{} is {}, {} of it held already", limit.from, gb(limit.bytes), gb(held))
    } else {
        format!("{} is {}", limit.from, gb(limit.bytes))
    };
    let what = if hosts.len() == 1 {
        format!("reading host {} needs about {}", hosts[0].0, gb(needed))
    } else {
        format!("reading the run's {} hosts together needs about {}", hosts.len(), gb(needed))
    };
    let fix = if hosts.len() == 1 {
        format!("free memory, or set {LIMIT_VAR}=none to read it anyway")
    } else {
        format!(
            "read one host with --host HOST (the analyses, `summary` to `history`, read a run of several \
             hosts a host at a time by themselves); or set {LIMIT_VAR}=none to read them together anyway"
        )
    };
    Err(Error { memory_refused: Some(hosts.len()), ..Error::new(format!("{what}, and {there}"), fix) })
}

/// The most this process may have resident while it reads a run's hosts: the user's
/// `STEPSCOPE_MEMORY_LIMIT`, or what it holds now plus the memory the system has free
/// for it; with where it comes from (`None` where there is no limit: `none`, or a
/// system that does not say).
pub fn ceiling() -> Result<Option<(u64, &'static str)>> {
    let Some(limit) = limit()? else { return Ok(None) };
    let bytes = match limit.from {
        LIMIT_VAR => limit.bytes,
        _ => limit.bytes.saturating_add(resident_bytes().unwrap_or(0)),
    };
    Ok(Some((bytes, limit.from)))
}

/// The pages this process has resident now (Linux), where the system says.
pub fn resident_bytes() -> Option<u64> {
    status_kib("VmRSS:").map(|k| k * 1024)
}

/// The most pages this process has had resident since it started (Linux), where the
/// system says.
pub fn peak_resident_bytes() -> Option<u64> {
    status_kib("VmHWM:").map(|k| k * 1024)
}

/// A field of /proc/self/status in KiB.
fn status_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix(key)?.split_whitespace().next()?.parse().ok())
}

/// `bytes` in words: MB below a GB, else GB with one decimal.
pub fn in_words(bytes: u64) -> String {
    match bytes {
        0..1_000_000_000 => format!("{} MB", bytes.div_ceil(1_000_000)),
        _ => format!("{:.1} GB", bytes as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_with_and_without_units() {
        assert_eq!(parse_bytes("1000000"), Some(1_000_000));
        assert_eq!(parse_bytes("8GB"), Some(8_000_000_000));
        assert_eq!(parse_bytes(" 1.5 gib "), Some(1_610_612_736));
        assert_eq!(parse_bytes("512mb"), Some(512_000_000));
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes("8 parsecs"), None);
        assert_eq!(parse_bytes("-1GB"), None);
    }

    #[test]
    fn a_gzip_trace_counts_by_its_inflated_text() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("stepscope-room-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = format!("{{\"traceEvents\": [{}]}}", vec!["{\"ph\": \"X\"}"; 50_000].join(", "));
        let gz = dir.join("h.trace.json.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(text.as_bytes()).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        let packed = std::fs::metadata(&gz).unwrap().len();
        assert!(packed * 20 < text.len() as u64);
        assert_eq!(needed_bytes(&gz, Format::TraceJson, packed), text.len() as u64 / 2);
        // Plain text, and an XSpace, by their bytes.
        let plain = dir.join("h.trace.json");
        std::fs::write(&plain, &text).unwrap();
        assert_eq!(needed_bytes(&plain, Format::TraceJson, text.len() as u64), text.len() as u64 / 2);
        assert_eq!(needed_bytes(&plain, Format::XSpace, 1234), 1234);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn this_machine_says_what_it_has_free() {
        #[cfg(target_os = "linux")]
        assert!(free_bytes().is_some_and(|b| b > 0));
    }
}
