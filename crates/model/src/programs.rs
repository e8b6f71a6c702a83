//! One program across the hosts of a run.
//!
//! XLA numbers a process's programs in the order it compiles them (`program_id`). The
//! processes of a pod run one program, but a process that compiled something else
//! first (a metric on process 0, a helper of another shape) gives it another number,
//! and gives its number to another program. Keyed by number, a pod's op profile shows
//! each op of its training step once per numbering, and sums ops of different
//! programs that happen to share a name and a number.
//!
//! Here a host's program is known by its signature ([`HloEntry::signature`]: its
//! module's name and program shape), where the host holds its HLO and no other program
//! of the host has that signature, else by its number. Not by the whole HLO: two
//! processes that compiled one function for one shape can still differ in what
//! autotuning chose (a fusion's kind, a GEMM's algorithm, the schedule).
//! Hosts are added in the run's order ([`RunPrograms::add`]), and each program gets the
//! number of the first host that ran it. Two programs of one host are never one (the
//! number is the program within a process). A program whose number an earlier host
//! used for another program of the same module name is kept apart, with the name of
//! its host in its label ([`RunPrograms::label`]): `jit_f(10)` is never two programs.
//!
//! [`HloEntry::signature`]: stepscope_xspace::hlo::HloEntry::signature

use std::sync::Arc;

use stepscope_xspace::hlo::HloModules;

use crate::records::FastMap;
use crate::wire::Wire;

/// What a host's program is across the hosts of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Identity {
    /// Its signature (module name and program shape).
    Signature(u64),
    /// No HLO to tell by: its module name's fingerprint and its number.
    Number(u64, u64),
}

impl crate::wire::Wire for Identity {
    fn put(&self, out: &mut Vec<u8>) {
        match *self {
            Identity::Signature(s) => (0u8, s, 0u64).put(out),
            Identity::Number(f, n) => (1u8, f, n).put(out),
        }
    }
    fn take(bytes: &mut crate::wire::Bytes<'_>) -> Result<Self, crate::wire::WireError> {
        match <(u8, u64, u64)>::take(bytes)? {
            (0, s, _) => Ok(Identity::Signature(s)),
            (1, f, n) => Ok(Identity::Number(f, n)),
            (k, _, _) => Err(crate::wire::WireError(format!("{k} is no program identity"))),
        }
    }
}

/// The programs of one host that some rows name: each one's identity by its number on
/// the host, and the host's name.
#[derive(Clone, Debug, Default)]
pub struct HostPrograms {
    host: Arc<str>,
    /// (number on the host, module name, identity), in the order first named.
    programs: Vec<(u64, Arc<str>, Identity)>,
}
crate::wire_struct!(HostPrograms { host, programs });

impl HostPrograms {
    /// The programs `named` (number, module name) of host `host`, told by the host's
    /// HLO (`hlo`).
    pub fn of<'a>(host: &str, hlo: &HloModules, named: impl IntoIterator<Item = (u64, &'a str)>) -> HostPrograms {
        let mut programs: Vec<(u64, Arc<str>, Identity)> = Vec::new();
        let mut seen: FastMap<(u64, &str), ()> = FastMap::default();
        for (number, module) in named {
            if seen.insert((number, module), ()).is_some() {
                continue;
            }
            let signature = (hlo.entry(number as i64)).filter(|e| e.name == module).and_then(|e| e.signature());
            // A signature two programs of the host share tells neither.
            let one = |sig: &u64| {
                let mut same = hlo.entries().iter().filter(|e| e.name == module && e.signature() == Some(*sig));
                same.next().is_some() && same.next().is_none()
            };
            let identity = match signature.filter(one) {
                Some(sig) => Identity::Signature(sig),
                None => Identity::Number(name_hash(module), number),
            };
            programs.push((number, module.into(), identity));
        }
        HostPrograms { host: host.into(), programs }
    }
}

/// A host's program numbers in the run, where they differ from its own: per number
/// on the host, per module name, the run's.
#[derive(Clone, Debug, Default)]
pub struct ProgramIds(FastMap<u64, Vec<(Arc<str>, u64)>>);

impl Wire for ProgramIds {
    fn put(&self, out: &mut Vec<u8>) {
        self.0.put(out);
    }
    fn take(bytes: &mut crate::wire::Bytes<'_>) -> Result<Self, crate::wire::WireError> {
        Wire::take(bytes).map(ProgramIds)
    }
}

impl ProgramIds {
    /// The run's number of the host's program `number` of module `module`.
    pub fn run(&self, number: u64, module: &str) -> u64 {
        let renumbered = self.0.get(&number).and_then(|m| m.iter().find(|(name, _)| **name == *module));
        renumbered.map_or(number, |&(_, run)| run)
    }

    fn insert(&mut self, number: u64, module: &Arc<str>, run: u64) {
        self.0.entry(number).or_default().push((module.clone(), run));
    }

    /// True where every number of the host is the run's.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The programs of the hosts of a run added so far, numbered for the run.
#[derive(Clone, Debug, Default)]
pub struct RunPrograms {
    /// Per identity (with its module name): its number in the run.
    numbers: FastMap<Identity, u64>,
    /// The (number, module name) pairs any host added so far has used, as its own
    /// or as the run's: a program that comes with one of them is another host's
    /// program under a number already read as something else.
    used: FastMap<(u64, Arc<str>), ()>,
    /// Numbers given to programs kept apart (see [`RunPrograms::label`]), from
    /// `u64::MAX - 1` down: per number, the program's own and its host's name.
    apart: Vec<(u64, Arc<str>)>,
}
crate::wire_struct!(RunPrograms { numbers, used, apart });

impl RunPrograms {
    /// Adds a host's programs (after those of the hosts already added): the run's
    /// number of each.
    pub fn add(&mut self, host: &HostPrograms) -> ProgramIds {
        let mut ids = ProgramIds::default();
        // The run's numbers this host's programs took: two programs of one host (one
        // HLO compiled for two devices) stay two.
        let mut claimed: FastMap<(u64, &str), ()> = FastMap::default();
        for (number, module, identity) in &host.programs {
            let key = (*number, module.clone());
            let known = self.numbers.get(identity).copied().filter(|&run| !claimed.contains_key(&(run, &**module)));
            let run = match known {
                Some(run) => run,
                None => {
                    let run = match self.used.contains_key(&key) {
                        false => *number,
                        true => {
                            self.apart.push((*number, host.host.clone()));
                            u64::MAX - self.apart.len() as u64
                        }
                    };
                    self.numbers.entry(*identity).or_insert(run);
                    run
                }
            };
            claimed.insert((run, module), ());
            if run != *number {
                ids.insert(*number, module, run);
            }
        }
        for (number, module, _) in &host.programs {
            self.used.insert((*number, module.clone()), ());
        }
        for (module, run) in ids.0.values().flatten() {
            self.used.insert((*run, module.clone()), ());
        }
        ids
    }

    /// The number a row shows for the run's program `run`: the program's own on its
    /// first host.
    pub fn shown(&self, run: u64) -> u64 {
        self.apart(run).map_or(run, |(number, _)| number)
    }

    /// A program's label, `jit_dot(49)`; for one kept apart from an earlier host's
    /// program of its name and number, with its host: `jit_dot(49) on host-1`.
    pub fn label(&self, module: &str, run: u64) -> String {
        match self.apart(run) {
            Some((number, host)) => format!("{module}({number}) on {host}"),
            None => format!("{module}({run})"),
        }
    }

    /// Whether the run's program `run` was kept apart from an earlier host's program
    /// of its name and number: its label names its host, and is always shown.
    pub fn is_apart(&self, run: u64) -> bool {
        self.apart(run).is_some()
    }

    /// Of the run's program `run`, kept apart: its own number and its host.
    pub fn apart(&self, run: u64) -> Option<(u64, &str)> {
        let k = u64::MAX.checked_sub(run)?;
        self.apart.get((k as usize).checked_sub(1)?).map(|(number, host)| (*number, &**host))
    }
}

/// Of a label [`RunPrograms::label`] made for a program kept apart, `jit_f(10) on
/// host2`: the program (`jit_f(10)`) and its host.
pub fn split_label(label: &str) -> Option<(&str, &str)> {
    label.split_once(" on ").filter(|(program, _)| program.ends_with(')'))
}

/// A module name's hash (FNV-1a), the same in every process.
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, programs: &[(u64, &str, Identity)]) -> HostPrograms {
        let programs = programs.iter().map(|&(n, m, i)| (n, Arc::from(m), i)).collect();
        HostPrograms { host: name.into(), programs }
    }

    #[test]
    fn one_program_under_two_numbers_is_one_and_two_under_one_number_are_two() {
        let (step, norm64, norm32) = (Identity::Signature(1), Identity::Signature(2), Identity::Signature(3));
        let mut run = RunPrograms::default();
        let first = run.add(&host("h0", &[(14, "jit_step", step), (16, "jit_norm", norm64)]));
        assert!(first.is_empty());
        let second = run.add(&host("h1", &[(8, "jit_step", step), (10, "jit_norm", norm64)]));
        assert_eq!((second.run(8, "jit_step"), second.run(10, "jit_norm")), (14, 16));
        // Another program under the number h1 gave its norm: kept apart, with its host.
        let third = run.add(&host("h2", &[(8, "jit_step", step), (10, "jit_norm", norm32)]));
        assert_eq!(third.run(8, "jit_step"), 14);
        let apart = third.run(10, "jit_norm");
        assert!(run.is_apart(apart));
        assert_eq!((run.shown(apart), run.label("jit_norm", apart)), (10, "jit_norm(10) on h2".to_string()));
        assert_eq!((run.shown(16), run.label("jit_norm", 16)), (16, "jit_norm(16)".to_string()));
        // A number of another module is not taken.
        let fourth = run.add(&host("h3", &[(10, "jit_other", Identity::Signature(4))]));
        assert_eq!(fourth.run(10, "jit_other"), 10);
    }

    #[test]
    fn two_programs_of_one_host_stay_two_and_programs_without_hlo_go_by_number() {
        let same = Identity::Signature(7);
        let mut run = RunPrograms::default();
        let h0 = run.add(&host("h0", &[(3, "jit_f", same), (5, "jit_f", same)]));
        assert_eq!((h0.run(3, "jit_f"), h0.run(5, "jit_f")), (3, 5));
        // Another host's one program of that signature is the first of them.
        let h1 = run.add(&host("h1", &[(9, "jit_f", same)]));
        assert_eq!(h1.run(9, "jit_f"), 3);
        let by_number = Identity::Number(name_hash("jit_g"), 4);
        run.add(&host("h0", &[(4, "jit_g", by_number)]));
        let h1 = run.add(&host("h1", &[(4, "jit_g", Identity::Number(name_hash("jit_g"), 4))]));
        assert_eq!(h1.run(4, "jit_g"), 4);
        assert!(!run.is_apart(4));
    }
}
