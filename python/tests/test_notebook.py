"""docs/notebook.ipynb, run as Jupyter runs it (nbclient, a real IPython kernel of this
Python): every cell runs, and what each shows equals the CLI's JSON."""

import ast
import json
import re
import subprocess

import nbclient
import nbformat

from conftest import REPO

NOTEBOOK = REPO / "docs" / "notebook.ipynb"
FIXTURE = REPO / "tests" / "fixtures" / "cpu-guide-sgd"


def cli_json(cli, *args):
    out = subprocess.run([cli, *args, str(FIXTURE), "--json"], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout)


def test_the_docs_notebook_shows_the_clis_numbers(cli):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=180, resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    results = [
        o["data"] for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "execute_result"
    ]
    assert len(results) == 5, results
    steps_html, ops_df, arrow, advise, timeline = results

    # The steps, as the Rows' own HTML table: a row per step (under the 50 shown).
    steps = cli_json(cli, "steps")["steps"]
    body = steps_html["text/html"].split("<tbody>")[1]
    assert body.count("<tr>") == len(steps) == 8
    assert f"{len(steps)} steps" in steps_html["text/html"]

    # to_pandas(): the CLI's top 5 ops, by name and self time, in its order.
    ops = cli_json(cli, "ops", "--top", "5")["ops"]
    ops_html = ops_df["text/html"]
    assert "dataframe" in ops_html
    cells = re.findall(r"<td>([^<]*)</td>", ops_html)
    for op in ops:
        assert op["name"] in cells and str(op["self_ps"]) in cells, (op["name"], cells)

    # to_arrow(): as many rows as the CLI's lines, and its keys as the columns.
    lines = cli_json(cli, "ops", "--by", "line", "--top", "0")["ops"]
    num_rows, columns = ast.literal_eval(arrow["text/plain"])
    assert num_rows == len(lines) > 0
    assert columns == list(dict.fromkeys(k for r in lines for k in r))

    # advise(): the CLI's findings, severity and rule, in order.
    findings = cli_json(cli, "advise")["findings"]
    assert ast.literal_eval(advise["text/plain"]) == [(f["severity"], f["rule"]) for f in findings]

    # timeline(): the step's window drawn in the cell, no server behind it: a box per
    # box of the window the package computes for the same step.
    import stepscope

    step = steps[3]
    window = stepscope.load(FIXTURE).timeline(step["start_ps"], step["start_ps"] + step["duration_ps"]).window
    page = timeline["text/html"]
    assert "<iframe" not in page and "127.0.0.1" not in page
    assert page.count("<rect ") == sum(len(t["tile"]["box_depth"]) for t in window["tracks"]) > 0


def test_the_notebook_extra_holds_what_its_cells_need():
    """`pip install "./python[notebook]"`, as the notebook's first cell says, installs
    every package its cells use beyond stepscope (a bare `pip install ./python` lacks
    pandas and pyarrow, and two cells failed for it)."""
    import tomllib

    extra = tomllib.loads((REPO / "python" / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    needs = {"to_pandas()": "pandas", "to_arrow()": "pyarrow"}
    used = {pkg for call, pkg in needs.items() if call in code}
    assert used == {"pandas", "pyarrow"}, used
    assert used <= set(extra["notebook"]), extra["notebook"]
    assert 'pip install "./python[notebook]"' in nb.cells[0].source


# Runs a notebook's code cells in order as a kernel would, in one namespace, with no
# Jupyter: each cell's last expression is the cell's result, shown as Jupyter shows it
# (its `_repr_html_` where it has one, else its repr). Prints the results as JSON.
RUN_CELLS = r"""
import ast, json, sys
nb = json.load(open(sys.argv[1]))
ns = {"__name__": "__main__"}
shown = []
for cell in nb["cells"]:
    if cell["cell_type"] != "code":
        continue
    tree = ast.parse("".join(cell["source"]))
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<cell>", "exec"), ns)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), ns)
        html = getattr(value, "_repr_html_", None)
        shown.append({"type": type(value).__name__, "html": html() if html else None, "text": repr(value)})
print(json.dumps(shown))
"""


def test_the_notebook_runs_in_a_venv_of_only_what_the_readme_installs(wheel, tmp_path):
    """The notebook's first cell says `pip install "./python[notebook]"`: a new virtual
    environment (none of this one's packages) with the wheel and that extra, and nothing
    else — no Jupyter, no JAX — runs every cell."""
    import venv

    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    py = env / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    f"{wheel}[notebook]"], check=True, timeout=900, capture_output=True)
    have = subprocess.run([str(py), "-m", "pip", "list", "--format=json"], check=True, capture_output=True,
                          text=True, timeout=120).stdout
    names = {p["name"].lower() for p in json.loads(have)}
    assert {"stepscope", "pandas", "pyarrow"} <= names and not names & {"jax", "ipykernel", "jupyter", "nbclient"}
    out = subprocess.run([str(py), "-c", RUN_CELLS, str(NOTEBOOK)], cwd=NOTEBOOK.parent, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    steps, ops, arrow, advise, timeline = json.loads(out.stdout)
    assert steps["type"] == "Rows" and "8 steps" in steps["html"]
    assert ops["type"] == "DataFrame" and "dataframe" in ops["html"]
    assert arrow["type"] == "tuple" and int(arrow["text"].strip("()").split(",")[0]) > 0
    assert advise["type"] == "list"
    assert timeline["type"] == "Timeline" and timeline["html"].startswith("<div><svg")
