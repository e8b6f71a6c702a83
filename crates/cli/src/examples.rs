//! The EXAMPLES block under each analysis command's `--help` (`serve`, `capture`, `top`
//! and `export` keep theirs beside their arguments). `tests/integration/docs.rs` runs
//! every line as written, `/tmp/logdir` being a real capture.

pub const LS: &str = "\
EXAMPLES:
    stepscope ls /tmp/logdir
        every run: when captured, hosts, size, steps
    stepscope ls /tmp/logdir --json
        the same as JSON";

pub const INFO: &str = "\
EXAMPLES:
    stepscope info /tmp/logdir
        the newest run: hosts, planes, lines, event counts
    stepscope info /tmp/logdir --json
        the same as JSON (stepscope.info/1)";

pub const SUMMARY: &str = "\
EXAMPLES:
    stepscope summary /tmp/logdir
        the newest run: step time, where it went, findings
    stepscope summary /tmp/logdir --json > baseline.json
        a baseline for stepscope check
    stepscope summary /tmp/logdir --peak-flops 989T --peak-bandwidth 3.35T
        your devices' peaks
    stepscope summary /tmp/logdir --host-at-a-time
        a pod's numbers and findings, one host in memory at a time";

pub const STEPS: &str = "\
EXAMPLES:
    stepscope steps /tmp/logdir
        the 10 slowest steps, in step order
    stepscope steps /tmp/logdir --top 0 --csv
        every step as CSV
    stepscope steps /tmp/logdir --critical-path
        what each step's time went to along its critical path";

pub const OPS: &str = "\
EXAMPLES:
    stepscope ops /tmp/logdir
        the 10 ops with the most self time
    stepscope ops /tmp/logdir --by line --top 20
        by the line of your Python that made them (also: category, module,
        scope, stack)
    stepscope ops /tmp/logdir --min-self 50ms
        the ops over 50 ms of self time
    stepscope ops /tmp/logdir --top 0 --csv
        every op as CSV";

pub const SCOPES: &str = "\
EXAMPLES:
    stepscope scopes /tmp/logdir
        your TraceAnnotation scopes, per step, with input work
    stepscope scopes /tmp/logdir --json
        the same as JSON (stepscope.scopes/1)";

pub const ROOFLINE: &str = "\
EXAMPLES:
    stepscope roofline /tmp/logdir
        each op against the device's roofs
    stepscope roofline /tmp/logdir --peak-flops 989T --peak-bandwidth 3.35T
        roofs you give";

pub const KERNELS: &str = "\
EXAMPLES:
    stepscope kernels /tmp/logdir
        GPU kernels by time, with their launch shapes
    stepscope kernels /tmp/logdir --top 0 --csv
        every kernel as CSV";

pub const MEMORY: &str = "\
EXAMPLES:
    stepscope memory /tmp/logdir
        allocator peaks, the live allocations at the peak
    stepscope memory /tmp/logdir --json
        the same as JSON (stepscope.memory/1)";

pub const BUFFERS: &str = "\
EXAMPLES:
    stepscope buffers /tmp/logdir
        the longest-running program's memory plan and peak
    stepscope buffers /tmp/logdir --program jit_train_step --top all
    stepscope buffers /tmp/logdir --json
        the same as JSON (stepscope.buffers/1)";

pub const COLLECTIVES: &str = "\
EXAMPLES:
    stepscope collectives /tmp/logdir
        all-reduce, all-gather, … and how much compute hid them
    stepscope collectives /tmp/logdir --json
        the same as JSON";

pub const COMPILE: &str = "\
EXAMPLES:
    stepscope compile /tmp/logdir
        XLA compilation during the capture, per module
    stepscope compile /tmp/logdir --json
        the same as JSON";

pub const DEVICES: &str = "\
EXAMPLES:
    stepscope devices /tmp/logdir
        every device, per host, and the stragglers
    stepscope devices /tmp/logdir --csv
        the same as CSV";

pub const HLO: &str = "\
EXAMPLES:
    stepscope hlo /tmp/logdir OP
        the op's HLO instruction, fusion body and source line
    stepscope hlo /tmp/logdir OP --json
        the same as JSON (stepscope.hlo/1)
    stepscope hlo /tmp/logdir OP --graph > op.dot
        operands, users and fusion body as a graph (Graphviz DOT)";

pub const ADVISE: &str = "\
EXAMPLES:
    stepscope advise /tmp/logdir
        every finding, with evidence and advice
    stepscope advise /tmp/logdir --json
        the same as JSON (stepscope.advise/1)
    stepscope advise /tmp/logdir --thresholds kpi.toml
        your own thresholds (utilization_pct = 70)";

pub const PART: &str = "\
EXAMPLES:
    stepscope part /tmp/logdir --plan
        the run and its hosts, as a driver hands them out (JSON)
    stepscope part /tmp/logdir --host vm -o host-0.part
        host vm, the run's first, mapped to its part where its file lives
    stepscope summary /tmp/logdir --parts . --json
        the run's summary reduced from the parts here (a host without one is read here)
    python -c 'import stepscope; print(stepscope.analyze_on_ray(\"/tmp/logdir\"))'
        the same on a Ray cluster, a task a host";

pub const WHATIF: &str = "\
EXAMPLES:
    stepscope whatif /tmp/logdir --remove compile
        the steps without their compilation
    stepscope whatif /tmp/logdir --scale compute=0.5
        compute twice as fast (an op: dot.31=0.5, a scope: scope:layer0=0.5)
    stepscope whatif /tmp/logdir --jit
        op-by-op code jitted: one launch a step
    stepscope whatif /tmp/logdir --prefetch input --json
        the input made ready a step ahead, as JSON";

pub const DIFF: &str = "\
EXAMPLES:
    stepscope diff runs/adam runs/sgd
        what changed from A to B, ranked by effect on the step
    stepscope diff runs/adam runs/sgd --by scope
        by your scopes (also: category, module, line, stack)
    stepscope diff runs/adam runs/sgd --json
        the same as JSON (stepscope.diff/1)";

pub const COMPARE: &str = "\
EXAMPLES:
    stepscope compare runs/adam runs/sgd runs/lion
        several runs side by side, the first as 100%
    stepscope compare runs/adam runs/sgd --by scope
        their scopes per step, row by row";

pub const HISTORY: &str = "\
EXAMPLES:
    stepscope history nightly/
        every run under nightly/ in capture order; the first that moved
    stepscope history ci/main ci/pr --json
        two folders' runs as one history, as JSON";

pub const SQL: &str = "\
EXAMPLES:
    stepscope sql 'SELECT name, self_ps FROM ops ORDER BY self_ps DESC LIMIT 5' /tmp/logdir
        the 5 ops with the most self time
    stepscope sql 'SELECT run, avg(duration_ps) FROM steps GROUP BY run' nightly/ --csv
        every run under nightly/
    stepscope sql 'SELECT count(*) FROM op_events' tables/
        a folder `stepscope tables -o tables/` wrote
    stepscope sql 'SELECT name, sql FROM sqlite_schema' /tmp/logdir
        the tables a query names, and their columns";

pub const MCP: &str = "\
EXAMPLES:
    stepscope mcp /tmp/logdir
        serve the profiles under /tmp/logdir to an agent (stdio)
        claude mcp add stepscope -- stepscope mcp /tmp/logdir   register it with
        Claude Code (docs/agents.md)";

pub const CHECK: &str = "\
EXAMPLES:
    stepscope summary runs/main --json > ci/baseline.json
        on the main branch: the baseline
    stepscope check runs/pr --baseline ci/baseline.json
        exit 1 if the median step grew over 5%
    stepscope check runs/pr --baseline ci/baseline.json --max-regression 10 --min-steps 5
    stepscope check runs/pr --max-step-ms 1000
        exit 1 if the mean step is over 1 s (no baseline)";
