//! The front end, embedded at build time from `web/` (see build.rs).

include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// The embedded file at `path` (relative to web/), exactly as named; `""` is index.html.
pub fn get(path: &str) -> Option<&'static [u8]> {
    let path = if path.is_empty() { "index.html" } else { path };
    ASSETS.iter().find(|(p, _)| *p == path).map(|(_, b)| *b)
}

/// The Content-Type for a file name.
pub fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit('.').next().unwrap_or("");
    match ext {
        "html" | "" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "json" => "application/json",
        _ => "text/plain; charset=utf-8",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn index_is_embedded() {
        let page = super::get("").expect("index.html");
        assert!(std::str::from_utf8(page).unwrap().contains("<script type=\"module\""));
        assert!(super::get("../Cargo.toml").is_none());
        assert!(super::get("vendor/uPlot.esm.js").is_some());
    }
}
