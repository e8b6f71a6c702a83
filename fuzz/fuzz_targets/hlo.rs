//! decode_hlo_proto on arbitrary bytes, then the module accessors the op profile uses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stepscope_xspace::hlo::decode_hlo_proto;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = decode_hlo_proto(data) {
        let _ = m.entry().and_then(|c| c.root());
        let _ = m.instruction_count();
        for (_, i) in m.instructions() {
            let _ = m.category(i);
            let _ = m.fused_body(i);
            let _ = m.operands(i).count();
            let _ = i.shape.bytes_size();
            let _ = i.shape.element_count();
            let _ = m.instruction(&i.name);
        }
    }
});
