//! decode_hlo_proto on arbitrary bytes, then the module accessors the op profile uses,
//! the call-cycle check and the cost model's walks over fused bodies (which a module
//! whose fusions call themselves once made run for hours); and the buffer assignment
//! of the same bytes, with the memory plan `stepscope buffers` makes of it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stepscope_xspace::buffers::decode_buffer_assignment;
use stepscope_xspace::hlo::decode_hlo_proto;

fuzz_target!(|data: &[u8]| {
    let assignment = decode_buffer_assignment(data).ok().flatten();
    if let Ok(m) = decode_hlo_proto(data) {
        if let Some(a) = &assignment {
            for space in [0, 1] {
                let _ = stepscope_analysis::buffers::plan(&m, a, space, 10);
            }
        }
        let _ = m.entry().and_then(|c| c.root());
        let _ = m.instruction_count();
        let _ = m.call_cycle();
        for (_, i) in m.instructions() {
            let _ = stepscope_analysis::cost::is_matrix(&m, i);
            let _ = stepscope_analysis::cost::cost(&m, i);
            let _ = m.category(i);
            let _ = m.fused_body(i);
            let _ = m.operands(i).count();
            let _ = i.shape.bytes_size();
            let _ = i.shape.element_count();
            let _ = m.instruction(&i.name);
        }
    }
});
