"""Flag submissions that tamper with the tests, for the instructor to review.

The grading parent reviews, with Python's ``ast``, when a worker's result merges, every code
cell of the notebook as graded that will run and that the student wrote or changed: the copy
the worker repaired (repair.py: test cells restored from the release) is reviewed as it is, so
that each notebook is repaired once; unchanged instructor cells are the instructor's. This
review never runs student code, so nothing in the kernel can influence it: it is the check an
instructor relies on. A submission is flagged when a cell

- rebinds a name the test cells use (``expect``, ``np``, ``tp``, ``int``, a helper the chapter
  defines) at module level, other than by repeating the instructor's own statement;
- assigns to or deletes an attribute of tinyprof (``tp.testing.expect = ...``, ``setattr``);
- touches ``builtins`` or ``__builtins__``, or ``sys.modules``, ``sys.meta_path`` and the
  interpreter's hooks (``sys.displayhook``, ``sys.settrace``, ``sys.monitoring``,
  ``threading.setprofile``, ``getattr(sys, "setprofile")``, ...: the off switches of the hidden
  tests' profile hook), or imports ``_thread`` (threads that start without that hook);
- reaches IPython's machinery (``get_ipython()`` beyond running ordinary magics: events, input
  and AST transformers, display hooks; the ``%config`` or ``%load_ext`` magics);
- uses the tools such tampering needs: ``exec``/``eval``/``compile``/``__import__``, writes to
  ``globals()``, ``vars(...)`` or ``__dict__``, directly or through a name bound to one
  (``ns = m.__dict__; ns[...] = ...``), frame and code objects (``__code__``, ``f_globals``,
  ``sys._getframe``), ``ctypes``, ``importlib``, or what of ``gc`` reaches other objects
  (``gc.get_referrers``; ``gc.collect()`` and switching collection off are fine);
- assigns or deletes an attribute of any module (``math.isclose = ...``), or reaches one by a
  computed name (``getattr(m, "is" + "close")``, ``setattr``, ``delattr``);
- reads the notebook's history (``In``, ``Out``, ``_ih``, ``_i3``, ``%history``), reaches the
  kernel object (``get_ipython()`` other than for ordinary magics, under any name it was bound
  to, tuple unpacking included; ``.kernel``; ``IPython``/``ipykernel`` internals, and the
  ``comm`` and ``traitlets`` objects that lead there; ``import __main__``), reads a module's
  ``__dict__`` (its names by key), or writes a Python file (which an import would then run
  without review);
- unpickles (``pickle.loads``, ``np.load(..., allow_pickle=True)``, ``shelve``...): a pickle
  can call ``exec`` on any text, code the review never sees;
- uses a private name of tinyprof (``tp.abtest._timed_rounds``).

A method that builds or sets its own object (``__init__``, ``__post_init__``, ``__setattr__``,
``__setstate__``) may set ``self``'s attributes by computed name (``setattr(self, k, v)``,
``self.__dict__.update(...)``, ``object.__setattr__(self, ...)``); calling such a method on
another object (``Cls.__init__(module, ...)``) is flagged instead. Where a rule cannot tell
tampering from honest code (a computed ``setattr`` on an object of unknown kind, a write to
the namespace of an unknown object), its flag ends with ``UNSURE`` and the summary lists
it under "review", apart from the certain ones. The honest idioms of ``tests/corpus`` raise no
flag of either kind.

The hidden tests add a runtime check (tinyprof.testing): helpers the notebook rebound are put
back and announced with ``tinyprof.testing.MARK`` on stdout, and notebook code planted where
the tests look raises TamperingDetected. Both are read back from the graded notebook as flags
too (results/flags.py); since that check runs after the student's code, it can be defeated,
and only ever adds flags, never clears one.
"""

from __future__ import annotations

import ast
import builtins
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .. import course
from ..cells import grade_id, is_answer, is_test
from ..cells import source as _source
from . import tells
from .repair import repair

#: Ends a flag that honest code can raise too (a rule here cannot tell the two apart): the
#: summary (report.certainty) lists such flags apart from the certain ones.
UNSURE = " [review: honest code can do this too]"
HELPERS = frozenset({"expect", "reference_unavailable", "ReferenceUnavailable",
                     "TamperingDetected"})
SYS_HOOKS = frozenset({"modules", "meta_path", "path_hooks", "path_importer_cache",
                       "displayhook", "excepthook", "settrace", "setprofile", "addaudithook",
                       "_getframe", "breakpointhook", "unraisablehook", "setrecursionlimit",
                       "monitoring"})
IPYTHON_CALLS = frozenset({"run_line_magic", "run_cell_magic", "system", "getoutput"})
#: Magics that only time, capture or install: their cell body is reviewed like any code.
SAFE_MAGICS = frozenset({"time", "%time", "timeit", "capture", "matplotlib", "pip", "conda",
                         "prun", "who", "whos", "env", "writefile", "autoreload", "aimport"})
#: IPython extensions a notebook may load (``%load_ext``): IPython's own module reloader.
SAFE_EXTENSIONS = frozenset({"autoreload"})
TOOLS = frozenset({"exec", "eval", "compile", "__import__"})
TOOL_MODULES = frozenset({"builtins", "ctypes", "importlib", "marshal"})
#: What of ``gc`` a notebook may use: collecting, and switching collection off and on around a
#: measurement. The rest (``get_objects``, ``get_referrers``, ...) reaches every object of the
#: kernel, the tests' own included.
GC_SAFE = frozenset({"collect", "disable", "enable", "isenabled", "get_count", "get_threshold",
                     "set_threshold", "get_stats", "freeze", "unfreeze", "get_freeze_count"})
#: The threading module's hooks, which set a profile or trace function on every new thread.
THREAD_HOOKS = frozenset({"setprofile", "settrace", "setprofile_all_threads",
                          "settrace_all_threads", "_profile_hook", "_trace_hook"})
#: What of ``threading`` starts a thread past its hooks.
THREAD_STARTERS = frozenset({"_start_new_thread", "_start_joinable_thread"})
#: Modules that start threads without ``threading``'s hooks (the hidden tests' profile hook,
#: tinyprof.testing, reaches a new thread through ``threading.setprofile``).
UNWATCHED_THREADS = frozenset({"_thread"})
#: Methods in which ``self`` is the object being built or set: ``setattr(self, name, value)``,
#: ``self.__dict__.update(...)`` and ``object.__setattr__(self, ...)`` there set its own fields.
BUILDERS = frozenset({"__init__", "__post_init__", "__setattr__", "__setstate__"})
#: Modules and os functions that reach outside the notebook (programs, sockets, other files'
#: databases, shared memory, signals): the sandbox confines them, and the instructor should
#: know they were used. No chapter needs them. ``multiprocessing`` is not one: chapter 09
#: teaches worker processes (tinyprof.loading.Workers, a Pool, a ProcessPoolExecutor), and the
#: processes a kernel starts stay in its sandbox, counted by its checks.
SYSTEM_MODULES = frozenset({"subprocess", "socket", "sqlite3", "mmap", "pty", "signal",
                            "resource", "fcntl", "jupyter_client", "zmq"})
OS_CALLS = frozenset({"fork", "forkpty", "system", "popen", "kill", "killpg", "setsid",
                      "setuid", "setgid", "execv", "execve", "execvp", "execvpe", "execl",
                      "execlp", "spawnv", "spawnve", "spawnl", "posix_spawn", "posix_spawnp"})
REFLECTION = frozenset({"__code__", "__globals__", "__closure__", "__defaults__",
                        "__kwdefaults__", "__builtins__", "f_globals", "f_locals", "f_back",
                        "f_builtins", "tb_frame", "gi_frame", "cr_frame", "__subclasses__",
                        "__setattr__", "__delattr__", "co_filename", "FunctionType",
                        "CodeType", "gi_code", "cr_code", "ag_code", "__reduce__",
                        "__reduce_ex__"})
#: Expressions that build a name as the code runs (``"co_" + "name"``, an f-string, a call).
BUILT_NAMES = (ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript)
WRITERS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__",
                     "__delitem__"})
FRAMES = frozenset({"currentframe", "stack", "getouterframes", "getinnerframes", "trace",
                    "getclosurevars"})
#: IPython's names for the notebook's input and output history.
HISTORY = frozenset({"In", "Out", "_ih", "_oh", "_i", "_ii", "_iii", "_dh", "_exit_code"})
#: Attributes of the IPython and ipykernel modules a notebook may use.
IPYTHON_PUBLIC = frozenset({"display", "version_info", "__version__"})
#: Modules of IPython a notebook may import names from (``from IPython.display import HTML``).
IPYTHON_PUBLIC_MODULES = frozenset({"IPython.display", "IPython.core.display"})
#: Packages whose objects reach the kernel that handles the grader's requests (its comm
#: manager: ``comm.get_comm_manager()``; its application: a traitlets singleton's
#: ``instance()``), like IPython's and ipykernel's own.
KERNEL_PACKAGES = frozenset({"IPython", "ipykernel", "comm", "traitlets"})
#: What of a module turns bytes into objects by calling what the bytes name (a pickle can run
#: ``exec`` with any text: code the review never sees), by module.
UNPICKLERS = {"pickle": frozenset({"loads", "load", "Unpickler", "_loads", "_load",
                                   "_Unpickler"}),
              "_pickle": frozenset({"loads", "load", "Unpickler"}),
              "dill": frozenset({"loads", "load", "Unpickler", "load_session"}),
              "cloudpickle": frozenset({"loads", "load", "Unpickler"}),
              "shelve": frozenset({"open", "Shelf", "DbfilenameShelf", "BsdDbShelf"}),
              "joblib": frozenset({"load"}), "pandas": frozenset({"read_pickle"}),
              "torch": frozenset({"load"})}


@dataclass(frozen=True)
class Finding:
    """One reason to flag: where (cell and line), what the code does, and whether only
    tampering does it (``sure``) or honest code can too."""

    cell: str
    line: int
    what: str
    sure: bool = True

    def __str__(self) -> str:
        return f"{self.cell}, line {self.line}: {self.what}" + ("" if self.sure else UNSURE)


@dataclass
class _Context:
    """What the instructor's notebook tells the review: protected names and allowed code."""

    protected: set[str]
    imports: dict[str, str]   # name → what the instructor's import binds it to
    statements: set[str]      # ast dumps of the instructor's top-level statements


def review_file(path: Path, assignment: str, notebook: str,
                repaired: Path | None = None) -> list[Finding]:
    """Review one submitted file against its chapter's release and instructor notebook.

    ``repaired``: the notebook as the worker repaired it for grading (``submitted/`` of its
    work folder), reviewed as it is so that a notebook is repaired once; when the worker never
    wrote it (lost before it started), the handed-in file at ``path`` is repaired here."""
    from .collect import read_notebook

    release = _load(course.NOTEBOOKS / assignment / notebook)
    source = _load(course.SOLUTIONS / assignment / notebook)
    if repaired is not None and repaired.is_file():
        return review_repaired(_load(repaired), release, source)
    submitted, _ = read_notebook(Path(path))
    if submitted is None:
        return []
    return review(submitted, release, source)


def review(submitted: dict, release: dict, source: dict) -> list[Finding]:
    """Findings for every cell of ``submitted`` that will run and is not the instructor's
    (test cells first put back from the release, as grading does: repair.py)."""
    graded, _ = repair(submitted, release, source)
    return review_repaired(graded, release, source)


def review_repaired(graded: dict, release: dict, source: dict) -> list[Finding]:
    """:func:`review` of a notebook that ``repair`` already made ready for grading."""
    context = _context(source, release)
    instructor = {_normal(_source(c)) for c in release["cells"] + source["cells"]}
    findings: list[Finding] = []
    aliases = _Aliases()
    for number, cell in enumerate(graded["cells"], 1):
        if cell.get("cell_type") != "code":
            continue
        tree = _parse(_source(cell))
        if tree is None:
            continue
        aliases.learn(tree)
        if _normal(_source(cell)) in instructor:
            continue
        label = cell_label(cell, number)
        findings += [Finding(label, line, what, sure)
                     for line, what, sure in _Review(context, aliases).run(tree)]
    return findings


# --- reading the instructor's notebook -------------------------------------------------------

def _context(source: dict, release: dict) -> _Context:
    loaded, bound, answers = set(), set(), set()
    imports: dict[str, str] = {}
    statements: set[str] = set()
    for cell in source["cells"] + release["cells"]:
        tree = _parse(_source(cell)) if cell.get("cell_type") == "code" else None
        if tree is None:
            continue
        if is_test(cell):
            loaded |= {n.id for n in ast.walk(tree)
                       if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            bound |= _bound_anywhere(tree)
        elif is_answer(cell):
            answers |= {name for name, _ in _top_bindings(tree)}
        else:
            for stmt in tree.body:
                statements.add(ast.dump(stmt))
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    imports.update(_import_targets(stmt))
    return _Context((loaded - bound - answers) | HELPERS, imports, statements)


def _top_bindings(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    """Names a cell binds in the notebook's namespace, with the statement binding each time."""
    found: list[tuple[str, ast.AST]] = []

    def visit(node: ast.AST, stmt: ast.AST, top: bool, declared: set[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if top:
                found.append((node.name, stmt))
            inner = {n for g in ast.walk(node) if isinstance(g, ast.Global) for n in g.names}
            for child in node.body:
                visit(child, stmt, False, inner)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if top or node.id in declared:
                found.append((node.id, stmt))
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and top:
            for name in _import_targets(node):
                found.append((name, stmt))
        elif isinstance(node, ast.ExceptHandler) and node.name and top:
            found.append((node.name, stmt))
        elif _match_capture(node) and (top or _match_capture(node) in declared):
            found.append((_match_capture(node), stmt))
        elif isinstance(node, ast.comprehension):
            for part in [node.iter, *node.ifs]:
                visit(part, stmt, top, declared)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, stmt, top, declared)

    for stmt in tree.body:
        visit(stmt, stmt, True, set())
    return found


def _bound_anywhere(tree: ast.AST) -> set[str]:
    """Every name a cell binds anywhere (locals and parameters included)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif _match_capture(node):
            names.add(_match_capture(node))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= set(_import_targets(node))
    return names


def _match_capture(node: ast.AST) -> str | None:
    """The name a ``match`` pattern binds (``case expect:``, ``case [*rest]``, ``case {**rest}``),
    which rebinds it as an assignment would; None for any other node."""
    if isinstance(node, (ast.MatchAs, ast.MatchStar)):
        return node.name
    if isinstance(node, ast.MatchMapping):
        return node.rest
    return None


def _import_targets(node: ast.Import | ast.ImportFrom) -> dict[str, str]:
    targets = {}
    for alias in node.names:
        if isinstance(node, ast.Import):
            name = alias.asname or alias.name.split(".")[0]
            targets[name] = alias.name if alias.asname else alias.name.split(".")[0]
        else:
            targets[alias.asname or alias.name] = f"{node.module}:{alias.name}"
    return targets


# --- the review of one cell --------------------------------------------------------------------

class _Aliases:
    """Names that stand for tinyprof, sys, IPython's shell or the tampering modules, learnt from
    every cell in order (the instructor's set-up cell included)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {"__builtins__": "builtins", "get_ipython": "ipython"}
        #: names bound to a namespace (``m.__dict__``, ``vars(m)``, ``globals()``) → whether
        #: it is surely one of a module the tests rely on (False: of an unknown object)
        self.namespaces: dict[str, bool] = {}

    def learn(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for name, target in _import_targets(node).items():
                    kind = _kind_of_import(target)
                    if kind:
                        self.names[name] = kind
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    self._learn_binding(target, node.value)
            if isinstance(node, ast.Assign) and self.namespace_of(node.value) is not None:
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.namespaces[target.id] = self.namespace_of(node.value)

    def _learn_binding(self, target: ast.AST, value: ast.AST) -> None:
        """``target = value``: a name bound to what ``value`` is rooted at; tuples unpacked
        item by item (``k, n = shell().kernel, 0``), and a tuple target of a value of a
        known kind takes that kind for every name (``k, *_ = vars(shell)``)."""
        if isinstance(target, ast.Name) and self.kind(value):
            self.names[target.id] = self.kind(value)
        elif isinstance(target, ast.Starred):
            self._learn_binding(target.value, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
            if items is not None and len(items) == len(target.elts) and \
                    not any(isinstance(t, ast.Starred) for t in target.elts):
                for item_target, item in zip(target.elts, items):
                    self._learn_binding(item_target, item)
                return
            for item_target in target.elts:
                if items is not None:
                    for item in items:
                        self._learn_binding(item_target, item)
                else:
                    self._learn_binding(item_target, value)

    def namespace_of(self, node: ast.AST) -> bool | None:
        """For ``x.__dict__``, ``vars(x)`` and ``globals()``: whether ``x`` is surely a module
        the tests rely on (None: ``node`` is no namespace)."""
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return self.kind(node.value) is not None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "vars" and node.args:
                return self.kind(node.args[0]) is not None
            if node.func.id == "globals":
                return True
        return None

    def kind(self, node: ast.AST) -> str | None:
        """'tinyprof', 'sys', 'ipython', 'builtins', ... when ``node`` is rooted at one."""
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            if isinstance(node, ast.Call):  # a call makes a new object, except these
                called = node.func.id if isinstance(node.func, ast.Name) else None
                if called == "getattr" and node.args:
                    node = node.args[0]
                    continue
                return "ipython" if called and self.names.get(called) == "ipython" or \
                    isinstance(node.func, ast.Attribute) and node.func.attr == "get_ipython" \
                    else None
            node = node.value
        return self.names.get(node.id) if isinstance(node, ast.Name) else None


def _kind_of_import(target: str) -> str | None:
    module = target.split(":")[0]
    root = module.split(".")[0]
    if root == "tinyprof":
        return "tinyprof"
    if target.endswith(":get_ipython"):
        return "ipython"
    if root == "sys":
        return "sys:" + target.split(":")[1] if ":" in target else "sys"
    if root == "builtins":
        return "builtins"
    if root in KERNEL_PACKAGES and ":" not in target:
        return "ipython-module"
    if root in KERNEL_PACKAGES and module not in IPYTHON_PUBLIC_MODULES \
            and target.split(":")[1] not in IPYTHON_PUBLIC:
        return "ipython-module"   # from ipykernel.kernelapp import IPKernelApp
    if module == "os" and ":" not in target:
        return "os"
    if ":" not in target:
        return "module:" + module
    return None


class _Review(ast.NodeVisitor):
    def __init__(self, context: _Context, aliases: _Aliases):
        self.context, self.aliases = context, aliases
        self.found: list[tuple[int, str, bool]] = []
        self.methods: list[tuple[str, str | None]] = []   # (name, its self) per function

    def run(self, tree: ast.Module) -> list[tuple[int, str, bool]]:
        self.bound = _bound_anywhere(tree)   # a loop variable named _i is not the history
        for name, stmt in _top_bindings(tree):
            self._binding(name, stmt)
        self.visit(tree)
        return sorted(set(self.found))

    def flag(self, node: ast.AST, what: str, sure: bool = True) -> None:
        self.found.append((getattr(node, "lineno", 0), what, sure))

    def _binding(self, name: str, stmt: ast.AST) -> None:
        if name not in self.context.protected or ast.dump(stmt) in self.context.statements:
            return
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) and \
                _import_targets(stmt).get(name) == self.context.imports.get(name):
            return
        what = "a test helper" if name in HELPERS else \
            "a builtin" if hasattr(builtins, name) else "a name"
        self.flag(stmt, f"rebinds {name}, {what} the test cells use")

    # imports and names
    def visit_Import(self, node: ast.Import) -> None:
        self._imports(node, [a.name for a in node.names])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._imports(node, [module])
        for alias in node.names:
            self._tell(node, module.split(".")[-1], alias.name)
        if module == "sys":
            for alias in node.names:
                if alias.name in SYS_HOOKS:
                    self.flag(node, f"imports sys.{alias.name}, which can change what the tests "
                                    "import or how cells run")

    def _imports(self, node: ast.AST, modules: list[str]) -> None:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tinyprof":
            for alias in node.names:
                if _private(alias.name):
                    self.flag(node, f"imports {node.module}.{alias.name}, a private name of "
                                    "tinyprof")
        if isinstance(node, ast.ImportFrom) and node.module in ("gc", "threading"):
            for alias in node.names:
                self._module_use(node, node.module, alias.name)
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                self._unpickler(node, (node.module or "").split(".")[0], alias.name)
        for module in modules:
            if module == "__main__":
                self.flag(node, "imports __main__, the notebook's own namespace")
            if module.startswith("tinyprof.") and any(_private(p) for p in module.split(".")):
                self.flag(node, f"imports {module}, a private module of tinyprof")
            root = module.split(".")[0]
            if root and not _installed(root):
                self.flag(node, f"imports {root}, which the course environment does not have "
                                "(a file the notebook wrote itself?)")
            if root in UNWATCHED_THREADS:
                self.flag(node, f"imports {root}, whose threads start without the hidden tests' "
                                "profile hook")
            if root in TOOL_MODULES:
                self.flag(node, f"imports {root}, which can rewrite the tests' environment")
            elif root in SYSTEM_MODULES:
                self.flag(node, f"imports {root}, which reaches outside the notebook "
                                "(programs, sockets, files, signals); the sandbox confines it")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "__builtins__":
            self.flag(node, "uses __builtins__")
        elif _history_name(node.id) and isinstance(node.ctx, ast.Load) \
                and node.id not in self.bound:
            self.flag(node, f"reads {node.id}, the notebook's input/output history (where the "
                            "tests' code would be)")
        elif node.id == "get_ipython" and not self._ordinary_magic(node):
            self.flag(node, "reaches the kernel object (get_ipython())")
        elif self.aliases.names.get(node.id) == "ipython" and isinstance(node.ctx, ast.Load) \
                and not self._ordinary_magic(node):
            self.flag(node, f"reaches the kernel object ({node.id}, bound to get_ipython or "
                            "to what it returns)")
        elif self.aliases.names.get(node.id) == "module:gc" and \
                isinstance(node.ctx, ast.Load) and \
                not isinstance(getattr(node, "_parent", None), ast.Attribute):
            self.flag(node, f"hands the gc module on ({node.id}), out of the review's sight",
                      sure=False)

    def _unpickler(self, node: ast.AST, module: str, name: str) -> None:
        if name in UNPICKLERS.get(module, ()):
            self.flag(node, f"uses {module}.{name}, which runs whatever code a pickle names "
                            "(code the review cannot see)")

    def _module_use(self, node: ast.AST, module: str, name: str) -> None:
        """``gc.name`` or ``threading.name``, used or imported."""
        if module == "gc" and name not in GC_SAFE:
            self.flag(node, f"uses gc.{name}, which reaches every object of the kernel, the "
                            "tests' own included")
        elif module == "threading" and name in THREAD_HOOKS:
            self.flag(node, f"uses threading.{name}, which sets the hook of every new thread")
        elif module == "threading" and name in THREAD_STARTERS:
            self.flag(node, f"uses threading.{name}, which starts a thread without the hidden "
                            "tests' profile hook")

    # methods: where ``self`` is the object being built
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.methods.append((node.name, _self_of(node)))
        self.generic_visit(node)
        self.methods.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def _is_self(self, node: ast.AST) -> bool:
        """``node`` is the first parameter of the method it is in (never rebound there)."""
        return bool(self.methods) and isinstance(node, ast.Name) and \
            node.id == self.methods[-1][1]

    def _own_fields(self, node: ast.AST) -> bool:
        """``node`` is ``self`` in a method that builds or sets it (BUILDERS)."""
        return self._is_self(node) and self.methods[-1][0] in BUILDERS

    def _ordinary_magic(self, node: ast.AST) -> bool:
        """``get_ipython().run_line_magic(...)`` as IPython writes ``%magic`` lines (the magic
        itself is reviewed by _magic)."""
        call = getattr(node, "_parent", None)
        attribute = getattr(call, "_parent", None)
        return isinstance(call, ast.Call) and isinstance(attribute, ast.Attribute) and \
            attribute.attr in ("run_line_magic", "run_cell_magic")

    # calls
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if called == "catch_warnings" and any(
                k.arg == "record" and not (isinstance(k.value, ast.Constant) and not k.value.value)
                for k in node.keywords):
            self.flag(node, "records warnings, whose file and line name the code that called "
                            "(the grader's, when graded): a way to read the call stack",
                      sure=False)
        if any(k.arg == "allow_pickle" and not (isinstance(k.value, ast.Constant)
                                                and not k.value.value) for k in node.keywords):
            self.flag(node, "loads with allow_pickle, which runs whatever code a pickle names "
                            "(code the review cannot see)")
        if isinstance(func, ast.Name):
            self._call_by_name(node, func.id)
        if isinstance(func, ast.Attribute):
            self._method_call(node, func)
        self.generic_visit(node)

    def _call_by_name(self, node: ast.Call, name: str) -> None:
        if name in TOOLS:
            self.flag(node, f"calls {name}(), which runs code the review cannot see")
        elif name in ("setattr", "delattr") and node.args:
            kind = self.aliases.kind(node.args[0])
            if kind:
                self.flag(node, f"{name}() on {_describe(kind)}")
            elif len(node.args) > 1 and not _constant_string(node.args[1]) and \
                    not self._own_fields(node.args[0]):
                self.flag(node, f"{name}() with a computed attribute name", sure=False)
        elif name == "getattr" and len(node.args) > 1:
            kind = self.aliases.kind(node.args[0])
            if kind and not _constant_string(node.args[1]):
                self.flag(node, f"getattr() on {_describe(kind)} with a computed attribute "
                                "name")
            elif kind == "tinyprof" and _private(_constant_string(node.args[1]) or ""):
                self.flag(node, f"uses a private name of tinyprof ({_dotted(node)})")
            elif kind in ("module:gc", "module:threading"):
                self._module_use(node, kind[7:], _constant_string(node.args[1]) or "?")
            elif kind == "sys" and _constant_string(node.args[1]) in SYS_HOOKS:
                self.flag(node, f"uses sys.{_constant_string(node.args[1])}")
            elif not kind and isinstance(node.args[1], BUILT_NAMES) and \
                    not self._own_fields(node.args[0]):
                self.flag(node, "getattr() with an attribute name built as it runs: what it "
                                "reads is out of the review's sight", sure=False)
        elif name == "open" and _writes_python(node):
            self.flag(node, "writes a Python file, which an import would run without review")
        elif name == "globals":
            self._namespace_write(node, "globals()")
        elif name == "vars" and node.args and self.aliases.kind(node.args[0]):
            self.flag(node, f"uses vars() of {_describe(self.aliases.kind(node.args[0]))}")
        elif name == "vars" and node.args and not self._own_fields(node.args[0]):
            self._namespace_write(node, f"vars({_dotted(node.args[0])})", sure=False)

    def _method_call(self, node: ast.Call, func: ast.Attribute) -> None:
        if func.attr in ("write_text", "write_bytes") and _python_path(func.value):
            self.flag(node, "writes a Python file, which an import would run without review")
        if func.attr in WRITERS and isinstance(func.value, ast.Name) and \
                func.value.id in self.aliases.namespaces:
            self.flag(node, f"writes through {func.value.id}, an alias of a namespace",
                      sure=self.aliases.namespaces[func.value.id])
        if func.attr in BUILDERS and not _is_super(func.value) and \
                not (node.args and self._is_self(node.args[0])):
            self.flag(node, f"calls {_dotted(func)} on an object other than self (it can set "
                            "the attributes of a module)", sure=False)
        kind = self.aliases.kind(func.value)
        if kind and kind.startswith("module:"):
            self._unpickler(node, kind[7:].split(".")[0], func.attr)
        if kind == "ipython" and func.attr in IPYTHON_CALLS:
            self._magic(node, func.attr)
        elif kind == "ipython":
            self.flag(node, f"calls {_dotted(func)}, IPython's machinery (hooks, "
                            "transformers, events)")
        elif kind == "sys" and func.attr in SYS_HOOKS:
            self.flag(node, f"calls sys.{func.attr}")
        elif kind == "os" and func.attr in ("getenv", "getenvb") and \
                tells.unsettled_variable(_constant_string(node.args[0]) if node.args else None):
            self.flag(node, f"reads the machine's environment variables ({_dotted(node)}), "
                            "which differ where it is graded: code that can tell the graded "
                            "run from its author's own and behave otherwise", sure=False)
        elif kind == "os" and func.attr in OS_CALLS:
            self.flag(node, f"calls os.{func.attr}, which reaches outside the notebook; the "
                            "sandbox confines it")
        elif kind and kind.startswith("ipython"):
            self.flag(node, f"calls {func.attr} of IPython")

    def _magic(self, node: ast.Call, how: str) -> None:
        if how not in ("run_line_magic", "run_cell_magic") or not node.args:
            return
        first = node.args[0]
        name = first.value if isinstance(first, ast.Constant) else "?"
        argument = _constant_string(node.args[1]) if len(node.args) > 1 else None
        if name == "history":
            self.flag(node, "runs %history, which reads the notebook's input history")
        elif name == "load_ext" and (argument or "").strip() in SAFE_EXTENSIONS:
            pass
        elif name not in SAFE_MAGICS:
            self.flag(node, f"runs the %{name} magic, which can change how later cells run")
        if name == "writefile" and len(node.args) > 1 and \
                str(getattr(node.args[1], "value", "")).strip().endswith((".py", ".pth")):
            self.flag(node, "writes a Python file (%%writefile), which an import would run "
                            "without review")
        if how == "run_cell_magic" and len(node.args) > 2 and \
                isinstance(node.args[2], ast.Constant) and isinstance(node.args[2].value, str):
            body = _parse(node.args[2].value)
            if body is not None:
                self.aliases.learn(body)
                for line, what, sure in _Review(self.context, self.aliases).run(body):
                    self.flag(node, f"(in its %%{name} body, line {line}) {what}", sure)

    def _namespace_write(self, node: ast.AST, what: str, sure: bool = True) -> None:
        parent = getattr(node, "_parent", None)
        if isinstance(parent, ast.Attribute) and parent.attr in WRITERS or \
                isinstance(parent, ast.Subscript) and isinstance(parent.ctx, (ast.Store, ast.Del)):
            self.flag(node, f"writes to {what}", sure)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)) and isinstance(node.value, ast.Name) and \
                node.value.id in self.aliases.namespaces:
            self.flag(node, f"writes through {node.value.id}, an alias of a namespace",
                      sure=self.aliases.namespaces[node.value.id])
        self.generic_visit(node)

    # attributes
    def visit_Attribute(self, node: ast.Attribute) -> None:
        kind = self.aliases.kind(node.value)
        self._tell(node, self._module_of(node.value, kind), node.attr)
        if node.attr in ("environ", "environb") and kind == "os":
            self._environment(node)
        if node.attr in REFLECTION and not self._sets_own_field(node):
            self.flag(node, f"uses .{node.attr}, which reaches into code or frames")
        elif node.attr == "__dict__" and kind is not None:
            self.flag(node, f"reads {_dotted(node)}, a module's namespace (its names reached "
                            "by key, out of the review's sight)")
        elif node.attr == "__dict__" and not self._own_fields(node.value):
            self._namespace_write(node, "a __dict__", sure=False)
        if kind in ("module:gc", "module:threading"):
            self._module_use(node, kind[7:], node.attr)
        writes = isinstance(node.ctx, (ast.Store, ast.Del))
        verb = "assigns" if isinstance(node.ctx, ast.Store) else "deletes"
        if kind == "tinyprof" and _private(node.attr):
            self.flag(node, f"uses {_dotted(node)}, a private name of tinyprof")
        if kind == "ipython" and node.attr == "kernel":
            self.flag(node, f"uses {_dotted(node)}, the kernel that handles the grader's "
                            "requests")
        if kind == "ipython-module" and node.attr not in IPYTHON_PUBLIC:
            self.flag(node, f"uses {_dotted(node)}, which reaches the kernel's internals")
        if node.attr == "history_manager":
            self.flag(node, "reads the notebook's history (history_manager)")
        if writes and kind:
            self.flag(node, f"{verb} {_dotted(node)} ({_describe(kind)})")
        elif writes and _through_class(node.value):
            self.flag(node, f"{verb} {_dotted(node)}, patching a class through its instances")
        elif (kind == "sys" or "sys" in _chain(node.value)) and node.attr in SYS_HOOKS:
            if not self._membership(node):
                self.flag(node, f"uses sys.{node.attr}")
        elif kind and kind.startswith("sys:") and kind[4:] in SYS_HOOKS:
            self.flag(node, f"uses sys.{kind[4:]}")
        elif isinstance(node.value, ast.Name) and node.value.id == "inspect" \
                and node.attr in FRAMES:
            self.flag(node, f"uses inspect.{node.attr}, which reaches into frames or closures")
        self.generic_visit(node)

    # what tells the graded run apart (tells.py)
    def _module_of(self, node: ast.AST, kind: str | None) -> str | None:
        """The module an attribute is read on, as the tells name it: ``os`` for any alias of
        os, ``traceback`` for ``import traceback as tb``, else the name written (``Path``,
        ``socket`` in ``http.client.socket``)."""
        if kind in ("os", "sys"):
            return kind
        if kind and kind.startswith("module:") and isinstance(node, ast.Name):
            return kind[7:]
        if isinstance(node, ast.Attribute):
            return node.attr
        return node.id if isinstance(node, ast.Name) else None

    def _tell(self, node: ast.AST, module: str | None, name: str) -> None:
        """Flag (unsure) a read of the process's identity, its machine or its call stack."""
        why = "code that can tell the graded run from its author's own and behave otherwise"
        read = tells.identity_read(module, name)
        if read:
            self.flag(node, f"reads {module or 'an object'}.{name}, {read}: {why}", sure=False)
        elif tells.stack_read(module, name) and not self._frames_flagged(node, module, name):
            self.flag(node, f"reads the call stack ({module}.{name}), which shows who called "
                            f"the code (the grader's request, when graded): {why}", sure=False)
        elif module == "os" and name in ("getenv", "getenvb", "environ", "environb") and \
                isinstance(node, ast.ImportFrom):
            self.flag(node, f"imports os.{name}, the machine's environment variables: {why}",
                      sure=False)

    @staticmethod
    def _frames_flagged(node: ast.AST, module: str | None, name: str) -> bool:
        """Whether the review flags this read of frames already, as certain (``sys._getframe``,
        ``inspect.currentframe`` written so)."""
        written = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
            node.value.id == "inspect"
        return module == "sys" and name in SYS_HOOKS or written and name in FRAMES

    def _environment(self, node: ast.Attribute) -> None:
        """``os.environ`` read other than for a chapter's thread or device setting (set, or
        read back by a constant name of tells.SETTINGS_VARIABLES)."""
        parent = getattr(node, "_parent", None)
        if isinstance(parent, ast.Subscript) and parent.value is node:
            if not isinstance(parent.ctx, ast.Load) or \
                    not tells.unsettled_variable(_constant_string(parent.slice)):
                return
        elif isinstance(parent, ast.Attribute) and parent.value is node:
            call = getattr(parent, "_parent", None)
            statement = isinstance(getattr(call, "_parent", None), ast.Expr)
            if parent.attr in ("setdefault", "update", "__setitem__", "__delitem__", "pop") \
                    and statement:
                return
            key = _constant_string(call.args[0]) if isinstance(call, ast.Call) and \
                call.args else None
            if parent.attr == "get" and not tells.unsettled_variable(key):
                return
        self.flag(node, f"reads the machine's environment variables ({_dotted(parent or node)}"
                        "), which differ where it is graded: code that can tell the graded run "
                        "from its author's own and behave otherwise", sure=False)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and node.value in REFLECTION:
            self.flag(node, f"names .{node.value} in a string, which reaches into code or "
                            "frames")
        if isinstance(node.value, str) and tells.machine_path(node.value) and \
                not getattr(node, "_told", False):
            self._machine_path(node, node.value)
        elif isinstance(node.value, str) and tells.grader_module(node.value):
            self.flag(node, f"names the grader's module {node.value[:60]!r}, imported only "
                            "where a notebook is graded: code that can tell the graded run "
                            "from its author's own and behave otherwise", sure=False)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        joined = _joined(node)
        if joined in REFLECTION:
            self.flag(node, f"builds the name .{joined} in a string, which reaches into code "
                            "or frames")
        if joined is not None and not getattr(node, "_told", False) and \
                tells.machine_path(joined):
            self._machine_path(node, joined)
            for part in ast.walk(node):   # the whole path is said once, not each of its parts
                part._told = True  # type: ignore[attr-defined]
        self.generic_visit(node)

    def _machine_path(self, node: ast.AST, path: str) -> None:
        self.flag(node, f"names the path {path[:60]!r}, which describes the process or the "
                        "machine (its limits, network, process tree, user or home): code that "
                        "can tell the graded run from its author's own and behave otherwise",
                  sure=False)

    def _sets_own_field(self, node: ast.Attribute) -> bool:
        """``object.__setattr__(self, ...)`` or ``super().__setattr__(...)`` in a method that
        builds or sets ``self`` (a frozen dataclass's ``__post_init__``)."""
        call = getattr(node, "_parent", None)
        if node.attr not in ("__setattr__", "__delattr__") or not isinstance(call, ast.Call) \
                or call.func is not node or not self.methods \
                or self.methods[-1][0] not in BUILDERS:
            return False
        return _is_super(node.value) or bool(call.args) and self._own_fields(call.args[0])

    def _membership(self, node: ast.AST) -> bool:
        parent = getattr(node, "_parent", None)
        return isinstance(parent, ast.Compare) and all(
            isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops) and node is not parent.left

    def visit(self, node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            child._parent = node  # type: ignore[attr-defined]
        super().visit(node)


def _self_of(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The first parameter of a method defined in a class body, if nothing in it binds that
    name again (None otherwise)."""
    positional = node.args.posonlyargs + node.args.args
    if not isinstance(getattr(node, "_parent", None), ast.ClassDef) or not positional:
        return None
    name = positional[0].arg
    params = [a for a in ast.walk(node) if isinstance(a, ast.arg) and a.arg == name]
    stores = [n for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == name
              and not isinstance(n.ctx, ast.Load)]
    handlers = [h for h in ast.walk(node) if isinstance(h, ast.ExceptHandler) and h.name == name]
    return name if len(params) == 1 and not stores and not handlers else None


def _joined(node: ast.AST) -> str | None:
    """The text of ``"/pr" + "oc/..."``, a sum of string constants; None for anything else."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _joined(node.left), _joined(node.right)
        return left + right if left is not None and right is not None else None
    return _constant_string(node)


def _is_super(node: ast.AST) -> bool:
    """``super()`` (or ``super(...)``)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == "super"


def _chain(node: ast.AST) -> list[str]:
    """The names along ``a.b.c`` (``["a", "b", "c"]``), to spot ``os.sys.modules``."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    return names + [node.id] if isinstance(node, ast.Name) else names


def _through_class(node: ast.AST) -> bool:
    """``x.__class__...`` or ``type(x)...``: a class reached from an instance."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute) and node.attr in ("__class__", "__bases__", "__mro__"):
            return True
        node = node.value
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
        and node.func.id == "type"


def _describe(kind: str) -> str:
    if kind.startswith("module:"):
        return f"the module {kind[7:]}"
    return {"tinyprof": "tinyprof, which the tests rely on", "sys": "sys",
            "builtins": "builtins", "ipython": "IPython's shell"}.get(kind, kind)


def _constant_string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _history_name(name: str) -> bool:
    return name in HISTORY or (len(name) > 2 and name.startswith(("_i", "_o"))
                               and name[2:].isdigit())


def _python_path(node: ast.AST) -> bool:
    """``Path("x.py")``: a constant file name ending in .py or .pth."""
    name = _constant_string(node.args[0]) if isinstance(node, ast.Call) and node.args else None
    return name is not None and name.endswith((".py", ".pth"))


def _writes_python(node: ast.Call) -> bool:
    """``open("x.py", "w")``: a constant file name ending in .py or .pth opened to write (a
    module written under a computed name is caught when it is imported: _installed)."""
    mode = node.args[1] if len(node.args) > 1 else next(
        (k.value for k in node.keywords if k.arg == "mode"), None)
    mode_text = "r" if mode is None else (_constant_string(mode) or "w")
    if not any(c in mode_text for c in "wax+"):
        return False
    name = _constant_string(node.args[0]) if node.args else None
    return name is not None and name.endswith((".py", ".pth"))


@lru_cache(maxsize=None)
def _installed(module: str) -> bool:
    """Whether the grading environment has ``module`` (a top-level name): a notebook that
    imports one it does not have may be importing a file it wrote itself."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _dotted(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - only used in a message
        return "an attribute"


# --- small helpers ---------------------------------------------------------------------------

def _parse(text: str) -> ast.Module | None:
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return ast.parse(TransformerManager().transform_cell(text))
    except (SyntaxError, ValueError, IndexError):
        return None


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def cell_label(cell: dict, number: int) -> str:
    found = grade_id(cell)
    return f"cell {found}" if found else f"cell {number}"


def _load(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))
