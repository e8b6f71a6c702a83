//! The hosts of a pod joined at their collectives. Each host's step is replayed on its
//! own (its devices joined, [`super::replay_joined`]); what the other hosts need of it is
//! its [`Legs`]: when its last device reached each collective, and the transfer. The
//! k-th collective of a step then ends, on every host, when the last host reached it
//! plus the least transfer any host spent in it, as a host's devices join. So a host
//! that straggles holds every host back, a change on one host moves the others, and
//! `--balance` evens out the hosts too. A run read a host at a time keeps each host's
//! legs and joins them as the run read whole does: one join, whatever the reading.

use super::{step_end, step_tail, Cursor, Cuts, Edit, Node, StepGraph};

/// A step of one host, replayed, as the other hosts of its run see it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Legs {
    /// Per collective of the step, in order.
    joins: Vec<Leg>,
    /// From the last collective's end to the step's end (with its tail).
    last_ps: i64,
    /// Of that, the work of the device that ended the step.
    last_work_ps: i64,
}
stepscope_model::wire_struct!(Legs { joins, last_ps, last_work_ps });

/// The way to one collective.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Leg {
    /// From the collective before's end (or the step's start) until the host's last
    /// device reached it.
    ps: i64,
    /// Of that, the work (its ops but collectives) of the device that reached it last.
    work_ps: i64,
    /// The least time any of the host's devices spent in it.
    transfer_ps: i64,
}
stepscope_model::wire_struct!(Leg { ps, work_ps, transfer_ps });

/// Step `g` replayed with `edit` (its devices balanced as [`super::replay_step`] does),
/// as legs between its collectives: `None` where it holds none, or its devices hold
/// unequal numbers. Its legs and transfers add up to the step's replayed time.
pub(super) fn step_legs(g: &StepGraph, edit: &Edit, cuts: &Cuts) -> Option<Legs> {
    let chains = super::to_replay(g, edit, cuts);
    let count = |c: &super::Chain| c.segments.iter().filter(|s| s.node == Node::Collective).count();
    let n = count(chains.first()?.1);
    if n == 0 || chains.iter().any(|c| count(c.1) != n) {
        return None;
    }
    let work = |c: &Cursor| -> i64 {
        (Node::ALL.iter().zip(c.by_node))
            .filter(|(node, _)| node.is_op() && **node != Node::Collective)
            .fold(0i64, |w, (_, t)| w.saturating_add(t))
    };
    let mut cursors: Vec<Cursor> = chains.iter().map(|&(_, c, cuts, b)| Cursor::new(g.start_ps, c, cuts, b)).collect();
    let mut marks = vec![0i64; cursors.len()];
    let (mut joins, mut from) = (Vec::with_capacity(n), g.start_ps);
    for _ in 0..n {
        let (mut last, mut who, mut transfer) = (i64::MIN, 0usize, i64::MAX);
        for (i, cursor) in cursors.iter_mut().enumerate() {
            let s = cursor.run_until(edit, |s| s.node == Node::Collective)?;
            if cursor.t > last {
                (last, who) = (cursor.t, i);
            }
            transfer = transfer.min(cursor.op_time(s));
        }
        joins.push(Leg {
            ps: last.saturating_sub(from),
            work_ps: work(&cursors[who]).saturating_sub(marks[who]),
            transfer_ps: transfer,
        });
        from = last.saturating_add(transfer);
        for (cursor, mark) in cursors.iter_mut().zip(&mut marks) {
            cursor.advance_to(from, Node::Collective);
            *mark = work(cursor);
        }
    }
    let tail = step_tail(g);
    let mut ended = (i64::MIN, 0i64);
    for ((mut cursor, mark), &(ci, ..)) in cursors.into_iter().zip(marks).zip(&chains) {
        cursor.run_until(edit, |_| false);
        let w = work(&cursor).saturating_sub(mark);
        let end = step_end(g, &cursor.done(ci, edit), tail);
        if end > ended.0 {
            ended = (end, w);
        }
    }
    let last_ps = ended.0.saturating_sub(from.saturating_sub(g.start_ps));
    Some(Legs { joins, last_ps, last_work_ps: ended.1 })
}

/// A run's steps (each as its hosts' legs, hosts in one order; steps in order) joined
/// at their collectives: the time they take together. A step runs on every host from
/// its last collective's end a step before to its last collective's end: each host
/// starts its next step when it ends this one, not when the others do (a host with less
/// work after the last collective starts sooner), so the hosts are in step only at their
/// collectives. The k-th collective is reached when the slowest host reaches it (the
/// first, from the step before's last: that step's last leg, then this step's first)
/// and ends after the least transfer any host spent in it. Summed over the steps, the
/// time telescopes to the measured steps' whatever the hosts' phase in each. Each host's
/// work is scaled by its factor (`--balance`: [`balance_factors`]). `None` where
/// fewer than two hosts, or a step whose hosts hold unequal numbers of collectives.
pub(super) fn join(steps: &[Vec<&Legs>], factors: &[f64]) -> Option<i64> {
    // A leg with its work scaled by its host's factor.
    let kept = |ps: i64, work_ps: i64, h: usize| {
        let f = factors.get(h).copied().unwrap_or(1.0);
        ps.saturating_sub((work_ps as f64 * (1.0 - f)) as i64)
    };
    let mut total = 0i64;
    for (k, hosts) in steps.iter().enumerate() {
        let n = hosts.first()?.joins.len();
        if hosts.len() < 2 || n == 0 || hosts.iter().any(|l| l.joins.len() != n) {
            return None;
        }
        // The step before's hosts (the first step's own: the loop's steady state).
        let before = if k == 0 { hosts } else { &steps[k - 1] };
        for j in 0..n {
            let reach = (hosts.iter().enumerate())
                .map(|(h, l)| {
                    let leg = kept(l.joins[j].ps, l.joins[j].work_ps, h);
                    match (j, before.get(h)) {
                        (0, Some(b)) => leg.saturating_add(kept(b.last_ps, b.last_work_ps, h)),
                        _ => leg,
                    }
                })
                .max()?;
            let transfer = hosts.iter().map(|l| l.joins[j].transfer_ps).min()?;
            total = total.saturating_add(reach).saturating_add(transfer);
        }
    }
    Some(total)
}

/// `--balance` of a run's hosts, from each host's work a step (its mean legs'): the
/// factor that gives a host busier than the median host (of an even count, the lower
/// middle) the median's work. From the hosts' means, not step by step, so that hosts of
/// equal work whose steps vary do not gain from their noise.
pub(super) fn balance_factors(work: &[i64]) -> Vec<f64> {
    let mut sorted: Vec<i64> = work.iter().copied().filter(|&w| w > 0).collect();
    sorted.sort_unstable();
    let median = sorted.get(sorted.len().saturating_sub(1) / 2).copied().unwrap_or(0);
    work.iter().map(|&w| if w > median && w > 0 { median as f64 / w as f64 } else { 1.0 }).collect()
}

/// The value seen most often (of a tie, the least); `None` of none.
pub(super) fn most_common(values: impl Iterator<Item = usize>) -> Option<usize> {
    let mut v: Vec<usize> = values.collect();
    v.sort_unstable();
    let runs = v.chunk_by(|a, b| a == b);
    runs.max_by_key(|r| (r.len(), std::cmp::Reverse(r[0]))).map(|r| r[0])
}

impl Legs {
    /// The host's work in the step, along its legs.
    pub(super) fn work_ps(&self) -> i64 {
        self.joins.iter().map(|l| l.work_ps).fold(self.last_work_ps, i64::saturating_add)
    }

    /// Its collectives.
    pub(super) fn collectives(&self) -> usize {
        self.joins.len()
    }

    /// The mean of some steps' legs, each holding as many collectives (of none, none).
    pub(super) fn mean<'a>(steps: impl Iterator<Item = &'a Legs>) -> Legs {
        let (mut sum, mut n) = (Legs::default(), 0i64);
        for l in steps {
            if n == 0 {
                sum.joins = vec![Leg { ps: 0, work_ps: 0, transfer_ps: 0 }; l.joins.len()];
            }
            for (s, j) in sum.joins.iter_mut().zip(&l.joins) {
                (s.ps, s.work_ps, s.transfer_ps) = (s.ps + j.ps, s.work_ps + j.work_ps, s.transfer_ps + j.transfer_ps);
            }
            (sum.last_ps, sum.last_work_ps) = (sum.last_ps + l.last_ps, sum.last_work_ps + l.last_work_ps);
            n += 1;
        }
        let n = n.max(1);
        for s in &mut sum.joins {
            (s.ps, s.work_ps, s.transfer_ps) = (s.ps / n, s.work_ps / n, s.transfer_ps / n);
        }
        (sum.last_ps, sum.last_work_ps) = (sum.last_ps / n, sum.last_work_ps / n);
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legs(joins: &[(i64, i64, i64)], last: (i64, i64)) -> Legs {
        Legs {
            joins: joins.iter().map(|&(ps, work_ps, transfer_ps)| Leg { ps, work_ps, transfer_ps }).collect(),
            last_ps: last.0,
            last_work_ps: last.1,
        }
    }

    #[test]
    fn hosts_wait_for_the_last_at_each_collective_and_balance_evens_their_work() {
        // Host b takes twice a's work before the first collective; a has more after
        // the last (each starts its next step when it ends this one).
        let a = legs(&[(10, 10, 6), (1, 1, 2)], (5, 5));
        let b = legs(&[(20, 20, 1), (1, 1, 3)], (1, 1));
        let one = |f: &[f64]| join(&[vec![&a, &b]], f);
        // Reached at the slowest host's 21 (b's 1 + 20), then the least transfer, 1;
        // then 1 and 2.
        assert_eq!(one(&[1.0, 1.0]), Some(21 + 1 + 1 + 2));
        // Balanced: b (work 22) does a's (16): its way to the first is (1 + 20) less
        // the work it no longer does; a's 15 is then the slower.
        let f = balance_factors(&[a.work_ps(), b.work_ps()]);
        assert_eq!(f, vec![1.0, 16.0 / 22.0]);
        let b_first = 20 - (20.0 * (1.0 - f[1])) as i64 + 1 - (1.0 * (1.0 - f[1])) as i64;
        assert_eq!(one(&f), Some(b_first.max(15) + 1 + 1 + 2));
        // A second step reaches its first collective from the first step's last legs.
        let b2 = legs(&[(8, 8, 1), (1, 1, 3)], (1, 1));
        assert_eq!(
            join(&[vec![&a, &b], vec![&a, &b2]], &[1.0, 1.0]),
            Some(25 + [5 + 10, 1 + 8].into_iter().max().unwrap() + 1 + 1 + 2)
        );
        // The median host's work: of three, the middle; of two, the lesser.
        assert_eq!(balance_factors(&[15, 15, 30]), vec![1.0, 1.0, 0.5]);
        assert_eq!(balance_factors(&[20, 10]), vec![0.5, 1.0]);
        // The mean of steps' legs.
        let m = Legs::mean([&a, &b].into_iter());
        assert_eq!(m, legs(&[(15, 15, 3), (1, 1, 2)], (3, 3)));
        assert_eq!(most_common([2, 1, 2, 1, 0].into_iter()), Some(1));
        // One host, none or unequal collectives: no join.
        assert_eq!(join(&[vec![&a]], &[1.0]), None);
        assert_eq!(join(&[vec![&a, &legs(&[], (5, 5))]], &[1.0, 1.0]), None);
    }
}
