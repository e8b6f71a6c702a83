//! `stepscope top`: a live view of a running JAX job, from short captures repeated
//! every few seconds. A terminal screen on a terminal; one line per refresh otherwise.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use clap::Args;
use stepscope_analysis::ops::GroupBy;
use stepscope_analysis::Profile;
use stepscope_capture::{local_clock, parse_duration, parse_targets, Session};
use stepscope_report::live::{self, Snapshot};

use crate::cmd::capture::TraceArgs;
use crate::human;

pub const EXAMPLES: &str = "\
EXAMPLES:
    # in the job:  jax.profiler.start_server(9012)
    stepscope top 127.0.0.1:9012
        live screen; q quits, p pauses
    stepscope top 127.0.0.1:9012 --window 1s --interval 5s
    stepscope top 127.0.0.1:9012 --plain --count 10
        ten lines, one per refresh
    stepscope top 127.0.0.1:9012 --json --count 1
        one JSON snapshot (stepscope.top/1)";

#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct TopArgs {
    /// Profiler servers as HOST:PORT, comma-separated (the port the job passed to
    /// jax.profiler.start_server).
    #[arg(value_name = "HOST:PORT[,HOST:PORT…]")]
    pub targets: String,
    /// How long each capture traces: 500ms, 1s.
    #[arg(long, value_name = "TIME", default_value = "500ms")]
    pub window: String,
    /// Time from one capture's start to the next: 2s, 5s.
    #[arg(long, value_name = "TIME", default_value = "2s")]
    pub interval: String,
    /// Stop after N refreshes (default: run until quit).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub count: Option<u64>,
    /// Ops listed.
    #[arg(long, value_name = "N", allow_negative_numbers = true, default_value_t = 5)]
    pub top: usize,
    /// One line per refresh instead of a screen (the default when stdout is not a terminal).
    #[arg(long)]
    pub plain: bool,
    /// One JSON object per refresh (schema stepscope.top/1).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub trace: TraceArgs,
}

/// The outcome of one capture.
struct Refresh {
    at: SystemTime,
    result: Result<Capture, String>,
}

/// What one successful capture showed.
struct Capture {
    snapshot: Snapshot,
    bytes: u64,
    events: u64,
    took: Duration,
}

/// Flags the screen shares with the capture thread.
#[derive(Default)]
struct Control {
    quit: AtomicBool,
    paused: AtomicBool,
}

pub fn run(args: &TopArgs) -> anyhow::Result<ExitCode> {
    let targets = parse_targets(&args.targets)?;
    let window = parse_duration(&args.window)?;
    let interval = parse_duration(&args.interval)?;
    if window > interval {
        anyhow::bail!(
            "--window {} is longer than --interval {} — make the interval at least as long as the window",
            args.window.trim(),
            args.interval.trim()
        );
    }
    if args.count == Some(0) {
        anyhow::bail!("--count 0 shows nothing — pass --count 1 or more, or leave it out");
    }
    let label = targets.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ");
    let session = Session::new(targets, args.trace.options(window)?)?;
    let control = Arc::new(Control::default());
    let (tx, rx) = mpsc::channel();
    {
        let control = control.clone();
        let (top, count) = (args.top, args.count);
        std::thread::spawn(move || capture_loop(session, interval, top, count, &control, &tx));
    }
    let plain = args.plain || args.json || !std::io::stdout().is_terminal();
    let view = View { label, window, interval, count: args.count, json: args.json };
    let result = if plain { run_plain(&view, &rx) } else { run_screen(&view, &rx, &control) };
    control.quit.store(true, Ordering::Relaxed);
    result
}

/// Captures every `interval` until told to quit or `count` refreshes were made.
fn capture_loop(
    mut session: Session,
    interval: Duration,
    top: usize,
    count: Option<u64>,
    control: &Control,
    tx: &mpsc::Sender<Refresh>,
) {
    let mut made = 0u64;
    while !control.quit.load(Ordering::Relaxed) && count.is_none_or(|c| made < c) {
        if control.paused.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let start = Instant::now();
        let at = SystemTime::now();
        let result = session.capture().map_err(|e| e.to_string()).map(|captures| {
            let bytes = captures.iter().map(|c| c.bytes.len() as u64).sum();
            let events = captures.iter().map(|c| c.space.event_count()).sum();
            let profile = Profile::new("live", captures.into_iter().map(|c| c.space).collect());
            Capture { snapshot: live::snapshot(&profile, top), bytes, events, took: start.elapsed() }
        });
        made += 1;
        if tx.send(Refresh { at, result }).is_err() {
            return;
        }
        while start.elapsed() < interval && !control.quit.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20).min(interval.saturating_sub(start.elapsed())));
        }
    }
}

/// What the views show besides the refreshes.
struct View {
    label: String,
    window: Duration,
    interval: Duration,
    count: Option<u64>,
    json: bool,
}

/// One line per refresh; the first failed capture ends the command with its error.
fn run_plain(view: &View, rx: &mpsc::Receiver<Refresh>) -> anyhow::Result<ExitCode> {
    let mut seen = 0u64;
    let mut out = std::io::stdout().lock();
    while let Ok(r) = rx.recv() {
        seen += 1;
        match &r.result {
            Err(e) if seen == 1 => anyhow::bail!("{e}"),
            Err(e) => errln!("{}  {e}", local_clock(r.at)),
            Ok(c) if view.json => writeln!(out, "{}", serde_json::to_string(&c.snapshot)?)?,
            Ok(c) => writeln!(out, "{}  {}", local_clock(r.at), plain_line(&c.snapshot))?,
        }
        out.flush()?;
        if view.count.is_some_and(|n| seen >= n) {
            break;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The plain view of one snapshot, e.g.
/// `steps 75  step 6.45 ms p90 7.75 ms  util 79.1%  idle 20.9%  mem n/a  top dot.31 12.3%`.
fn plain_line(s: &Snapshot) -> String {
    let step = if s.step_count == 0 {
        "step n/a".to_string()
    } else {
        format!("step {} p90 {}", human::duration_ps(s.step_time.mean_ps), human::duration_ps(s.step_time.p90_ps))
    };
    let top = s.top_ops.first().map_or("n/a".to_string(), |o| format!("{} {:.1}%", o.name, o.device_time_pct));
    format!(
        "steps {}  {step}  util {:.1}%  idle {:.1}%  mem {}  top {top}",
        s.step_count,
        s.device_utilization_pct,
        s.idle_pct,
        memory_text(s)
    )
}

fn memory_text(s: &Snapshot) -> String {
    match &s.memory {
        Some(m) => format!("{} (peak {})", human::bytes(m.in_use_bytes), human::bytes(m.peak_in_use_bytes)),
        None => "n/a".into(),
    }
}

/// Bars for a sparkline, lowest to highest.
const SPARKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A sparkline of `values` scaled between their minimum and maximum.
fn sparkline(values: &[i64]) -> String {
    let (Some(&lo), Some(&hi)) = (values.iter().min(), values.iter().max()) else { return String::new() };
    values
        .iter()
        .map(|&v| {
            if hi == lo {
                SPARKS[3]
            } else {
                let i = ((v - lo) as f64 / (hi - lo) as f64 * 7.0).round() as usize;
                SPARKS[i.min(7)]
            }
        })
        .collect()
}

/// A bar of `width` cells filled to `pct` percent.
fn bar(pct: f64, width: usize) -> String {
    let full = ((pct.clamp(0.0, 100.0) / 100.0) * width as f64).round() as usize;
    format!("{}{}", "█".repeat(full), "░".repeat(width - full.min(width)))
}

/// What the screen remembers between refreshes.
#[derive(Default)]
struct ScreenState {
    last: Option<(SystemTime, Capture)>,
    error: Option<(SystemTime, String)>,
    /// Mean step time of each refresh with steps, oldest first.
    trend_ps: Vec<i64>,
    refreshes: u64,
    paused: bool,
}

const TREND_LEN: usize = 60;

impl ScreenState {
    fn take(&mut self, r: Refresh) {
        self.refreshes += 1;
        match r.result {
            Ok(c) => {
                if c.snapshot.step_count > 0 {
                    self.trend_ps.push(c.snapshot.step_time.mean_ps);
                    if self.trend_ps.len() > TREND_LEN {
                        self.trend_ps.remove(0);
                    }
                }
                self.error = None;
                self.last = Some((r.at, c));
            }
            Err(e) => self.error = Some((r.at, e)),
        }
    }

    /// The screen's lines, cut to `width` columns.
    fn lines(&self, view: &View, width: usize) -> Vec<String> {
        let mut l = Vec::new();
        let state = if self.paused { "  [paused]" } else { "" };
        l.push(format!(
            "stepscope top — {} · {} window every {}{state}",
            view.label,
            human::duration_ps(view.window.as_nanos() as i64 * 1000),
            human::duration_ps(view.interval.as_nanos() as i64 * 1000)
        ));
        l.push(String::new());
        match &self.last {
            None => l.push(if self.error.is_none() { "capturing…".into() } else { String::new() }),
            Some((at, c)) => {
                let s = &c.snapshot;
                if s.step_count == 0 {
                    l.push(
                        "STEP TIME   no steps in the window: wrap steps in jax.profiler.StepTraceAnnotation, \
                         or widen --window"
                            .into(),
                    );
                } else {
                    let t = &s.step_time;
                    l.push(format!(
                        "STEP TIME   mean {}  p50 {}  p90 {}  max {}  · {} steps in {}",
                        human::duration_ps(t.mean_ps),
                        human::duration_ps(t.median_ps),
                        human::duration_ps(t.p90_ps),
                        human::duration_ps(t.max_ps),
                        s.step_count,
                        human::duration_ps(s.window_ps)
                    ));
                }
                let n = self.trend_ps.len();
                let trend = if n == 0 {
                    "n/a".to_string()
                } else {
                    let (lo, hi) = (
                        self.trend_ps.iter().min().copied().unwrap_or(0),
                        self.trend_ps.iter().max().copied().unwrap_or(0),
                    );
                    format!(
                        "{}  {}–{} (mean step, last {n} refreshes)",
                        sparkline(&self.trend_ps),
                        human::duration_ps(lo),
                        human::duration_ps(hi)
                    )
                };
                l.push(format!("TREND       {trend}"));
                l.push(format!(
                    "DEVICE      busy {:>5.1}%  {}   idle (host-bound) {:.1}%",
                    s.device_utilization_pct,
                    bar(s.device_utilization_pct, 20),
                    s.idle_pct
                ));
                l.push(format!("MEMORY      {}", memory_text(s)));
                l.push(format!(
                    "CAPTURE     {} at {}, {} events, took {}",
                    human::bytes(c.bytes),
                    local_clock(*at),
                    human::count(c.events),
                    human::duration_ps(c.took.as_nanos() as i64 * 1000)
                ));
                l.push(String::new());
                if s.top_ops.is_empty() {
                    l.push("no XLA ops in the window".into());
                } else {
                    l.push("TOP OPS (self time in the window)".into());
                    l.extend(
                        crate::cmd::ops::op_table(&s.top_ops, GroupBy::Op, false).text().lines().map(str::to_string),
                    );
                }
            }
        }
        if let Some((at, e)) = &self.error {
            l.push(String::new());
            l.push(format!("{}  capture failed: {e}", local_clock(*at)));
        }
        l.push(String::new());
        l.push(format!("q quit · p {} · refreshes {}", if self.paused { "resume" } else { "pause" }, self.refreshes));
        l.into_iter().map(|s| crate::table::fit(&s, width)).collect()
    }
}

/// Puts the terminal back however the screen ends: return, error, panic, or a
/// signal that ends the process (SIGTERM, SIGHUP, SIGINT, SIGQUIT: the terminal is
/// restored, then the process exits with 128 + the signal, as the shell reports it).
struct TerminalGuard {
    signals: signal_hook::iterator::Handle,
}

impl TerminalGuard {
    fn enter() -> anyhow::Result<TerminalGuard> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGHUP, SIGINT, SIGQUIT])?;
        let guard = TerminalGuard { signals: signals.handle() };
        std::thread::spawn(move || {
            if let Some(sig) = signals.forever().next() {
                restore_terminal();
                std::process::exit(128 + sig);
            }
        });
        crossterm::terminal::enable_raw_mode()?;
        crossterm::execute!(std::io::stdout(), crossterm::terminal::EnterAlternateScreen, crossterm::cursor::Hide)?;
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        self.signals.close();
        restore_terminal();
    }
}

fn restore_terminal() {
    let _ = crossterm::execute!(std::io::stdout(), crossterm::cursor::Show, crossterm::terminal::LeaveAlternateScreen);
    let _ = crossterm::terminal::disable_raw_mode();
}

/// The full-screen view; q, Esc or Ctrl-C quit, p or space pause.
fn run_screen(view: &View, rx: &mpsc::Receiver<Refresh>, control: &Control) -> anyhow::Result<ExitCode> {
    use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
    let guard = TerminalGuard::enter()?;
    let mut state = ScreenState::default();
    let mut dirty = true;
    let mut first_error = None;
    loop {
        if dirty {
            draw(&state.lines(view, terminal_width()))?;
            dirty = false;
        }
        if event::poll(Duration::from_millis(50))? {
            match event::read()? {
                Event::Key(k) if k.kind != KeyEventKind::Release => match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => break,
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => break,
                    KeyCode::Char('p') | KeyCode::Char(' ') => {
                        state.paused = !state.paused;
                        control.paused.store(state.paused, Ordering::Relaxed);
                        dirty = true;
                    }
                    _ => {}
                },
                Event::Resize(..) => dirty = true,
                _ => {}
            }
        }
        while let Ok(r) = rx.try_recv() {
            if state.refreshes == 0 {
                if let Err(e) = &r.result {
                    first_error = Some(e.clone());
                }
            }
            state.take(r);
            dirty = true;
        }
        if first_error.is_some() || view.count.is_some_and(|n| state.refreshes >= n) {
            break;
        }
    }
    drop(guard);
    match first_error {
        Some(e) => anyhow::bail!("{e}"),
        None => Ok(ExitCode::SUCCESS),
    }
}

fn terminal_width() -> usize {
    crossterm::terminal::size().map_or(100, |(w, _)| w.max(20) as usize)
}

fn draw(lines: &[String]) -> anyhow::Result<()> {
    use crossterm::{cursor, queue, style, terminal};
    let mut out = std::io::stdout().lock();
    queue!(out, cursor::MoveTo(0, 0), terminal::Clear(terminal::ClearType::All))?;
    for (i, line) in lines.iter().enumerate() {
        queue!(out, cursor::MoveTo(0, i as u16), style::Print(line))?;
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparkline_scales_min_to_max() {
        assert_eq!(sparkline(&[1, 2, 3, 4, 5, 6, 7, 8]), "▁▂▃▄▅▆▇█");
        assert_eq!(sparkline(&[5, 5]), "▄▄");
        assert_eq!(sparkline(&[]), "");
    }

    #[test]
    fn bars_fill_to_percent() {
        assert_eq!(bar(50.0, 4), "██░░");
        assert_eq!(bar(150.0, 2), "██");
        assert_eq!(bar(-1.0, 2), "░░");
    }
}
