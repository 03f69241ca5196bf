"""MkDocs hook: the pages written from the library itself at build time, never committed.

- ``programs/index.md`` and one page per declared program (``programs/<name>.md``), from its declaration
  (:class:`multihop.programs.Declaration`: paper, tables, baselines, settings) and its docstrings (the class's, its
  module's, and each stage's signature, the prompt);
- ``papers.md``: the papers the programs rebuild, from the declarations' ``Paper``;
- ``cli.md``: every command of the ``multihop`` Typer app with its help, usage and options.

The "Programs" entry of ``mkdocs.yml``'s nav becomes a section listing the generated pages in declaration order.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
import shutil
import sys
import typing
from pathlib import Path

from mkdocs.structure.files import File

sys.path.insert(0, str(Path(__file__).parent))
from docstrings import markdown  # noqa: E402 - beside this file

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")  # no model-metadata fetch: the build needs no network

METRICS = {"em": "EM", "f1": "F1", "acc": "Acc", "cover_em": "Cover-EM", "llm_eval": "LLM Eval", "steps": "Steps",
           "tokens": "Tokens", "llm_calls": "LLM calls"}
SUBPACKAGES = ("signatures", "programs", "retrievers", "optimize")  # setup.py's package_dir
PLACEHOLDER = "Programs"  # the nav entry replaced by the generated section


# --- text -----------------------------------------------------------------------------------------------------------

def cell(text: str) -> str:
    """Text for a Markdown table cell: one line, pipes escaped."""
    return markdown(" ".join(str(text).split())).replace("|", "\\|")


def docstring_sections(doc: str) -> tuple[str, dict[str, str], str]:
    """A Google-style docstring split into its prose, its ``Args:`` (name → description) and its example code."""
    prose, args, example, section = [], {}, [], "prose"
    current = None
    for line in inspect.cleandoc(doc or "").splitlines():
        header = re.fullmatch(r"(Args|Arguments|Example|Examples|Returns|Note|Notes|Raises):", line.strip())
        if header and not line.startswith(" "):
            section = {"Args": "args", "Arguments": "args", "Example": "example", "Examples": "example"}.get(
                header.group(1), "prose")
            continue
        if section == "args":
            entry = re.match(r"    (\w+)(?: \([^)]*\))?: (.*)", line)
            if entry:
                current = entry.group(1)
                args[current] = entry.group(2)
            elif line.strip() and current:
                args[current] += " " + line.strip()
        elif section == "example":
            example.append(re.sub(r"^\s*(>>>|\.\.\.) ?", "", line))
        else:
            prose.append(line)
    return "\n".join(prose).strip(), args, "\n".join(example).strip()


def number(value: float, rate: bool) -> str:
    return f"{round(value * 100 if rate else value, 2):g}"


def setting(value) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def type_name(annotation) -> str:
    if annotation is inspect.Parameter.empty or annotation is None:
        return ""
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("multihop.", "")


# --- the programs ---------------------------------------------------------------------------------------------------

def slug(name: str) -> str:
    return name.lower()


def link(name: str, here: str = "programs") -> str:
    return f"[{name}]({slug(name)}.md)" if here == "programs" else f"[{name}](programs/{slug(name)}.md)"


def _program_facts():
    from multihop.programs import PROGRAMS

    quiet = logging.getLogger("multihop").level
    logging.getLogger("multihop").setLevel(logging.ERROR)  # a program built at its defaults may warn of a missing file
    try:
        return [(method, method.program()) for method in PROGRAMS.declared()]
    finally:
        logging.getLogger("multihop").setLevel(quiet)


def program_index(programs) -> str:
    from multihop.programs import PROGRAMS

    lines = ["# Programs", "",
             "Every program the library declares — the five methods, then the baselines their papers report — with "
             "its paper (`multihop programs` prints the same list). Each page is written from the program's "
             "declaration (`Declaration(...)` at the end of its package) and its docstrings when the site is "
             "built.", "",
             "| program | kind | paper | stages (at its defaults) | reported by |", "|---|---|---|---|---|"]
    for method, program in programs:
        paper = method.paper.short() if method.paper else "the papers' own baseline"
        stages = ", ".join(f"`{name}`" for name, _ in program.named_predictors())
        lines.append(f"| {link(method.name)} | {method.kind} | {cell(paper)} | {stages} | "
                     f"{', '.join(link(name) for name in PROGRAMS.reported_by(method.name)) or '–'} |")
    return "\n".join(lines) + "\n"


def paper_block(paper) -> list[str]:
    venue = paper.venue or "Preprint"
    title = f"[{paper.title}]({paper.url})" if paper.url else paper.title
    return [f"**{cell(title)}**", "", f"{cell(paper.authors)}. {venue}, {paper.year}.", ""]


def stage_section(name: str, predictor) -> list[str]:
    signature = predictor.signature
    lines = [f"### `{name}`", "", f"Signature `{signature.__name__}`"
             f" (`{type(predictor).__name__}`){f', {len(predictor.demos)} demos' if predictor.demos else ''}.", ""]
    for label, fields in (("Inputs", signature.input_fields), ("Outputs", signature.output_fields)):
        lines += [f"**{label}**", ""]
        for field, info in fields.items():
            desc = (info.json_schema_extra or {}).get("desc", "")
            desc = "" if desc == f"${{{field}}}" else desc
            kind = type_name(info.annotation)
            lines.append(f"- `{field}`{f' (`{kind}`)' if kind else ''}{': ' + markdown(desc) if desc else ''}")
        lines.append("")
    prompt = inspect.cleandoc(signature.instructions or "")
    lines += ['??? quote "Prompt (the signature\'s docstring)"', "", "    ```text"]
    lines += [f"    {line}".rstrip() for line in prompt.splitlines()]
    lines += ["    ```", ""]
    return lines


def paper_table_section(table, here: str) -> list[str]:

    lines = [f"### {table.number}: {cell(table.title)}", ""]
    facts = []
    if table.lm:
        facts.append(f"LM: {cell(table.lm)}")
    facts.append(f"first stage: `{table.first_stage}`")
    setup = {key: value for key, value in table.settings.items()
             if not (key == "first_stage" and value == table.first_stage)}
    if setup:
        facts.append("setup: " + ", ".join(f"{key} = {cell(setting(value))}" for key, value in setup.items()))
    lines += ["; ".join(facts) + ".", ""]
    if table.notes:
        lines += [markdown(table.notes), ""]
    header = ["row", "program here"] + [f"{dataset} {METRICS.get(metric, metric)}" for dataset, metric in table.columns]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * 2 + "---:|" * len(table.columns)]
    for row in table.rows:
        call = f"{row.program}({', '.join(f'{k}={setting(v)}' for k, v in row.settings.items())})"
        program = f"[`{cell(call)}`]({slug(row.program)}.md)" if here != slug(row.program) else f"`{cell(call)}`"
        values = [number(row.numbers[column], table.is_rate(column[1])) if column in row.numbers else "–"
                  for column in table.columns]
        mark = "" if row.runnable else " (not run here)"
        lines.append(f"| {cell(row.label)}{mark} | {program} | " + " | ".join(values) + " |")
    lines.append("")
    remarks = []
    for row in table.rows:
        said = []
        if row.lm:
            said.append(f"the paper ran it on {row.lm}")
        if row.stage_lms:
            stages = ", ".join(f"`{stage}`" for stage in row.stage_lms.stages)
            said.append(f"{stages} on a {row.stage_lms.role} LM"
                        f"{f' ({row.stage_lms.paper_lm} in the paper)' if row.stage_lms.paper_lm else ''}")
        if row.first_stage:
            said.append(f"first stage `{row.first_stage}`")
        for artifact in row.needs:
            built = "; `reproduce --build` makes it" if artifact.build else ""
            if artifact.stand_in is not None:
                said.append(f"the paper's {artifact.model} when given (`{artifact.option()}`), else "
                            f"`{artifact.stand_in}` as a stand-in for it")
            elif artifact.model is not None:
                said.append(f"runs when given the paper's {artifact.model} (`{artifact.option()}`; `{artifact.make}`)")
            else:
                said.append(f"needs `{artifact.name}` (`{artifact.make}`{built})")
        if row.same_as:
            said.append(f"the same run as *{cell(row.same_as)}*")
        if not row.runnable:
            said.append(f"not run here: {row.why_not}")
        if said:
            remarks.append(f"- *{cell(row.label)}*: {markdown('; '.join(said))}.")
    if remarks:
        lines += remarks + [""]
    return lines


def program_page(method, program, programs) -> str:
    from multihop.programs import PROGRAMS

    cls = method.program
    name = method.name
    prose, args, example = docstring_sections(cls.__doc__)
    lines = [f"# {name}", ""]
    if method.paper:
        lines += [f"The {method.kind} of *{cell(method.paper.title)}* ({cell(method.paper.short())})."
                  if method.kind == "method" else
                  f"A baseline, rebuilt from *{cell(method.paper.title)}* ({cell(method.paper.short())}).", ""]
    else:
        lines += ["One of the papers' own baselines (from no paper of its own).", ""]
    lines += [markdown(prose), ""]
    if example:
        lines += ["```python", example, "```", ""]

    lines += ["## Paper", ""]
    if method.paper:
        lines += paper_block(method.paper)
        lines += ['??? note "BibTeX (`multihop cite ' + name + '`)"', "", "    ```bibtex"]
        lines += [f"    {line}" for line in method.paper.bibtex().splitlines()] + ["    ```", ""]
    else:
        lines += ["None of its own: the papers that report it name it as their floor.", ""]
    reporters = PROGRAMS.reported_by(name)
    if method.paper_baselines:
        lines += ["Its paper's baselines, as programs here: "
                  + ", ".join(link(b) for b in method.paper_baselines) + ".", ""]
    if reporters:
        lines += ["Reported as a baseline by the papers of " + ", ".join(link(r) for r in reporters) + ".", ""]
    elif method.kind == "baseline":
        lines += ["None of the five methods' declarations lists it among its paper's baselines.", ""]
    rows: dict[str, dict[str, int]] = {}
    for other, _ in programs:
        for table in other.tables:
            count = sum(1 for row in table.rows if row.program == name)
            if count and other.name != name:
                rows.setdefault(other.name, {})[table.number] = count
    if rows:
        lines += ["Rows it runs in the other papers' tables: " + "; ".join(
            f"{link(other)} " + ", ".join(f"{number} ({count} row{'s' if count > 1 else ''})"
                                          for number, count in tables.items())
            for other, tables in rows.items()) + ".", ""]

    lines += ["## Stages", "",
              f"The LLM stages of `{name}()` at its defaults (`program.named_predictors()`; a switched-off stage is "
              "not built). Each is a DSPy predictor over a signature whose docstring is the prompt.", ""]
    for stage, predictor in program.named_predictors():
        lines += stage_section(stage, predictor)

    lines += ["## Switches", "", "Constructor settings (`--set NAME=VALUE` on `multihop eval`, `compare`, `compile`), "
              "with their defaults.", ""]
    parameters = inspect.signature(cls.__init__).parameters
    settings = cls.settings()
    if settings:
        lines += ["| switch | default | meaning |", "|---|---|---|"]
        for switch in settings:
            default = parameters[switch].default
            shown = "required" if default is inspect.Parameter.empty else f"`{setting(default)}`"
            lines.append(f"| `{switch}` | {shown} | {cell(args.get(switch, ''))} |")
        lines.append("")
    else:
        lines += ["None.", ""]

    facts = [f"kind: `{method.kind}`", f"first stage of an index built for it: `{method.first_stage}`",
             f"run by `multihop compare` by default: {'yes' if method.compare else 'no'}"]
    if method.loop_budget:
        facts.append(f"`compare --max-iterations` sets `{method.loop_budget}`")
    if method.paper_settings:
        facts.append("`compare --budget paper` sets " + ", ".join(
            f"`{k}={setting(v)}`" for k, v in method.paper_settings.items()))
    if method.distill_preset is not None:
        facts.append(f"`multihop distill --preset {method.preset}`: " + (", ".join(
            f"`{k}={setting(v)}`" for k, v in method.distill_preset.items()) or "the defaults"))
    if method.cli:
        facts.append(f"its offline steps: [`multihop {method.command}`](../cli.md#multihop-{method.command})")
    lines += ["## Declaration", "", *[f"- {fact}" for fact in facts], ""]

    if method.papers:
        lines += ["## The paper's headline numbers", "",
                  "As its paper reports them (theirs, not ours); `multihop compare` prints them beside its rows.", "",
                  "| dataset | LM | numbers | source | setting |", "|---|---|---|---|---|"]
        for result in method.papers:
            numbers = ", ".join(f"{METRICS.get(k, k)} {number(v, True)}" for k, v in result.metrics.items())
            lines.append(f"| {result.dataset} | {cell(result.lm)} | {numbers} | {cell(result.source)} | "
                         f"{cell(result.setting)} |")
        lines.append("")

    if method.tables:
        lines += ["## The paper's tables", "",
                  f"Declared in `programs/{slug(name)}/tables.py`: each row the program here that runs it and the "
                  f"paper's numbers (percentages as printed). `multihop reproduce {name} --table N` runs a table "
                  f"again; `multihop reproduce {name} --list` lists them.", ""]
        for table in method.tables:
            lines += paper_table_section(table, slug(name))

    module = inspect.getmodule(cls)
    if module is not None and module.__doc__:
        lines += ["## What is the paper's and what is ours", "",
                  f"From `{module.__name__}`'s docstring.", "", markdown(inspect.cleandoc(module.__doc__)), ""]
    return "\n".join(lines) + "\n"


def papers_page(programs) -> str:
    lines = ["# Papers", "",
             "The papers the programs rebuild, from the programs' declarations (`Declaration(paper=Paper(...))`). "
             "`multihop cite` prints their BibTeX (`multihop cite PROGRAM` one paper's). To cite this library, see "
             "`CITATION.cff` at the repository's root.", ""]
    cited = [method for method, _ in programs if method.paper]
    for kind, title in (("method", "The methods"), ("baseline", "The baselines")):
        lines += [f"## {title}", ""]
        for method in cited:
            if method.kind == kind:
                paper = method.paper
                name = f"[{paper.title}]({paper.url})" if paper.url else paper.title
                lines += [f"- **{cell(name)}**  ", f"  {cell(paper.authors)}. {paper.venue or 'Preprint'}, "
                          f"{paper.year}.  ", f"  Rebuilt as {link(method.name, 'root')}.", ""]
    bare = [method.name for method, _ in programs if not method.paper]
    if bare:
        lines += [f"{' and '.join(link(name, 'root') for name in bare)} are the papers' own baselines (\"Direct\" and "
                  "\"NativeRAG\"), from no paper of their own.", ""]
    lines += ["## BibTeX", "", "```bibtex", "\n\n".join(method.paper.bibtex() for method in cited), "```", ""]
    return "\n".join(lines)


# --- the command line -----------------------------------------------------------------------------------------------

def cli_page() -> str:
    import typer

    from multihop.cli.app import app

    root = typer.main.get_command(app)
    lines = ["# Command line", "",
             "Every command of `multihop`, written from the Typer app when the site is built "
             "(`multihop COMMAND --help` prints the same).", ""]
    _command(root, "multihop", None, lines, depth=1)
    return "\n".join(lines) + "\n"


def _command(command, path: str, parent, lines: list[str], depth: int) -> None:
    ctx = command.context_class(command, info_name=path.split()[-1], parent=parent)
    if depth > 1:
        lines += [f"{'#' * min(depth, 4)} `{path}`", ""]
    if command.help:
        lines += [markdown(inspect.cleandoc(command.help)), ""]
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines += ["```text", f"{path} {usage}".rstrip(), "```", ""]
    params = [param for param in command.params if not getattr(param, "hidden", False)]
    panels: dict[str, list[str]] = {}
    for param in params:
        names, help_text = param.get_help_record(ctx) or (param.name, "")
        if param.param_type_name == "argument" and param.required and "[required]" not in help_text:
            help_text += "  [required]"
        help_text = " ".join(help_text.replace(_ROOT, "").split())
        panel = getattr(param, "rich_help_panel", None) or (
            "Arguments" if param.param_type_name == "argument" else "Options")
        panels.setdefault(panel, []).append(f"- `{names}`{': ' + markdown(help_text) if help_text else ''}")
    for panel, entries in panels.items():
        if len(panels) > 1:
            lines += [f"**{panel}**", ""]
        lines += entries + [""]
    subcommands = getattr(command, "list_commands", None)
    if subcommands:
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                _command(sub, f"{path} {name}", ctx, lines, depth + 1)


# --- MkDocs events --------------------------------------------------------------------------------------------------

_pages: dict[str, str] = {}
_ROOT = ""  # the repository's path, left out of the help texts (defaults that name a file of the checkout)


def package_tree(root: Path) -> Path:
    """``build/api-src/multihop``: the package as it is imported, for mkdocstrings' static analysis — ``multihop/``'s
    modules, with links to its folders and to the folders installed as its subpackages (``programs/`` →
    ``multihop.programs``, ...), found where the import system finds them."""
    import importlib.util

    import multihop

    tree = root / "build" / "api-src"
    package = tree / "multihop"
    if package.exists():
        shutil.rmtree(package)
    package.mkdir(parents=True)
    source = Path(multihop.__file__).parent
    for child in source.iterdir():
        if child.is_dir() and child.name != "__pycache__":
            (package / child.name).symlink_to(child.resolve())
        elif child.suffix == ".py":  # copied: a link would lead the analysis back to the source tree
            shutil.copyfile(child, package / child.name)
    for name in SUBPACKAGES:
        spec = importlib.util.find_spec(f"multihop.{name}")
        folder = Path(next(iter(spec.submodule_search_locations)))
        if not (package / name).exists():
            (package / name).symlink_to(folder.resolve())
    return tree


def on_startup(command, dirty):
    """Lay out the package tree before any plugin reads its configuration: mkdocstrings' handler takes its search
    paths (``build/api-src``) as they are when its own ``on_config`` runs, before this hook's."""
    package_tree(Path(__file__).resolve().parents[2])


def on_config(config):
    global _ROOT
    root = Path(config["config_file_path"]).parent
    _ROOT = f"{root.resolve()}/"
    package_tree(root)
    programs = _program_facts()
    _pages.clear()
    _pages["programs/index.md"] = program_index(programs)
    for method, program in programs:
        _pages[f"programs/{slug(method.name)}.md"] = program_page(method, program, programs)
    _pages["papers.md"] = papers_page(programs)
    _pages["cli.md"] = cli_page()
    section = ["programs/index.md"]
    for kind, title in (("method", "Methods"), ("baseline", "Baselines")):
        section.append({title: [{method.name: f"programs/{slug(method.name)}.md"}
                                for method, _ in programs if method.kind == kind]})
    nav = config["nav"] or []
    for i, entry in enumerate(nav):
        if isinstance(entry, dict) and PLACEHOLDER in entry:
            nav[i] = {PLACEHOLDER: section}
    return config


def on_files(files, config):
    for path, content in _pages.items():
        files.append(File.generated(config, path, content=content))
    return files
