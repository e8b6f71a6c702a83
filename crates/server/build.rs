//! Embeds the front end: lists every file under `web/` (at the repository root) into
//! `$OUT_DIR/assets.rs` as `(path, bytes)` pairs read with `include_bytes!`, so the
//! binary serves the UI with no files beside it and the build needs no npm.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "node_modules" {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let web = manifest.join("../../web");
    println!("cargo:rerun-if-changed={}", web.display());
    let mut files = Vec::new();
    walk(&web, &mut files);
    files.sort();
    let mut src = String::from(
        "/// The embedded front end: (path under web/, bytes).\npub static ASSETS: &[(&str, &[u8])] = &[\n",
    );
    for f in &files {
        let rel = f.strip_prefix(&web).expect("under web/").to_string_lossy().replace('\\', "/");
        let abs = f.canonicalize().expect("canonical path");
        println!("cargo:rerun-if-changed={}", abs.display());
        let _ = writeln!(src, "    ({rel:?}, include_bytes!({:?})),", abs.display().to_string());
    }
    src.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("assets.rs");
    std::fs::write(out, src).expect("write assets.rs");
}
