//! An executed op's HLO instruction: found by the op's name in its module (by program
//! id where the op has one), in the HLO modules the profile holds.

use stepscope_xspace::hlo::{HloInstruction, HloModule, HloModules};

/// The HLO instruction `name` of `module`: in program `program`'s module where one is
/// given and a host's holds the instruction (the first such host's), else in the first
/// module of that name that holds it (several programs share the name: one jitted
/// function for several shapes; each host's newest compilation first).
pub fn instruction<'h>(
    hlo: &'h [HloModules],
    name: &str,
    module: &str,
    program: Option<u64>,
) -> Option<(&'h HloModule, &'h HloInstruction)> {
    if module.is_empty() {
        return only_instruction(hlo, name);
    }
    instruction_found(hlo, name, module, program).map(|(_, m, i)| (m, i))
}

/// [`instruction`] of a module named `module` (not empty), with how it was found: 0 in
/// program `program`'s module, 1 in the module of that name, 2 among every compilation
/// of that name. Over a run's hosts, the instruction found is the first host's among
/// those that found it the first way any did (a run read a host at a time looks in
/// each host alone, and keeps that one).
pub fn instruction_found<'h>(
    hlo: &'h [HloModules],
    name: &str,
    module: &str,
    program: Option<u64>,
) -> Option<(u8, &'h HloModule, &'h HloInstruction)> {
    let with_instruction = |m: &'h HloModule| m.instruction(name).map(|(_, i)| (m, i));
    let by_program = || {
        let p = program?;
        hlo.iter().find_map(|h| h.by_program_id(p as i64).filter(|m| m.name == module).and_then(with_instruction))
    };
    let by_name = || hlo.iter().find_map(|h| h.by_name(module).and_then(with_instruction));
    let any = || {
        hlo.iter().flat_map(|h| h.entries().iter().rev()).find_map(|e| {
            let m = e.module().ok().filter(|m| m.name == module)?;
            with_instruction(m)
        })
    };
    let found = by_program().map(|f| (0, f)).or_else(|| by_name().map(|f| (1, f))).or_else(|| any().map(|f| (2, f)));
    found.map(|(how, (m, i))| (how, m, i))
}

/// For ops whose events name no module (TPU `XLA Ops`): the instruction `name` of the
/// one module name that has one (its latest compilation); none where several do.
fn only_instruction<'h>(hlo: &'h [HloModules], name: &str) -> Option<(&'h HloModule, &'h HloInstruction)> {
    let mut found: Option<(&HloModule, &HloInstruction)> = None;
    for h in hlo {
        for e in h.entries().iter().rev() {
            let Ok(m) = e.module() else { continue };
            let Some((_, i)) = m.instruction(name) else { continue };
            match found {
                Some((f, _)) if f.name != m.name => return None,
                Some(_) => {}
                None => found = Some((m, i)),
            }
        }
    }
    found
}
