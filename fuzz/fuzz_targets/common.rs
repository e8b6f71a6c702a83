//! Shared by the targets: runs every analysis over whatever decoded, serializing each
//! result, because analyses must not panic on weird-but-valid data either.

use stepscope_analysis::{kernels, ops, steps, summary, Profile};
use stepscope_xspace::Space;

pub fn analyse(space: Space) {
    let profile = Profile::new("fuzz", vec![space]);
    let _ = profile.devices();
    let _ = serde_json::to_vec(&steps::steps(&profile));
    let _ = serde_json::to_vec(&summary::summary(&profile, 10));
    for by in [ops::GroupBy::Op, ops::GroupBy::Category, ops::GroupBy::Module, ops::GroupBy::Scope] {
        let _ = serde_json::to_vec(&ops::ops(&profile, by, 2));
    }
    let _ = serde_json::to_vec(&kernels::kernels(&profile));
}
