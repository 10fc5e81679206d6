"""Links to PyTorch: its documentation for Python APIs, its source for the rest.

One table, ``docs/pytorch/api.txt``, lists every PyTorch API the guide links
to (its header says the format). From it:

* the Python objects PyTorch documents become ``docs/pytorch/objects.inv``, a
  Sphinx inventory committed with the guide, that ``sphinx.ext.intersphinx``
  reads instead of fetching PyTorch's (conf.py's ``intersphinx_mapping``), so
  that the build needs no network. A page links one with the Python domain's
  roles, ``{py:func}`torch.library.custom_op```, and nitpicky mode fails the
  build on a name the inventory lacks;
* the names documented only in PyTorch's source (its C++ API, private Python
  modules) are linked by the role ``{pt-src}`at::native::cpu_fallback```
  (``{pt-src}`cpu_fallback <at::native::cpu_fallback>``` shows the short
  name) to the file on GitHub at the release's tag; an unknown name fails the
  build.

Both use one setting each in conf.py: ``pytorch_release`` (the documentation's
version, ``2.13``) and ``pytorch_tag`` (the source's tag, ``v2.13.0``).

Run as a script, from the repository root::

    python3 docs/_ext/accinte_pytorch.py --write   # (re)writes objects.inv
    python3 docs/_ext/accinte_pytorch.py --check   # fails if it is stale, or
                                                   # a src line is wrong

``--check`` also looks up each ``src`` entry in the installed torch (its
headers under ``torch/include``, its Python files): the file must exist and,
where the entry names a line (``#Lnn``), the name's last part must be on it.
"""

from __future__ import annotations

import re
import sys
import zlib
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "pytorch" / "api.txt"
INVENTORY = ROOT / "docs" / "pytorch" / "objects.inv"

#: The Python domain's roles a table line may name, and the object type each
#: is written as in the inventory.
PY_ROLES = {
    "py:func": "py:function",
    "py:class": "py:class",
    "py:meth": "py:method",
    "py:mod": "py:module",
    "py:exc": "py:exception",
    # A page of the documentation (not an API): {doc}`text <torch:NAME>`.
    "doc": "std:doc",
}


class Entry(NamedTuple):
    role: str
    name: str
    target: str
    aliases: List[str]
    line: int


def read_table(path: Path = TABLE) -> List[Entry]:
    entries = []
    names = set()
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = text.split("#", 1)[0] if text.lstrip().startswith("#") else text
        fields = text.split()
        if not fields:
            continue
        if len(fields) < 3 or (fields[0] != "src" and fields[0] not in PY_ROLES):
            raise ValueError(f"{path}:{number}: expected ROLE NAME TARGET [ALIAS ...]")
        role, name, target, *aliases = fields
        if name in names:
            raise ValueError(f"{path}:{number}: {name} is listed twice")
        names.add(name)
        entries.append(Entry(role, name, target, aliases, number))
    return entries


def inventory_bytes(entries: List[Entry]) -> bytes:
    """A version 2 Sphinx inventory of the table's Python objects.

    NB: the header is exactly four lines (Sphinx reads the rest as zlib data).
    """
    lines = []
    for entry in entries:
        if entry.role == "src":
            continue
        objtype = PY_ROLES[entry.role]
        if objtype == "std:doc":
            lines.append(f"{entry.name} std:doc -1 {entry.target} -\n")
            continue
        anchor = f"module-{entry.name}" if objtype == "py:module" else entry.name
        uri = entry.target if "#" in entry.target else f"{entry.target}#{anchor}"
        lines.append(f"{entry.name} {objtype} 1 {uri} -\n")
    header = (
        "# Sphinx inventory version 2\n"
        "# Project: PyTorch\n"
        "# Version: \n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    return header.encode() + zlib.compress("".join(sorted(lines)).encode(), 9)


# -- The installed torch ---------------------------------------------------------


def _installed_path(path: str) -> Optional[Path]:
    """Where the installed torch keeps its copy of ``path`` (a path in
    PyTorch's repository), or None for a file the wheel does not ship."""
    try:
        import torch
    except ImportError:
        return None
    package = Path(torch.__file__).resolve().parent
    include = package / "include"
    if path.startswith("torch/") and (path.endswith(".py") or path.endswith("/")):
        return package.parent / path
    if not path.endswith((".h", ".hpp", ".cuh")):
        return None  # NB: the wheel ships headers, not C++ sources
    for prefix, installed in (
        ("aten/src/ATen/", include / "ATen"),
        ("torch/csrc/api/include/torch/", include / "torch"),
        ("c10/", include / "c10"),
        ("torch/", include / "torch"),
    ):
        if path.startswith(prefix):
            return installed / path[len(prefix):]
    return None


def _last_part(name: str) -> str:
    return re.split(r"::|\.", name)[-1]


def check_sources(entries: List[Entry]) -> List[str]:
    """Problems of the ``src`` entries, checked against the installed torch."""
    problems = []
    for entry in entries:
        if entry.role != "src":
            continue
        path, _, line = entry.target.partition("#L")
        installed = _installed_path(path)
        if installed is None:
            continue
        if not (installed.is_dir() if path.endswith("/") else installed.is_file()):
            problems.append(f"{entry.name}: {path} is not in the installed torch "
                            f"({installed})")
            continue
        if line:
            lines = installed.read_text(encoding="utf-8", errors="replace").splitlines()
            index = int(line) - 1
            if not 0 <= index < len(lines) or _last_part(entry.name) not in lines[index]:
                problems.append(f"{entry.name}: not on line {line} of {path}")
    return problems


def main(argv: List[str]) -> int:
    entries = read_table()
    if argv == ["--write"]:
        INVENTORY.write_bytes(inventory_bytes(entries))
        print(f"wrote {INVENTORY.relative_to(ROOT)}")
        return 0
    if argv == ["--check"]:
        problems = check_sources(entries)
        if not INVENTORY.is_file() or INVENTORY.read_bytes() != inventory_bytes(entries):
            problems.append(f"{INVENTORY.relative_to(ROOT)} is not up to date with "
                            f"{TABLE.relative_to(ROOT)}: run "
                            "python3 docs/_ext/accinte_pytorch.py --write")
        for problem in problems:
            print(f"accinte_pytorch: {problem}", file=sys.stderr)
        count = sum(1 for e in entries if e.role == "src")
        print(f"accinte_pytorch: {len(entries) - count} documented objects, "
              f"{count} source links, {len(problems)} problems")
        return 1 if problems else 0
    print(__doc__, file=sys.stderr)
    return 2


# -- Sphinx ------------------------------------------------------------------------


#: The table's src entries (name: path in the repository), read when the
#: builder starts.
_SOURCES: Dict[str, str] = {}


def pt_src_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    from docutils import nodes
    from sphinx.util.nodes import split_explicit_title

    app = inliner.document.settings.env.app
    has_title, title, target = split_explicit_title(text)
    sources = _SOURCES
    if target not in sources:
        message = inliner.reporter.error(
            f"{{pt-src}}: {target!r} is not in docs/pytorch/api.txt as a src entry",
            line=lineno)
        problem = inliner.problematic(rawtext, rawtext, message)
        return [problem], [message]
    # NB: a directory's page is under tree/, a file's under blob/.
    kind = "tree" if sources[target].split("#")[0].endswith("/") else "blob"
    url = (f"https://github.com/pytorch/pytorch/{kind}/{app.config.pytorch_tag}/"
           f"{sources[target]}")
    literal = nodes.literal(title, title, classes=["xref", "pt-src"])
    reference = nodes.reference("", "", literal, refuri=url, internal=False,
                                classes=["pt-src"])
    return [reference], []


def _load_table(app) -> None:
    _SOURCES.update((e.name, e.target) for e in read_table() if e.role == "src")
    stale = INVENTORY.read_bytes() != inventory_bytes(read_table()) \
        if INVENTORY.is_file() else True
    if stale:
        from sphinx.errors import ConfigError

        raise ConfigError(
            "docs/pytorch/objects.inv is not up to date with docs/pytorch/api.txt: "
            "run python3 docs/_ext/accinte_pytorch.py --write")


def setup(app):
    app.add_config_value("pytorch_release", "2.13", "env")
    app.add_config_value("pytorch_tag", "v2.13.0", "env")
    app.add_role("pt-src", pt_src_role)
    app.connect("builder-inited", _load_table)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
