"""`stepscope mcp` with the official MCP Python SDK as the client, as an agent uses it:
initialize, list the tools, call them on real fixtures and compare with the CLI's JSON;
a path outside the roots is refused, a long answer is cut with a note, a bad profile
is an error that names the file."""

import asyncio
import json
import subprocess
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"


def cli_json(cli, *args):
    r = subprocess.run([cli, *args], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def session(cli, *server_args, calls):
    """Runs `calls(session)` against `stepscope mcp SERVER_ARGS…`; returns what it returns."""

    async def go():
        params = StdioServerParameters(command=str(cli), args=["mcp", *map(str, server_args)])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                init = await s.initialize()
                assert init.server_info.name == "stepscope"
                assert "summary" in init.instructions
                return await calls(s)

    return asyncio.run(go())


def text_of(result):
    assert len(result.content) == 1 and result.content[0].type == "text"
    return result.content[0].text


# Step time and the top op of each run, in one query.
SQL = ("SELECT s.run, count(*) AS steps, avg(s.duration_ps) AS avg_ps, "
       "(SELECT name FROM ops o WHERE o.run = s.run ORDER BY self_ps DESC LIMIT 1) AS top_op "
       "FROM steps s GROUP BY s.run ORDER BY s.run")


def test_an_agent_reads_a_profile_as_the_cli_does(cli, tmp_path):
    run = FIXTURES / "cpu-transformer"

    async def calls(s):
        tools = {t.name: t for t in (await s.list_tools()).tools}
        out = {"tools": tools}
        out["summary"] = await s.call_tool("summary", {"path": str(run), "top": 3})
        out["ops"] = await s.call_tool("ops", {"path": str(run), "by": "scope", "top": 5})
        out["advise"] = await s.call_tool("advise", {"path": str(run)})
        first = json.loads(text_of(out["ops"]))
        out["first_scope"] = first["ops"][0]["name"]
        op = cli_json(cli, "ops", str(run), "--json", "--top", "1")["ops"][0]["name"]
        out["op"] = op
        out["hlo"] = await s.call_tool("hlo", {"path": str(run), "op": op})
        step = cli_json(cli, "steps", str(run), "--json")["steps"][3]
        window = (step["start_ps"], step["start_ps"] + step["duration_ps"])
        out["window"] = window
        out["timeline"] = await s.call_tool("timeline", {"path": str(run), "from": window[0], "to": f"{window[1]}ps"})
        nights = [str(FIXTURES / "cpu-clean"), str(FIXTURES / "cpu-slow")]
        out["nights"] = nights
        out["history"] = await s.call_tool("history", {"logdirs": nights})
        out["outside"] = await s.call_tool("summary", {"path": str(tmp_path)})
        out["missing"] = await s.call_tool("hlo", {"path": str(run)})
        out["sql"] = await s.call_tool("sql", {"query": SQL, "paths": nights})
        out["buffers"] = await s.call_tool("buffers", {"path": str(run), "top": 5, "program": "jit_train_step"})
        out["hlo_graph"] = await s.call_tool("hlo_graph", {"path": str(run), "op": op, "depth": 3})
        out["per_host"] = await s.call_tool("summary", {"path": str(run), "top": 3, "per_host": True})
        out["sql_writes"] = await s.call_tool("sql", {"query": "DROP TABLE ops", "paths": nights})
        out["sql_outside"] = await s.call_tool("sql", {"query": "SELECT 1", "paths": [str(tmp_path)]})
        return out

    out = session(cli, FIXTURES, calls=calls)
    for name in ("list_runs", "summary", "steps", "ops", "kernels", "memory", "buffers", "advise", "hlo", "hlo_graph",
                 "timeline", "diff", "compare", "history", "sql"):
        assert name in out["tools"], sorted(out["tools"])
        assert out["tools"][name].input_schema["type"] == "object"
    assert out["tools"]["hlo"].input_schema["required"] == ["path", "op"]
    # The same JSON the CLI prints, number for number.
    for key, args in (
        ("summary", ["summary", str(run), "--json", "--top", "3"]),
        ("ops", ["ops", str(run), "--json", "--top", "5", "--by", "scope"]),
        ("advise", ["advise", str(run), "--json"]),
        ("hlo", ["hlo", str(run), out["op"], "--json"]),
        ("history", ["history", *out["nights"], "--json"]),
        ("sql", ["sql", SQL, *out["nights"], "--json"]),
        ("buffers", ["buffers", str(run), "--json", "--top", "5", "--program", "jit_train_step"]),
        ("hlo_graph", ["hlo", str(run), out["op"], "--graph", "--json", "--depth", "3"]),
        ("per_host", ["summary", str(run), "--json", "--top", "3", "--per-host"]),
    ):
        assert out[key].is_error is False, text_of(out[key])
        assert json.loads(text_of(out[key])) == cli_json(cli, *args), key
    # timeline: the events of step 3's window, as `export --format csv --from --to` writes them.
    a, b = out["window"]
    want = subprocess.run(
        [cli, "export", str(run), "--format", "csv", "-o", "-", "--from", f"{a}ps", "--to", f"{b}ps"],
        capture_output=True, text=True, check=True,
    ).stdout
    got = text_of(out["timeline"])
    assert out["timeline"].is_error is False, got
    assert got == want and got.startswith("host,plane,") and got.count("\n") > 100
    # Confined to the roots, in the CLI's one-line style.
    assert out["outside"].is_error is True
    assert "outside the server's roots" in text_of(out["outside"])
    assert out["missing"].is_error is True and "op: required" in text_of(out["missing"])
    # sql: a row a run, each run's step count and top op as steps and ops print them.
    rows = json.loads(text_of(out["sql"]))["rows"]
    assert len(rows) == 2
    for row, night in zip(rows, out["nights"]):
        assert row[1] == len(cli_json(cli, "steps", night, "--json")["steps"])
        assert row[3] == cli_json(cli, "ops", night, "--json", "--top", "1")["ops"][0]["name"]
    assert out["sql_writes"].is_error is True and "read-only" in text_of(out["sql_writes"])
    assert out["sql_outside"].is_error is True and "outside the server's roots" in text_of(out["sql_outside"])


def test_answers_are_bounded_and_errors_name_the_file(cli, tmp_path):
    broken = tmp_path / "vm.xplane.pb"
    broken.write_bytes(b"\x0a\xff\xff\xff\xff\x0f not a profile")
    run = FIXTURES / "gpu-sync"

    async def calls(s):
        return (
            await s.call_tool("ops", {"path": str(run), "top": 0}),
            await s.call_tool("summary", {"path": str(broken)}),
            await s.call_tool("diff", {"a": str(FIXTURES / "cpu-sync"), "b": str(FIXTURES / "cpu-nosync")}),
        )

    long, bad, diff = session(cli, FIXTURES, tmp_path, "--max-answer-bytes", 65536, calls=calls)
    text = text_of(long)
    assert long.is_error is False
    assert text.endswith("— ask for fewer rows (top) or a narrower question]"), text[-300:]
    assert "the answer was cut at 65536 of its" in text
    assert bad.is_error is True
    assert str(broken) in text_of(bad) and text_of(bad).startswith("stepscope:"), text_of(bad)
    d = json.loads(text_of(diff))
    assert d == cli_json(cli, "diff", str(FIXTURES / "cpu-sync"), str(FIXTURES / "cpu-nosync"), "--json", "--top", "20")
