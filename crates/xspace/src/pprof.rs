//! pprof `Profile`s, as `jax.profiler.save_device_memory_profile` writes them
//! (gzipped protobuf): sample types, samples with resolved Python stacks and labels.
//!
//! Field numbers are those in `shared/formats.md`; unknown fields are skipped. Every
//! string-table index and location/function id is checked: a bad one is an error.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use crate::wire::{Wire, WireError, WireResult};
use crate::{Error, Result};

/// Most bytes a gzipped profile may expand to (guards against gzip bombs).
pub const MAX_DECOMPRESSED_BYTES: u64 = 1 << 30;

/// Gzip bomb guard: past 16 MiB, a profile may expand to at most 32× its compressed
/// size (JAX's memory profiles expand about 2–3×), so a 1 MB file never takes 1 GiB.
const MAX_EXPANSION: u64 = 32;
const MIN_EXPANSION_LIMIT: u64 = 16 << 20;

/// Most frames one sample's stack may hold: Python stops recursing at 1,000 frames,
/// and inlining adds a few lines per location.
pub const MAX_STACK_FRAMES: usize = 4096;

/// Most frames the stacks of all samples may hold together, per byte of the decoded
/// profile (between [`MIN_TOTAL_FRAMES`] and [`MAX_TOTAL_FRAMES`]). A location is
/// stored once and referenced by many samples, so a small file can describe stacks
/// far larger than itself; real device-memory profiles stay well under this.
const TOTAL_FRAMES_PER_BYTE: usize = 32;
const MIN_TOTAL_FRAMES: usize = 1 << 16;
const MAX_TOTAL_FRAMES: usize = 1 << 22;

/// One stack frame (names are shared between the frames that hold them).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Frame {
    /// Function name (for a location without line info: its address, `0x…`).
    pub function: Arc<str>,
    pub file: Arc<str>,
    pub line: i64,
}

/// A sample label's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelValue {
    Str(String),
    Num { value: i64, unit: String },
}

/// One sample: a value per sample type, a stack and labels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// One value per [`Pprof::sample_types`] entry.
    pub values: Vec<i64>,
    /// Leaf first; inlined functions of one location appear innermost first.
    pub stack: Vec<Frame>,
    /// e.g. `("kind", Str("buffer"))`, `("device", Str("cpu:0"))`.
    pub labels: Vec<(String, LabelValue)>,
}

impl Sample {
    /// The string label called `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find_map(|(k, v)| match v {
            LabelValue::Str(s) if k == key => Some(s.as_str()),
            _ => None,
        })
    }
}

/// A decoded profile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pprof {
    /// `(type, unit)`, e.g. `("allocations", "count")`, `("space", "bytes")`.
    pub sample_types: Vec<(String, String)>,
    pub samples: Vec<Sample>,
    pub time_nanos: i64,
    pub duration_nanos: i64,
    /// The `default_sample_type` name, when set.
    pub default_sample_type: Option<String>,
}

impl Pprof {
    /// Index of the sample type named `value_type` (e.g. `space`), if present.
    pub fn value_index(&self, value_type: &str) -> Option<usize> {
        self.sample_types.iter().position(|(t, _)| t == value_type)
    }

    /// Sum of `value_type` over all samples (0 when the profile has no such type).
    pub fn total(&self, value_type: &str) -> i64 {
        let Some(ix) = self.value_index(value_type) else {
            return 0;
        };
        self.samples.iter().fold(0i64, |n, s| n.saturating_add(s.values.get(ix).copied().unwrap_or(0)))
    }

    /// `value_type` summed per distinct stack (leaf first), largest first; ties in
    /// stack order. Empty when the profile has no such type.
    pub fn by_stack(&self, value_type: &str) -> Vec<(Vec<Frame>, i64)> {
        let Some(ix) = self.value_index(value_type) else {
            return Vec::new();
        };
        let mut sums: HashMap<&[Frame], i64> = HashMap::new();
        for s in &self.samples {
            let v = s.values.get(ix).copied().unwrap_or(0);
            let e = sums.entry(&s.stack).or_insert(0);
            *e = e.saturating_add(v);
        }
        let mut out: Vec<(Vec<Frame>, i64)> = sums.into_iter().map(|(k, v)| (k.to_vec(), v)).collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out
    }
}

fn not_pprof(what: impl std::fmt::Display) -> Error {
    Error::new(
        format!("the memory profile is not a readable pprof profile: {what}"),
        "pass a file written by jax.profiler.save_device_memory_profile, or write it again",
    )
}

/// Reads a pprof profile, gzipped or raw.
pub fn read_pprof(path: &Path) -> Result<Pprof> {
    let raw = crate::files::read_small(path, "device-memory profile")?;
    if raw.is_empty() {
        return Err(Error::new(
            format!("{} is empty", path.display()),
            "the profile was not fully written; save the memory profile again",
        ));
    }
    let with_path = |e: Error| Error::new(format!("{}: {}", path.display(), e.what), e.fix);
    if raw.starts_with(&[0x1f, 0x8b]) {
        let bytes = gunzip(&raw).map_err(with_path)?;
        parse_pprof(&bytes).map_err(with_path)
    } else {
        parse_pprof(&raw).map_err(with_path)
    }
}

/// Decompresses gzip (all members), refusing more than [`MAX_DECOMPRESSED_BYTES`] or
/// [`MAX_EXPANSION`]× the compressed size (past [`MIN_EXPANSION_LIMIT`]).
fn gunzip(raw: &[u8]) -> Result<Vec<u8>> {
    let by_ratio = (raw.len() as u64).saturating_mul(MAX_EXPANSION).max(MIN_EXPANSION_LIMIT);
    gunzip_capped(raw, by_ratio.min(MAX_DECOMPRESSED_BYTES))
}

fn gunzip_capped(raw: &[u8], limit: u64) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let dec = flate2::read::MultiGzDecoder::new(raw);
    dec.take(limit + 1).read_to_end(&mut out).map_err(|e| not_pprof(format!("gzip data is damaged ({e})")))?;
    if out.len() as u64 > limit {
        return Err(Error::new(
            format!("the memory profile expands to more than {} MiB (a gzip bomb?)", limit >> 20),
            "JAX's memory profiles expand about 3× and stay small; check where the file came from",
        ));
    }
    Ok(out)
}

struct RawSample {
    location_ids: Vec<i64>,
    values: Vec<i64>,
    /// (key, str, num, num_unit) string indexes and number.
    labels: Vec<(i64, i64, i64, i64)>,
}

#[derive(Default)]
struct RawLocation {
    address: u64,
    /// (function id, line)
    lines: Vec<(i64, i64)>,
}

/// Decodes an uncompressed pprof `Profile`.
pub fn parse_pprof(bytes: &[u8]) -> Result<Pprof> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        return parse_pprof(&gunzip(bytes)?);
    }
    let mut w = Wire::new(bytes);
    let mut strings: Vec<&[u8]> = Vec::new();
    let mut types: Vec<(i64, i64)> = Vec::new();
    let mut samples: Vec<RawSample> = Vec::new();
    let mut locations: HashMap<i64, RawLocation> = HashMap::new();
    // function id → (name, file) string indexes
    let mut functions: HashMap<i64, (i64, i64)> = HashMap::new();
    let mut p = Pprof::default();
    let mut default_type = 0i64;
    let wire = |e: WireError| not_pprof(e);
    while !w.done() {
        let (field, wt) = w.key().map_err(wire)?;
        match field {
            1 => {
                let r = w.bytes(wt).map_err(wire)?;
                types.push(value_type(w.sub(r)).map_err(wire)?);
            }
            2 => {
                let r = w.bytes(wt).map_err(wire)?;
                samples.push(sample(w.sub(r)).map_err(wire)?);
            }
            4 => {
                let r = w.bytes(wt).map_err(wire)?;
                let (id, loc) = location(w.sub(r)).map_err(wire)?;
                locations.insert(id, loc);
            }
            5 => {
                let r = w.bytes(wt).map_err(wire)?;
                let (id, f) = function(w.sub(r)).map_err(wire)?;
                functions.insert(id, f);
            }
            6 => {
                let r = w.bytes(wt).map_err(wire)?;
                strings.push(w.slice(r));
            }
            9 => p.time_nanos = w.int(wt).map_err(wire)?,
            10 => p.duration_nanos = w.int(wt).map_err(wire)?,
            14 => default_type = w.int(wt).map_err(wire)?,
            _ => w.skip(wt).map_err(wire)?,
        }
    }

    let string = |ix: i64| -> Result<String> {
        usize::try_from(ix)
            .ok()
            .and_then(|i| strings.get(i))
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .ok_or_else(|| not_pprof(format!("string index {ix} is past the string table ({} entries)", strings.len())))
    };

    for (t, u) in types {
        p.sample_types.push((string(t)?, string(u)?));
    }
    if default_type != 0 {
        p.default_sample_type = Some(string(default_type)?);
    }

    // Each location's frames, resolved once.
    let mut frames: HashMap<i64, Vec<Frame>> = HashMap::with_capacity(locations.len());
    let mut names: HashMap<i64, Arc<str>> = HashMap::new();
    let mut name_of = |ix: i64| -> Result<Arc<str>> {
        if let Some(s) = names.get(&ix) {
            return Ok(s.clone());
        }
        let s: Arc<str> = string(ix)?.into();
        names.insert(ix, s.clone());
        Ok(s)
    };
    for (&id, loc) in &locations {
        let mut fs = Vec::with_capacity(loc.lines.len().max(1));
        for &(fid, line) in &loc.lines {
            let &(name, file) = functions
                .get(&fid)
                .ok_or_else(|| not_pprof(format!("location {id} names function {fid}, which the profile lacks")))?;
            fs.push(Frame { function: name_of(name)?, file: name_of(file)?, line });
        }
        if fs.is_empty() {
            fs.push(Frame { function: format!("0x{:x}", loc.address).into(), file: "".into(), line: 0 });
        }
        frames.insert(id, fs);
    }

    p.samples.reserve(samples.len());
    let total_limit = bytes.len().saturating_mul(TOTAL_FRAMES_PER_BYTE).clamp(MIN_TOTAL_FRAMES, MAX_TOTAL_FRAMES);
    let mut total = 0usize;
    for s in samples {
        // The stack's length first: nothing is built for one past the limits.
        let mut len = 0usize;
        for lid in &s.location_ids {
            let fs = frames
                .get(lid)
                .ok_or_else(|| not_pprof(format!("a sample names location {lid}, which the profile lacks")))?;
            len = len.saturating_add(fs.len());
        }
        if len > MAX_STACK_FRAMES {
            return Err(not_pprof(format!(
                "a sample's stack holds {len} frames (at most {MAX_STACK_FRAMES}: no Python stack is that deep)"
            )));
        }
        total += len;
        if total > total_limit {
            return Err(not_pprof(format!(
                "its samples' stacks hold more than {total_limit} frames, far more than a {} KiB profile describes",
                bytes.len().div_ceil(1024)
            )));
        }
        let mut stack = Vec::with_capacity(len);
        for lid in &s.location_ids {
            stack.extend_from_slice(&frames[lid]);
        }
        let mut labels = Vec::with_capacity(s.labels.len());
        for (key, str_ix, num, unit) in s.labels {
            let value = if str_ix != 0 {
                LabelValue::Str(name_of(str_ix)?.to_string())
            } else {
                LabelValue::Num { value: num, unit: name_of(unit)?.to_string() }
            };
            labels.push((name_of(key)?.to_string(), value));
        }
        p.samples.push(Sample { values: s.values, stack, labels });
    }
    Ok(p)
}

fn value_type(mut w: Wire<'_>) -> WireResult<(i64, i64)> {
    let (mut t, mut u) = (0, 0);
    while !w.done() {
        let (field, wt) = w.key()?;
        match field {
            1 => t = w.int(wt)?,
            2 => u = w.int(wt)?,
            _ => w.skip(wt)?,
        }
    }
    Ok((t, u))
}

fn sample(mut w: Wire<'_>) -> WireResult<RawSample> {
    let mut s = RawSample { location_ids: Vec::new(), values: Vec::new(), labels: Vec::new() };
    while !w.done() {
        let (field, wt) = w.key()?;
        match field {
            1 => w.repeated_int(wt, &mut s.location_ids)?,
            2 => w.repeated_int(wt, &mut s.values)?,
            3 => {
                let r = w.bytes(wt)?;
                let mut l = w.sub(r);
                let mut label = (0, 0, 0, 0);
                while !l.done() {
                    let (f, t) = l.key()?;
                    match f {
                        1 => label.0 = l.int(t)?,
                        2 => label.1 = l.int(t)?,
                        3 => label.2 = l.int(t)?,
                        4 => label.3 = l.int(t)?,
                        _ => l.skip(t)?,
                    }
                }
                s.labels.push(label);
            }
            _ => w.skip(wt)?,
        }
    }
    Ok(s)
}

fn location(mut w: Wire<'_>) -> WireResult<(i64, RawLocation)> {
    let mut id = 0;
    let mut loc = RawLocation::default();
    while !w.done() {
        let (field, wt) = w.key()?;
        match field {
            1 => id = w.int(wt)?,
            3 => loc.address = w.int(wt)? as u64,
            4 => {
                let r = w.bytes(wt)?;
                let mut l = w.sub(r);
                let (mut fid, mut line) = (0, 0);
                while !l.done() {
                    let (f, t) = l.key()?;
                    match f {
                        1 => fid = l.int(t)?,
                        2 => line = l.int(t)?,
                        _ => l.skip(t)?,
                    }
                }
                loc.lines.push((fid, line));
            }
            _ => w.skip(wt)?,
        }
    }
    Ok((id, loc))
}

fn function(mut w: Wire<'_>) -> WireResult<(i64, (i64, i64))> {
    let (mut id, mut name, mut file) = (0, 0, 0);
    while !w.done() {
        let (field, wt) = w.key()?;
        match field {
            1 => id = w.int(wt)?,
            2 => name = w.int(wt)?,
            4 => file = w.int(wt)?,
            _ => w.skip(wt)?,
        }
    }
    Ok((id, (name, file)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNS: [&str; 2] = [
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/cpu-transformer/plugins/profile"),
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/cpu-compile/plugins/profile"),
    ];

    fn fixture(run: &str) -> std::path::PathBuf {
        std::fs::read_dir(run).unwrap().next().unwrap().unwrap().path().join("memory.prof")
    }

    #[test]
    fn jax_memory_profiles() {
        for run in RUNS {
            let p = read_pprof(&fixture(run)).unwrap();
            let types: Vec<(&str, &str)> = p.sample_types.iter().map(|(t, u)| (t.as_str(), u.as_str())).collect();
            assert_eq!(types, [("allocations", "count"), ("space", "bytes")]);
            // Expected numbers from Python: gzip.decompress + protobuf with a dynamic
            // Profile message class built from the field numbers in shared/formats.md;
            // sum(s.value[i] for s in profile.sample), and a Counter over the stacks of
            // (function name, file name, line) per location line.
            assert_eq!(p.samples.len(), 31);
            assert_eq!(p.total("space"), 1_416_260);
            assert_eq!(p.total("allocations"), 101);
            assert_eq!(p.total("no such type"), 0);
            let stacks = p.by_stack("space");
            assert_eq!(stacks.len(), 25);
            assert_eq!(stacks.iter().map(|s| s.1).sum::<i64>(), 1_416_260);
            let (top, bytes) = &stacks[0];
            assert_eq!(*bytes, 1_416_196);
            assert_eq!(top.len(), 4);
            assert_eq!(&*top[0].function, "run_step");
            assert!(top[0].file.ends_with("scripts/capture_cpu.py"));
            assert_eq!(top[0].line, 212);
            assert!(stacks.windows(2).all(|w| w[0].1 >= w[1].1));
            assert_eq!(p.samples.iter().filter(|s| s.label("kind") == Some("buffer")).count(), 8);
            assert_eq!(p.samples.iter().filter(|s| s.label("device") == Some("cpu:0")).count(), 8);
        }
    }

    #[test]
    fn damaged_input_is_an_error() {
        let gz = std::fs::read(fixture(RUNS[0])).unwrap();
        let raw = gunzip(&gz).unwrap();
        assert!(parse_pprof(&raw).is_ok());
        assert!(parse_pprof(&gz).is_ok());
        for cut in [1, 3, 100, raw.len() / 2, raw.len() - 1] {
            assert!(parse_pprof(&raw[..cut]).is_err(), "cut at {cut}");
        }
        for cut in [2, 10, gz.len() / 2, gz.len() - 4] {
            assert!(parse_pprof(&gz[..cut]).is_err(), "gzip cut at {cut}");
        }
        assert!(parse_pprof(&[0xff; 32]).is_err());
        for i in (0..raw.len()).step_by(7) {
            let mut bad = raw.clone();
            bad[i] ^= 0x5a;
            let _ = parse_pprof(&bad);
        }
    }

    #[test]
    fn bad_indexes_are_errors() {
        // sample_type {type: 5, unit: 0} with a one-entry string table.
        let buf = [0x0a, 0x04, 0x08, 0x05, 0x10, 0x00, 0x32, 0x00];
        let e = parse_pprof(&buf).unwrap_err();
        assert!(e.what.contains("string index 5"), "{e}");
        // A sample naming location 9, which does not exist.
        let buf = [0x12, 0x02, 0x08, 0x09, 0x32, 0x00];
        assert!(parse_pprof(&buf).unwrap_err().what.contains("location 9"));
        // A location naming function 3, which does not exist.
        let buf = [0x22, 0x06, 0x08, 0x01, 0x22, 0x02, 0x08, 0x03, 0x32, 0x00];
        assert!(parse_pprof(&buf).unwrap_err().what.contains("function 3"));
        // A negative index (10-byte varint of -1).
        let mut buf = vec![0x0a, 0x0b, 0x08];
        buf.extend([0xff; 9]);
        buf.push(0x01);
        assert!(parse_pprof(&buf).is_err());
    }

    /// `mib` MiB of zeros, gzipped.
    fn zeros_gz(mib: usize) -> Vec<u8> {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let chunk = vec![0u8; 1 << 20];
        for _ in 0..mib {
            enc.write_all(&chunk).unwrap();
        }
        enc.finish().unwrap()
    }

    #[test]
    fn gzip_bomb_is_refused() {
        // 9 MiB of zeros against an 8 MiB cap (the real cap, 1 GiB, works the same way).
        let gz = zeros_gz(9);
        let e = gunzip_capped(&gz, 8 << 20).unwrap_err();
        assert!(e.what.contains("more than 8 MiB"), "{e}");
        assert_eq!(gunzip_capped(&gz, 9 << 20).unwrap().len(), 9 << 20);
    }

    #[test]
    fn gzip_bomb_is_refused_by_expansion() {
        // 64 MiB of zeros in ~64 KB: over 32× and over 16 MiB, refused well before 1 GiB.
        let e = parse_pprof(&zeros_gz(64)).unwrap_err();
        assert!(e.what.contains("more than 16 MiB"), "{e}");
    }
}
