"""A user's own model as a workload, spelled three ways besides the built-in names.

- ``package.module:function`` or ``path/to/file.py:function``: a callable returning a
  Keras model; its keyword parameters are the workload's parameters (``--param k=v``);
- ``path/to/model.keras``: a saved Keras model, loaded inside the strategy's scope.

This is the parent side: it never imports the user's code (importing it could import
TensorFlow, which the parent never does). It reads the spelling, finds the file (a
module through the import path, as ``import`` would, without running it), reads the
function's parameters from its source with ``ast`` and hashes the file. Everything
that needs the model itself (does the module import, is it a Keras model, what does it
take) is checked by the child (``bench.child.backends.tf.task``), and before a sweep by one short
child process (``bench.launch.usermodel``).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import SpecError

KERAS_SUFFIX = ".keras"
# The optional input pipeline a module defines beside its model function.
DATASET_FN = "dataset_fn"
SPELLINGS = "package.module:function, path/to/file.py:function, path/to/model.keras"


@dataclass(frozen=True)
class ModelRef:
    """A parsed user-model spelling. ``source`` is the module's dotted name or the file's
    path as written; ``function`` is empty for a ``.keras`` file."""

    text: str
    source: str
    function: str = ""

    @property
    def kind(self) -> str:
        """``module``, ``file`` (a ``.py`` file and a function) or ``keras`` (a saved model)."""
        if not self.function:
            return "keras"
        return "file" if _is_path(self.source) else "module"

    @property
    def display(self) -> str:
        """The spelling with a file's directories left out (labels, tables)."""
        if self.kind == "module":
            return self.text
        name = os.path.basename(self.source)
        return f"{name}:{self.function}" if self.function else name

    @property
    def slug(self) -> str:
        """A filename-safe name for result keys: ``two_input.build``, ``model``."""
        stem = (self.source.rsplit(".", 1)[-1] if self.kind == "module"
                else Path(self.source).stem)
        name = f"{stem}.{self.function}" if self.function else stem
        return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def _is_path(text: str) -> bool:
    return text.endswith(".py") or "/" in text or os.sep in text


def looks_like_user_model(text: str) -> bool:
    """Whether ``text`` is spelled as a user's model (a callable or a ``.keras`` file)."""
    return ":" in text or text.endswith(KERAS_SUFFIX)


def parse_ref(text: str) -> ModelRef:
    """The spelling of ``text``, checked for form only (no file is read); SpecError
    naming the value otherwise."""
    if ":" not in text:
        if not text.endswith(KERAS_SUFFIX) or text == KERAS_SUFFIX:
            raise SpecError(f"RunSpec.workload must be a built-in name or a model of your "
                            f"own ({SPELLINGS}). Received: workload={text!r}")
        return ModelRef(text, text)
    # The last colon: a directory name may hold one.
    source, _, function = text.rpartition(":")
    if not function.isidentifier():
        raise SpecError(f"RunSpec.workload names a function after ':', which must be a "
                        f"Python identifier. Received: workload={text!r}")
    if not source:
        raise SpecError(f"RunSpec.workload needs a module or a .py file before ':'. "
                        f"Received: workload={text!r}")
    if not _is_path(source) and not all(p.isidentifier() for p in source.split(".")):
        raise SpecError(f"RunSpec.workload: {source!r} is neither a dotted module name nor "
                        f"a path to a .py file. Received: workload={text!r}")
    if _is_path(source) and not source.endswith(".py"):
        raise SpecError(f"RunSpec.workload: a file before ':' must be a .py file. "
                        f"Received: workload={text!r}")
    return ModelRef(text, source, function)


def module_file(module: str, text: str, search: list[str] | None = None) -> Path:
    """The file ``import module`` would load, found without importing anything (a
    package's ``__init__`` is not run): the current directory first, then this
    interpreter's import path, as ``python -m`` in the current directory (the child)
    sees it. SpecError when there is none, or when it is not a file (a built-in module)."""
    path: list[str] | None = search if search is not None else [os.getcwd(), *sys.path]
    parts = module.split(".")
    found = None
    for i in range(len(parts)):
        name = ".".join(parts[: i + 1])
        found = importlib.machinery.PathFinder.find_spec(name, path)
        if found is None:
            raise SpecError(
                f"no module {name} on the import path (the current directory, then this "
                f"interpreter's sys.path, as the run's process will search): it cannot "
                f"be imported. Received: workload={text!r}")
        path = list(found.submodule_search_locations or [])
    if found is None or not found.origin or not os.path.isfile(found.origin):
        raise SpecError(f"module {module} has no source file the harness can read. "
                        f"Received: workload={text!r}")
    return Path(found.origin)


@dataclass(frozen=True)
class Signature:
    """A function's parameters as its source declares them (``names`` None: unknown in
    the parent, e.g. a name bound by an import or assignment; the child checks then)."""

    names: tuple[str, ...] | None = None
    required: tuple[str, ...] = ()
    positional_only: tuple[str, ...] = ()
    var_keyword: bool = False

    def check(self, where: str, params: Mapping[str, Any]) -> None:
        """SpecError naming the first parameter ``params`` gives that the function does
        not take, or one it requires that is missing."""
        if self.names is None:
            return
        taken = [n for n in self.names if n not in self.positional_only]
        for key in params:
            if key in self.positional_only or (key not in taken and not self.var_keyword):
                raise SpecError(
                    f"{where} takes no parameter {key}; its parameters: "
                    f"{', '.join(taken) or 'none'}. Received: --param {key}={params[key]!r}")
        missing = [n for n in self.required if n not in params]
        if missing:
            raise SpecError(f"{where} requires parameter(s) {', '.join(missing)}: give "
                            f"them with --param {missing[0]}=VALUE. Received: "
                            f"params={dict(params)!r}")


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Module-level statements, including those inside if/try/with blocks."""
    out: list[ast.stmt] = []
    for node in body:
        out.append(node)
        for attr in ("body", "orelse", "finalbody"):
            if isinstance(node, (ast.If, ast.Try, ast.With)) and getattr(node, attr, None):
                out += _top_level(getattr(node, attr))
        for handler in getattr(node, "handlers", []) or []:
            out += _top_level(handler.body)
    return out


def _signature_of(fn: ast.FunctionDef | ast.AsyncFunctionDef, drop_self: bool) -> Signature:
    a = fn.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    if drop_self and positional:
        positional = positional[1:]
    posonly = tuple(p.arg for p in a.posonlyargs)[1 if drop_self else 0:]
    with_default = set(positional[len(positional) - len(a.defaults):]) if a.defaults else set()
    kwonly = [p.arg for p in a.kwonlyargs]
    kw_required = [p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None]
    required = tuple([p for p in positional if p not in with_default] + kw_required)
    return Signature(tuple(positional + kwonly), required, posonly, a.kwarg is not None)


def signature(source: str, filename: str, function: str, text: str = "") -> Signature:
    """The parameters of top-level ``function`` in ``source`` (a class: its ``__init__``
    without ``self``). SpecError when the source does not parse (its own error) or
    defines no such name; ``Signature()`` (unknown) when the name is bound some other
    way (an import, an assignment) or could come from a ``*`` import. ``text``: the
    workload as the user wrote it, for the messages."""
    text = text or f"{filename}:{function}"
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise SpecError(f"{filename} does not import: SyntaxError: {exc.msg} (line "
                        f"{exc.lineno}). Received: workload={text!r}") from None
    found: Signature | None = None
    bound_otherwise = False
    for node in _top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
            found, bound_otherwise = _signature_of(node, drop_self=False), False
        elif isinstance(node, ast.ClassDef) and node.name == function:
            init = next((n for n in node.body if isinstance(n, ast.FunctionDef)
                         and n.name == "__init__"), None)
            found = _signature_of(init, drop_self=True) if init else Signature()
            bound_otherwise = False
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.asname or a.name.split(".")[0] for a in node.names]
            if function in names or "*" in names:
                bound_otherwise = True
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(function in {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
                   for t in targets):
                bound_otherwise = True
    if bound_otherwise:
        return Signature()
    if found is None:
        raise SpecError(f"{filename} has no function {function} (no top-level def or "
                        f"class of that name). Received: workload={text!r}")
    return found


def file_digest(path: Path) -> str:
    """sha256 of the file's bytes: what tells two versions of a user's model apart."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class Bound:
    """A user's model pinned down: the spelling with files made absolute (the child may
    run elsewhere), the file that defines it, and that file's digest."""

    text: str
    file: Path
    digest: str


def locate(ref: ModelRef) -> Path:
    """The file behind ``ref`` (the ``.py`` or ``.keras`` file, or the module's source);
    SpecError naming the value when there is none."""
    if ref.kind == "module":
        return module_file(ref.source, ref.text)
    path = Path(ref.source).expanduser()
    what = "a saved Keras model" if ref.kind == "keras" else "a Python file"
    if not path.is_file():
        raise SpecError(f"RunSpec.workload names {what} that does not exist "
                        f"({path.resolve()}). Received: workload={ref.text!r}")
    return path.resolve()


def bind(ref: ModelRef, params: Mapping[str, Any]) -> Bound:
    """Find ``ref``'s file, check ``params`` against the function's parameters (read from
    its source) and hash the file. SpecError naming the value on any problem."""
    path = locate(ref)
    if ref.kind == "keras":
        if params:
            raise SpecError(f"a saved Keras model takes no parameters. Received: "
                            f"params={dict(params)!r}")
        return Bound(str(path), path, file_digest(path))
    if path.suffix == ".py":
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecError(f"{path} cannot be read: {exc}. Received: "
                            f"workload={ref.text!r}") from None
        signature(source, str(path), ref.function, ref.text).check(ref.display, params)
    text = ref.text if ref.kind == "module" else f"{path}:{ref.function}"
    return Bound(text, path, file_digest(path))


@dataclass(frozen=True)
class UserWorkload:
    """A user's model, seen from the parent: what the spec and the sweep ask of a
    workload (``resolve``, ``cost_hint``, ``description``); the child builds it."""

    ref: ModelRef
    # Rough wall time of one configuration relative to the MLP's, before one has run.
    cost_hint: float = 2.0
    # Its FLOPs are unknown until a run counts them (``Workload.train_flops``).
    train_flops: None = None

    @property
    def name(self) -> str:
        return self.ref.text

    @property
    def description(self) -> str:
        what = "saved Keras model" if self.ref.kind == "keras" else "model built by"
        return f"your {what} {self.ref.display}"

    def resolve(self, size: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments the function gets: ``overrides`` as given (its own
        defaults apply to the rest). A user's model has one size."""
        if size != "default":
            raise SpecError(f"RunSpec.size must be default for a model of your own (its "
                            f"size is what its parameters say: --param). Received: "
                            f"size={size!r}")
        return dict(overrides)
