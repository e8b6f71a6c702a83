//! `--ray ADDRESS`: a command of a run of many hosts mapped on a Ray cluster, one task
//! a host, handed to the Python package beside this binary (`stepscope.analyze_on_ray`,
//! docs/scale.md "On Ray"): what it prints is what `--json` prints of the run read here.

use std::ffi::OsString;
use std::process::{Command, Stdio};

/// The commands a Ray cluster maps.
const COMMANDS: [&str; 7] = ["summary", "advise", "steps", "devices", "ops", "check", "diff"];

/// The Python to hand the command to: `STEPSCOPE_PYTHON` (the package's own `stepscope`
/// command sets it to its interpreter), else `python3`.
const PYTHON_VAR: &str = "STEPSCOPE_PYTHON";

/// Runs the command `args` name (this process's arguments) on the Ray cluster at
/// `address`: its exit code, its answer on standard output, or its one-line error.
pub fn forward(address: &str, args: &[OsString]) -> u8 {
    match forward_to_python(address, args) {
        Ok(code) => code,
        Err(line) => {
            errln!("stepscope: {line}");
            2
        }
    }
}

fn forward_to_python(address: &str, args: &[OsString]) -> Result<u8, String> {
    let (words, json) = command_words(args)?;
    // The flags left out, the first word is the command.
    let command = words.first().and_then(|w| COMMANDS.iter().find(|c| w.to_str() == Some(c)));
    let Some(command) = command else {
        return Err(format!("--ray maps {} on a Ray cluster — drop --ray for this command", COMMANDS.join(", ")));
    };
    if !json {
        return Err(format!("--ray prints what `{command} --json` prints — add --json"));
    }
    let python = std::env::var_os(PYTHON_VAR).filter(|p| !p.is_empty()).unwrap_or_else(|| "python3".into());
    let child = Command::new(&python)
        .args(["-m", "stepscope._ray_cli"])
        .arg(address)
        .args(&words)
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .output();
    let needs = "--ray needs a Python with the stepscope package and Ray (pip install stepscope ray)";
    let out = match child {
        Ok(out) => out,
        Err(e) => {
            return Err(format!(
                "{needs}: {} could not be run ({e}) — set {PYTHON_VAR} to that Python",
                python.to_string_lossy()
            ))
        }
    };
    let code = out.status.code().unwrap_or(2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    let last = last.strip_prefix("stepscope: ").unwrap_or(last);
    if last.contains("No module named") {
        let python = python.to_string_lossy();
        return Err(format!("{needs}: {python} has none ({last}) — set {PYTHON_VAR} to a Python that has"));
    }
    // 0, or 1 for `check`'s failed gate (its JSON printed): an answer. Anything else
    // failed, its last line says why (the Python side says it in one line and exits 2).
    if code == 0 || (code == 1 && *command == "check") {
        return Ok(code as u8);
    }
    Err(if last.is_empty() { format!("the Ray run ended with exit code {code}") } else { last.to_string() })
}

/// The words after the program that the Python side parses (the command, its path and
/// its flags), and whether `--json` was given; `--ray` and the flags that only shape
/// this process's printing are left out.
fn command_words(args: &[OsString]) -> Result<(Vec<OsString>, bool), String> {
    let (mut words, mut json) = (Vec::new(), false);
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--ray") => {
                it.next();
            }
            Some(s) if s.starts_with("--ray=") => {}
            Some("--json") => json = true,
            Some("--wide") => {}
            Some(s) if s == "--cache" || s.starts_with("--cache=") => {
                return Err(
                    "--ray reads gs:// and s3:// paths on the nodes, with their credentials — drop --cache".into()
                )
            }
            _ => words.push(a.clone()),
        }
    }
    Ok((words, json))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_handed_over_leave_out_ray_and_the_printing_flags() {
        let args: Vec<OsString> =
            ["stepscope", "--wide", "summary", "gs://b/run", "--ray", "auto", "--top", "5", "--json", "--ray=x"]
                .into_iter()
                .map(OsString::from)
                .collect();
        let (words, json) = command_words(&args).unwrap();
        assert_eq!(words, ["summary", "gs://b/run", "--top", "5"].map(OsString::from));
        assert!(json);
        let cached: Vec<OsString> =
            ["stepscope", "ops", "r", "--cache", "/c"].into_iter().map(OsString::from).collect();
        assert!(command_words(&cached).unwrap_err().contains("drop --cache"));
    }
}
