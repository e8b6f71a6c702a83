//! Where a decoded XSpace's memory goes, per column kind, and which stats are too
//! wide to pack: `cargo run --release -p stepscope-xspace --example colsize FILE`.

use stepscope_xspace::*;
fn main() {
    let p = std::env::args().nth(1).unwrap();
    let s = xplane::read_xspace(std::path::Path::new(&p), &Progress::default()).unwrap();
    let mut tot = [0usize; 5];
    let mut n = 0usize;
    let mut other = 0usize;
    for pl in &s.planes {
        for l in &pl.lines {
            n += l.len();
            for (t, b) in tot.iter_mut().zip(l.heap_bytes()) {
                *t += b;
            }
        }
        other += pl.event_meta.capacity() * std::mem::size_of::<EventMeta>()
            + pl.stat_meta.capacity() * std::mem::size_of::<StatMeta>()
            + pl.meta_stats.capacity() * 16;
    }
    let names = ["times", "meta", "stat_start", "stats", "wide"];
    for (nm, t) in names.iter().zip(tot) {
        println!("{nm:>10} {:8.1} MB {:5.2} B/event", t as f64 / 1e6, t as f64 / n as f64);
    }
    println!("{:>10} {:8.1} MB; events {n}", "metadata", other as f64 / 1e6);
    for pl in &s.planes {
        println!("  plane {} stat_meta {} event_meta {}", pl.name, pl.stat_meta.len(), pl.event_meta.len());
    }
    wide_kinds(&s);
}
fn wide_kinds(s: &Space) {
    use std::collections::HashMap;
    let mut m: HashMap<(String, String), usize> = HashMap::new();
    for pl in &s.planes {
        for l in &pl.lines {
            for i in 0..l.len() {
                for st in l.event_stats(i) {
                    let wide = match st.value() {
                        StatValue::Str(_) | StatValue::Bytes(_) => true,
                        StatValue::U64(v) => v >= 1 << 40,
                        StatValue::I64(v) => !(-(1i64 << 39)..(1i64 << 39)).contains(&v),
                        StatValue::F64(v) => v.to_bits() & 0xFF_FFFF != 0,
                        _ => false,
                    };
                    if wide {
                        *m.entry((pl.stat_name(st.meta()).to_string(), format!("{:?}", st.kind()))).or_default() += 1;
                    }
                }
            }
        }
    }
    let mut v: Vec<_> = m.into_iter().collect();
    v.sort_by_key(|x| std::cmp::Reverse(x.1));
    for x in v.iter().take(12) {
        println!("  wide {:?}", x);
    }
}
