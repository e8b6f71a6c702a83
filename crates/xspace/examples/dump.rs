//! Developer tool: prints plane stats and the first events of each line with their stats.
//! `cargo run --example dump -- FILE [EVENTS_PER_LINE] [PLANE_FILTER]`

use stepscope_xspace::{discover, Progress};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = std::path::Path::new(args.get(1).ok_or("usage: dump FILE [N] [PLANE]")?);
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    let filter = args.get(3).cloned().unwrap_or_default();
    let run = discover::resolve(path, None)?;
    for space in run.load(&Progress::default())? {
        for plane in space.planes.iter().filter(|p| p.name.contains(&filter)) {
            println!(
                "PLANE {} (id {}) meta={} statmeta={}",
                plane.name,
                plane.id,
                plane.event_meta.len(),
                plane.stat_meta.len()
            );
            for s in &plane.stats {
                println!("  stat {} = {}", plane.stat_name(s.meta()), trunc(&plane.stat_display(s)));
            }
            for line in &plane.lines {
                println!("  LINE {:?} id={} ts_ns={} events={}", line.name, line.id, line.timestamp_ns, line.len());
                for i in 0..line.len().min(n) {
                    let meta = line.meta(i);
                    let stats: Vec<String> = line
                        .event_stats(i)
                        .chain(plane.metadata_stats(meta).iter().copied())
                        .map(|s| format!("{}={}", plane.stat_name(s.meta()), trunc(&plane.stat_display(&s))))
                        .collect();
                    println!(
                        "    [{}] +{} {:?} {}",
                        line.start_ps(i),
                        line.duration_ps(i),
                        plane.event_name(meta),
                        stats.join(" ")
                    );
                }
            }
        }
    }
    Ok(())
}

fn trunc(s: &str) -> String {
    s.chars().take(100).collect()
}
