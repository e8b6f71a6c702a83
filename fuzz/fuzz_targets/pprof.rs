//! parse_pprof on arbitrary bytes (it gunzips when they start with 1f 8b), and the
//! accessors the memory view uses on whatever decodes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stepscope_xspace::pprof::parse_pprof;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = parse_pprof(data) {
        for (t, _) in &p.sample_types {
            let _ = p.total(t);
            let _ = p.by_stack(t);
        }
        for s in &p.samples {
            let _ = s.label("kind");
        }
    }
});
