"""Docs that cannot rot: every command that README.md and docs/*.md show is checked
against the code that would run it, without running anything.

What counts as a command shown: any line of a fenced code block, and any inline code
span, in which ``python -m <module>`` (any interpreter path: ``.venv/bin/python``,
``python3.11``), ``stratbench`` or ``make`` appears; whatever stands before it (``flock
LOCK``, ``sudo``, ``srun``, ``KEY=VALUE``, a cron schedule, ``- run:``) is skipped, and
``&&``, ``|`` and ``;`` separate commands. Inline spans may also name a subcommand
without the interpreter (```bench ab --pairs windows```). Then:

- ``python -m bench ...`` / ``stratbench ...``: every subcommand exists and every flag is
  an option string of its parser (the real ``bench.cli.main.build_parser()``: the parent
  side never imports TensorFlow, so building it is cheap). Flags are matched exactly:
  argparse would accept an abbreviation, a reader copying it should not need to.
- ``python -m scripts.<name> ...`` and ``python -m bench.<module> ...``: the module
  imports, and its ``main`` builds a parser that takes every flag shown. ``main`` is
  called with ``parse_args`` stopped before it reads anything, so nothing runs.
- ``make TARGET ... VAR=VALUE``: the Makefile has each target and uses each variable;
  the flags in ``ARGS='...'`` are checked against the command its recipe passes ARGS to.
- A lone flag in an inline span (```--budget```) must be an option of some parser of
  ours (bench, scripts, the pytest plugin) or one of ``FOREIGN_FLAGS``, the other
  tools' options the docs mention.

Other programs (``pip``, ``kubectl``, ``tensorboard``, ``python -m venv``) are not
checked. Figures in the docs are not checked here: each names the command that gave it.

Every relative link must lead to a file, and to a heading of it where it names one
(``PENDING``: pages another branch is writing).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Flags of other tools that the docs name in passing, each with its tool.
FOREIGN_FLAGS = {
    "--benchmark-only": "pytest-benchmark",
    "--benchmark-autosave": "pytest-benchmark",
    "--benchmark-compare": "pytest-benchmark",
    "--benchmark-compare-fail": "pytest-benchmark",
    "--durations": "pytest",
    "--logdir": "tensorboard, xprof",
    "--port": "xprof (also bench k8s-manifest)",
    "--query-gpu": "nvidia-smi",
}
_PYTHON = re.compile(r"(^|/)python[0-9.]*$")
_SEPARATORS = {"&&", "||", ";", "|", "&", ";;"}
# A redirection (``>> log``, ``2>&1``), not a placeholder such as ``<sweep>``.
_REDIRECT = re.compile(r"^\d*(>>?|<|>&|&>)(?!\w[^>]*>$)")


@dataclass(frozen=True)
class Shown:
    """One command as a doc shows it, from its program on."""

    where: str  # "docs/ci.md:42"
    words: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.where}: {' '.join(self.words)}"


def doc_files() -> list[Path]:
    """The README and every page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _tokens(line: str) -> list[str]:
    lex = shlex.shlex(line, posix=True, punctuation_chars="|&;")
    lex.whitespace_split = True
    try:
        return list(lex)
    except ValueError:  # an unbalanced quote: prose, or YAML; words are enough
        return line.split()


def _segments(words: list[str]) -> Iterator[list[str]]:
    segment: list[str] = []
    for word in words:
        if word in _SEPARATORS:
            yield segment
            segment = []
        else:
            segment.append(word)
    yield segment


def _program(segment: list[str], inline: bool) -> tuple[str, ...] | None:
    """The command in ``segment`` from its program on, redirections cut off."""
    for i, word in enumerate(segment):
        rest = segment[i:]
        if _PYTHON.search(word) and len(rest) > 2 and rest[1] == "-m":
            break
        if word in ("make", "stratbench"):
            break
        if inline and i == 0 and word == "bench" and len(rest) > 1 \
                and not rest[1].startswith("-"):
            rest = ["python", "-m", *rest]
            break
    else:
        return None
    for j, word in enumerate(rest):
        if _REDIRECT.match(word):
            rest = rest[:j]
            break
    return tuple(rest)


def shown_commands(text: str, name: str) -> tuple[list[Shown], list[tuple[str, str]]]:
    """The commands a Markdown text shows, and the lone flags of its inline spans
    (``(where, flag)``)."""
    commands: list[Shown] = []
    flags: list[tuple[str, str]] = []
    lines = text.splitlines()
    fence: str | None = None
    pending, start = "", 0
    for n, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fence = None if fence is not None else stripped[:3]
            continue
        if fence is not None:
            if not pending:
                start = n
            if stripped.endswith("\\"):
                pending += stripped[:-1] + " "
                continue
            for segment in _segments(_tokens(pending + stripped)):
                if (words := _program(segment, inline=False)) is not None:
                    commands.append(Shown(f"{name}:{start}", words))
            pending = ""
            continue
        for span in re.findall(r"`([^`\n]+)`", line):
            found = False
            for segment in _segments(_tokens(span)):
                if (words := _program(segment, inline=True)) is not None:
                    commands.append(Shown(f"{name}:{n}", words))
                    found = True
            if not found and span.startswith("--"):
                flag = span.split()[0].split("=")[0].rstrip(",.:)")
                flags.append((f"{name}:{n}", flag))
    return commands, flags


# -- what the code accepts --------------------------------------------------------------
class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__()
        self.parser = parser


def _stop(parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
    raise _Captured(parser)


@functools.cache
def bench_parser() -> argparse.ArgumentParser:
    from bench.cli.main import build_parser

    return build_parser()


def module_parser(module: str) -> argparse.ArgumentParser | str:
    """The parser ``python -m module`` builds (its ``main``), or why there is none."""
    return bench_parser() if module == "bench" else _main_parser(module)


@functools.cache
def _main_parser(module: str) -> argparse.ArgumentParser | str:
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        return f"module {module} does not import: {exc}"
    main = getattr(mod, "main", None)
    if main is None:
        return f"module {module} has no main()"
    with mock.patch.object(argparse.ArgumentParser, "parse_args", _stop), \
            mock.patch.object(argparse.ArgumentParser, "parse_known_args", _stop):
        try:
            main()
        except _Captured as captured:
            return captured.parser
    return f"module {module}'s main() parsed no arguments"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flag(word: str) -> str | None:
    word = word.strip("[]()")
    if not word.startswith("-") or word in ("-", "--") or re.match(r"^-\d", word):
        return None
    return word.split("=")[0]


def parser_problems(parser: argparse.ArgumentParser, words: tuple[str, ...],
                    prog: str) -> list[str]:
    """What ``words`` (after the program) shows that ``parser`` does not accept."""
    problems = []
    for word in words:
        flag = _flag(word)
        if flag is not None:
            if flag not in parser._option_string_actions:
                problems.append(f"{prog} has no option {flag}")
            continue
        subs = _subcommands(parser)
        if subs and word.strip("[]") not in ("...", "…"):
            if word not in subs:
                return [*problems, f"{prog} has no subcommand {word!r} "
                                   f"(it has {', '.join(sorted(subs))})"]
            parser, prog = subs[word], f"{prog} {word}"
    return problems


@dataclass(frozen=True)
class Makefile:
    targets: frozenset[str]
    variables: frozenset[str]
    args_of: dict[str, tuple[str, ...]]  # target -> the command its $(ARGS) extend

    @classmethod
    def read(cls, path: Path) -> Makefile:
        text = path.read_text()
        targets = set(re.findall(r"^([A-Za-z0-9][\w.-]*)\s*:(?![:=])", text, re.M))
        variables = set(re.findall(r"\$\((\w+)\)", text)) \
            | set(re.findall(r"^(\w+)\s*[:?+]?=", text, re.M))
        args_of: dict[str, tuple[str, ...]] = {}
        target = None
        for line in text.replace("\\\n", " ").splitlines():
            if (m := re.match(r"^([A-Za-z0-9][\w.-]*)\s*:(?![:=])", line)):
                target = m.group(1)
            elif line.startswith("\t") and target and "$(ARGS)" in line:
                # The command that the text before $(ARGS) last names.
                before = line.split("$(ARGS)")[0]
                if found := re.findall(r"-m (bench [a-z][\w-]*|scripts\.\w+)", before):
                    args_of[target] = tuple(found[-1].split())
        return cls(frozenset(targets), frozenset(variables), args_of)


def make_problems(words: tuple[str, ...], makefile: Makefile) -> list[str]:
    """What ``make ...`` shows that the Makefile does not have."""
    problems, targets, args = [], [], None
    for word in words:
        if re.match(r"^\w+=", word):
            name, value = word.split("=", 1)
            if name not in makefile.variables:
                problems.append(f"the Makefile uses no variable {name}")
            if name == "ARGS":
                args = value
        elif not word.startswith("-"):
            targets.append(word)
            if word not in makefile.targets:
                problems.append(f"the Makefile has no target {word!r}")
    if args is not None:
        for target in targets:
            command = makefile.args_of.get(target)
            if command is None:
                problems.append(f"make {target} passes no ARGS on")
            elif command[0] == "bench":
                problems += parser_problems(bench_parser(), (*command[1:], *shlex.split(args)),
                                            "bench")
            else:
                parser = module_parser(command[0])
                problems += [parser] if isinstance(parser, str) else \
                    parser_problems(parser, tuple(shlex.split(args)), command[0])
    return problems


def command_problems(shown: Shown, makefile: Makefile) -> list[str]:
    """Why ``shown`` would not run as the docs show it (empty: it would parse)."""
    words = shown.words
    if words[0] == "make":
        return make_problems(words[1:], makefile)
    if words[0] == "stratbench":
        return parser_problems(bench_parser(), words[1:], "bench")
    module = words[2]
    if module != "bench" and not module.startswith(("bench.", "scripts.")):
        return []  # python -m venv, pip, pytest: not ours to check
    parser = module_parser(module)
    if isinstance(parser, str):
        return [parser]
    return parser_problems(parser, words[3:], module)


def _all_options(parser: argparse.ArgumentParser) -> set[str]:
    options = set(parser._option_string_actions)
    for sub in _subcommands(parser).values():
        options |= _all_options(sub)
    return options


def known_flags() -> set[str]:
    """Every option of bench's subcommands, the scripts and the pytest plugin."""
    flags = _all_options(bench_parser())
    for path in sorted((ROOT / "scripts").glob("*.py")):
        if path.stem != "__init__":
            parser = module_parser(f"scripts.{path.stem}")
            if not isinstance(parser, str):
                flags |= _all_options(parser)
    from bench.regress import pytest_plugin

    group = mock.Mock()
    pytest_plugin.pytest_addoption(mock.Mock(getgroup=lambda *a, **k: group))
    flags |= {name for call in group.addoption.call_args_list for name in call.args}
    return flags


def _known(flag: str, known: set[str]) -> bool:
    # ``--candidate-*`` stands for a family of options: one of them must exist.
    if flag.endswith("*"):
        return any(k.startswith(flag.rstrip("*")) for k in known)
    return flag in known


def doc_problems(texts: dict[str, str]) -> tuple[list[str], list[Shown]]:
    """Every problem of the commands and lone flags in ``texts`` (name -> Markdown)."""
    makefile = Makefile.read(ROOT / "Makefile")
    problems: list[str] = []
    every: list[Shown] = []
    lone: list[tuple[str, str]] = []
    for name, text in texts.items():
        commands, flags = shown_commands(text, name)
        every += commands
        lone += flags
        for shown in commands:
            problems += [f"{shown}\n    -> {p}" for p in command_problems(shown, makefile)]
    if lone:
        known = known_flags() | set(FOREIGN_FLAGS)
        problems += [f"{where}: `{flag}` is no option of bench, the scripts or "
                     f"FOREIGN_FLAGS" for where, flag in lone if not _known(flag, known)]
    return problems, every


# -- links ---------------------------------------------------------------------------------
# Pages that another branch is writing; a link to them may dangle until it is merged.
# The test fails once such a page exists, so that it leaves this set.
PENDING: set[str] = set()


def anchors(text: str) -> set[str]:
    """The anchors GitHub makes of a Markdown text's headings."""
    found: set[str] = set()
    fence = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        elif not fence and (m := re.match(r"^#{1,6}\s+(.*)", line)):
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n, base = 0, slug
            while slug in found:
                n += 1
                slug = f"{base}-{n}"
            found.add(slug)
    return found


def link_problems(path: Path, text: str) -> list[str]:
    """Relative links of ``text`` (the page at ``path``) to files or anchors that do
    not exist."""
    problems = []
    body = re.sub(r"```.*?```", "", text, flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", body):
        if re.match(r"^[a-z]+:", target):
            continue  # https:, mailto:
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        name = str(dest.relative_to(ROOT)) if dest.is_relative_to(ROOT) else str(dest)
        if not dest.exists():
            if name not in PENDING:
                problems.append(f"{path.relative_to(ROOT)}: link to {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            problems.append(f"{path.relative_to(ROOT)}: link to {target}: no such heading")
    return problems


# -- the tests ---------------------------------------------------------------------------
def test_every_command_in_the_docs_parses() -> None:
    texts = {str(p.relative_to(ROOT)): p.read_text() for p in doc_files()}
    problems, shown = doc_problems(texts)
    assert not problems, "commands in the docs that the code does not accept:\n" + \
        "\n".join(problems)
    # The extraction found what the docs hold: each kind of command, from several pages.
    kinds = {s.words[0] if s.words[0] in ("make", "stratbench") else s.words[2].split(".")[0]
             for s in shown}
    assert {"bench", "make", "scripts"} <= kinds, kinds
    assert len({s.where.split(":")[0] for s in shown}) == len(texts), "a page shows no command"


def test_every_link_in_the_docs_leads_somewhere() -> None:
    problems = [p for path in doc_files() for p in link_problems(path, path.read_text())]
    assert not problems, "\n".join(problems)
    assert not [p for p in PENDING if (ROOT / p).exists()], "merged: remove it from PENDING"


def test_a_link_to_a_missing_heading_fails() -> None:
    page = ROOT / "docs" / "fake.md"
    assert link_problems(page, "See [the glossary](glossary.md#arm) and "
                               "[nothing](glossary.md#no-such-word), [gone](gone.md).") == [
        "docs/fake.md: link to glossary.md#no-such-word: no such heading",
        "docs/fake.md: link to gone.md: no such file"]


FAKE_DOC = """\
Run it:

```sh
flock /tmp/tf.lock .venv/bin/python -m bench run --workload mlp \\
    --batch 64 --max-seconds 1 --out results/x   # a comment --not-a-flag
make bench ARGS='--runs 3' OUT=results/y
python -m scripts.stability A B
```

Then `python -m bench report <sweep> --print-markdown` and `bench ab --pairs windows`,
or `--budget`.
"""


def test_the_extraction_reads_blocks_and_spans() -> None:
    commands, flags = shown_commands(FAKE_DOC, "fake.md")
    assert [str(c) for c in commands] == [
        "fake.md:4: .venv/bin/python -m bench run --workload mlp --batch 64 --max-seconds 1 "
        "--out results/x",
        "fake.md:6: make bench ARGS=--runs 3 OUT=results/y",
        "fake.md:7: python -m scripts.stability A B",
        "fake.md:10: python -m bench report <sweep> --print-markdown",
        "fake.md:10: python -m bench ab --pairs windows",
    ]
    assert flags == [("fake.md:11", "--budget")]
    assert doc_problems({"fake.md": FAKE_DOC})[0] == []


@pytest.mark.parametrize("line, expected", [
    # a flag renamed in the code (or misspelt in the docs)
    ("python -m bench run --workloads mlp", "bench run has no option --workloads"),
    ("python -m bench run --max-secs=1", "bench run has no option --max-secs"),
    ("python -m bench history lst", "bench history has no subcommand 'lst'"),
    ("stratbench bench-it", "bench has no subcommand 'bench-it'"),
    ("python -m scripts.stability --quiet A B", "scripts.stability has no option --quiet"),
    ("python -m scripts.no_such_script", "module scripts.no_such_script does not import"),
    ("make benchmark", "the Makefile has no target 'benchmark'"),
    ("make bench OUTDIR=results/x", "the Makefile uses no variable OUTDIR"),
    ("make bench ARGS='--run 3'", "bench run has no option --run"),
    ("make nightly ARGS='--treshold 10%'", "bench nightly has no option --treshold"),
])
def test_a_command_the_code_does_not_accept_fails(line: str, expected: str) -> None:
    problems, _ = doc_problems({"fake.md": f"```sh\n{line}\n```\n"})
    assert any(expected in p for p in problems), problems


def test_a_lone_flag_the_code_does_not_have_fails() -> None:
    problems, _ = doc_problems({"fake.md": "Set `--budgett 10m` to stop earlier.\n"})
    assert problems == ["fake.md:1: `--budgett` is no option of bench, the scripts or "
                        "FOREIGN_FLAGS"]


def test_a_renamed_flag_in_the_code_fails_the_docs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rot this guards against: the code renames a flag, the docs keep the old one."""
    renamed = argparse._ActionsContainer.add_argument

    def add_argument(self: argparse._ActionsContainer, *names: str, **kwargs: object
                     ) -> argparse.Action:
        names = tuple("--max-secs" if n == "--max-seconds" else n for n in names)
        return renamed(self, *names, **kwargs)

    monkeypatch.setattr(argparse._ActionsContainer, "add_argument", add_argument)
    bench_parser.cache_clear()
    try:
        problems, _ = doc_problems({"fake.md": FAKE_DOC})
    finally:
        monkeypatch.undo()
        bench_parser.cache_clear()
    assert problems == ["fake.md:4: .venv/bin/python -m bench run --workload mlp --batch 64 "
                        "--max-seconds 1 --out results/x\n"
                        "    -> bench run has no option --max-seconds"]
