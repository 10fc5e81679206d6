"""Sphinx configuration of the torch_accinte guide.

The Sphinx source directory is the repository root, so that every chapter's
``README.md`` is at the same time its GitHub page and its page in the guide.
Everything that is not a page is excluded below.

Build (from the repository root)::

    mkdir -p build/docs
    ACCINTE_DOCS_BUILD=build/docs doxygen docs/Doxyfile
    ACCINTE_DOCS_BUILD=build/docs doxygen docs/Doxyfile.chapters
    python -m sphinx -W --keep-going -n -d build/docs/doctrees -b html . build/docs/html

The C++ API reference comes from Doxygen's XML, read by Breathe. Doxygen writes
it to ``$ACCINTE_DOCS_BUILD/doxygen/xml`` (emulator, docs/Doxyfile) and
``$ACCINTE_DOCS_BUILD/doxygen-chapters/xml`` (chapters,
docs/Doxyfile.chapters); this file looks for it in the same places, so all
commands must see the same ``ACCINTE_DOCS_BUILD``.
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
# The guide's own small Sphinx extensions (docs/_ext/*.py).
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
# accinte_bench renders benchmark results with benchmarks/bench_report.py, the
# module `make bench` writes them with.
sys.path.insert(0, str(ROOT / "benchmarks"))

# Where Doxygen's output lives. A relative path is relative to this file (the
# repository root), the directory `doxygen docs/Doxyfile` is run from.
_docs_build = Path(os.environ.get("ACCINTE_DOCS_BUILD", "build/docs"))
if not _docs_build.is_absolute():
    _docs_build = ROOT / _docs_build
# Two Doxygen projects (see docs/Doxyfile for why): the emulator's C API and
# the chapters' backend headers.
DOXYGEN_XML = _docs_build / "doxygen" / "xml"
DOXYGEN_CHAPTERS_XML = _docs_build / "doxygen-chapters" / "xml"

# The Python API reference (docs/python_api.md) documents the torch_accinte
# package with autodoc, which imports it. A stage tree assembles the package
# from every chapter's python/ directory; the guide assembles the same tree of
# Python sources, without building anything, under the docs build directory,
# so `make docs` works on a fresh clone as after a build. The compiled
# extension module is mocked (autodoc_mock_imports, below). The dist-info
# folders are left out and PyTorch's backend autoload is switched off, so
# that `import torch` in this process loads no torch_accinte at all, neither
# this tree nor an installed copy.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
PYTHON_TREE = _docs_build / "python"


def _assemble_python_tree() -> None:
    import shutil

    if PYTHON_TREE.exists():
        shutil.rmtree(PYTHON_TREE)
    PYTHON_TREE.mkdir(parents=True)
    for source in sorted(ROOT.glob("chapters/[0-9][0-9]_*/python")):
        shutil.copytree(
            source,
            PYTHON_TREE,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("*.dist-info", "__pycache__"),
        )


_assemble_python_tree()
sys.path.insert(0, str(PYTHON_TREE))

# -- The repository -----------------------------------------------------------

# Where the guide links to its sources: the front page, the theme's "view" and
# "edit" buttons, and every listing's caption (docs/_ext/accinte_listings.py).
# One setting, the environment variable ACCINTE_REPOSITORY_URL, the https URL
# of the repository on GitHub. Unset, a build by GitHub Actions (the
# publishing workflow, .github/workflows/docs.yml) links to the repository it
# runs for, and any other build to the default below.
DEFAULT_REPOSITORY_URL = "https://github.com/torch-accinte/torch_accinte"


def _repository_url() -> str:
    url = os.environ.get("ACCINTE_REPOSITORY_URL")
    if not url and os.environ.get("GITHUB_REPOSITORY"):
        server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
        url = f"{server}/{os.environ['GITHUB_REPOSITORY']}"
    return (url or DEFAULT_REPOSITORY_URL).rstrip("/")


def _commit() -> str:
    """The commit the guide is built from, so that a listing's link shows the
    file as the page shows it; the branch name outside a git checkout."""
    import subprocess

    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
            text=True, check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        # NB: GitHub Actions names the commit even where git refuses to read
        # a checkout owned by another user.
        return os.environ.get("GITHUB_SHA") or REPOSITORY_BRANCH


REPOSITORY_URL = _repository_url()
#: The branch that the "edit" button edits and that GitHub Pages publishes.
REPOSITORY_BRANCH = "main"
REPOSITORY_COMMIT = _commit()

# -- Project information ------------------------------------------------------

project = "torch_accinte"
author = "The torch_accinte authors"
copyright = "the torch_accinte authors"
release = "0.1"

# -- General configuration ----------------------------------------------------

extensions = [
    "myst_parser",
    "breathe",
    # The C++ API reference per chapter and header (docs/api.md).
    "accinte_api",
    # Every literalinclude is captioned with its file and dedented.
    "accinte_listings",
    # Long inline code breaks between its parts, never inside one.
    "accinte_breaks",
    # Diagrams drawn by Graphviz at build time (Debian's graphviz package);
    # accinte_diagrams adds those generated from the repository's layout.
    "sphinx.ext.graphviz",
    "accinte_diagrams",
    # The results of `make bench` as a table and a chart (docs/performance.md).
    "accinte_bench",
    # A copy button on every code block.
    "sphinx_copybutton",
    # The Python API reference (docs/python_api.md).
    "sphinx.ext.autodoc",
    # Links to PyTorch: its documentation (intersphinx, from a committed
    # inventory) and its source ({pt-src}), both from docs/pytorch/api.txt.
    "sphinx.ext.intersphinx",
    "accinte_pytorch",
]

# The landing page is index.md at the repository root, so that the site's root
# (build/docs/html/index.html) is the guide's front door; the other pages are
# under docs/ and chapters/.
root_doc = "index"

source_suffix = {
    ".md": "markdown",
    ".rst": "restructuredtext",
}

# Sources live in the repository root: list everything that is not a page.
# Pages are docs/**/*.md and chapters/*/*.md: a chapter's README.md and, for
# a chapter of several pages, the others beside it, in its README's toctree.
exclude_patterns = [
    # Build output and tool state.
    "build",
    "build/**",
    "**/build/**",
    "**/output/**",
    "**/_build/**",
    ".git",
    "**/.git/**",
    ".venv",
    "**/.venv/**",
    "venv/**",
    "**/__pycache__/**",
    "**/*.egg-info/**",
    "**/.pytest_cache/**",
    ".github/**",
    ".ci/**",
    "shared/**",
    # Code, not pages.
    "common/**",
    "tests/**",
    "benchmarks/**",
    "examples/**",
    "tools/**",
    "requirements/**",
    # Inside a chapter only the Markdown files beside README.md are pages.
    "chapters/*/csrc/**",
    "chapters/*/python/**",
    "chapters/*/tests/**",
    # The repository's README.md is the GitHub landing page; the guide's
    # landing page is index.md.
    "README.md",
    "CONTRIBUTING.md",
    "LICENSE*",
]

# Fail on references to anything that does not exist (the build runs with -n).
nitpicky = True

# Nitpicky mode reports every C++ name in a rendered declaration that no page
# declares. Some names are meant to have no declaration here; they are ignored
# by exact name (or, for PyTorch, by namespace). Anything else that fails to
# resolve is a real problem and still fails the build.
nitpick_ignore = [
    # Opaque handle types of the emulator (`typedef struct accinteStream*
    # accinteStream_t;`): the structs are deliberately never defined.
    ("cpp:identifier", "accinteStream"),
    ("cpp:identifier", "accinteEvent"),
    ("cpp:identifier", "accinteGraph"),
    ("cpp:identifier", "accinteGraphExec"),
    # A macro used as an array bound: Breathe renders macros as C macros, so a
    # C++ declaration that names one cannot link to it; it is documented in
    # the same file, just above.
    ("cpp:identifier", "ACCINTE_ACTIVITY_NAME_SIZE"),
    ("cpp:identifier", "ACCINTE_IPC_HANDLE_SIZE"),
    # The namespace itself: the API pages render its entries one by one
    # (docs/_ext/accinte_api.py), and a namespace has no page of its own.
    ("cpp:identifier", "accinte"),
]
# Standard C and POSIX types and PyTorch's C++ API (Kineto's, which PyTorch
# ships, with it): documented elsewhere, and there is no Sphinx inventory of
# PyTorch's C++ API to link to.
nitpick_ignore_regex = [
    ("cpp:identifier", r"(s?size_t|ptrdiff_t|pid_t|u?int(8|16|32|64|ptr)_t)"),
    ("cpp:identifier", r"(std|c10|c10d|at|torch|pybind11|libkineto)(::.*)?"),
]

# -- PyTorch ------------------------------------------------------------------

# The release the guide targets: its documentation (Python APIs) and its
# source at the tag (everything else) are what the pages link to
# (docs/_ext/accinte_pytorch.py).
pytorch_release = "2.13"
pytorch_tag = "v2.13.0"
# NB: the inventory is docs/pytorch/objects.inv, written from the guide's own
# table of the APIs it links to (docs/pytorch/api.txt), never fetched: the
# build needs no network. A name missing from it fails the build (nitpicky).
intersphinx_mapping = {
    "torch": (f"https://docs.pytorch.org/docs/{pytorch_release}/",
              str(ROOT / "docs" / "pytorch" / "objects.inv")),
}
# Function links show the name as the page writes it, without "()".
add_function_parentheses = False

# The standard library's typing names in the Python API reference's
# signatures: not linked. (PyTorch's names there are in the table.)
nitpick_ignore_regex += [
    ("py:(class|obj|func|data|exc)", r"(typing|collections\.abc)(\..*)?"),
]

# Inductor's own string annotations, unqualified, in the signature that
# chapter 13's subgraph wrapper code generator inherits from Inductor's.
nitpick_ignore += [
    ("py:class", "PythonWrapperCodegen"),
    ("py:class", "ir.GraphPartitionSignature"),
]

# The private class of what get_device_properties returns, by design not
# part of the documented API.
nitpick_ignore += [("py:class", "torch_accinte.device_module._DeviceProperties")]

# -- autodoc ------------------------------------------------------------------

# The compiled extension module: not built for the guide (see above).
autodoc_mock_imports = ["torch_accinte._C"]
autodoc_default_options = {"members": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"


def _cancel_exit_finalizers(app, exception) -> None:
    """Chapter 14's plug-in, imported by autodoc, registers finalizers that
    call the compiled module at exit; under the mock they would fail (and
    print a traceback after the build), so they are cancelled."""
    from multiprocessing import util

    from sphinx.ext.autodoc.mock import ismock

    ipc = sys.modules.get("torch_accinte.ipc")
    for finalizer in list(util._finalizer_registry.values()):
        callback = getattr(finalizer, "_callback", None)
        if ismock(callback) or (ipc is not None and callback is getattr(
                ipc, "_warn_if_in_flight", None)):
            finalizer.cancel()


def setup(app):
    app.connect("build-finished", _cancel_exit_finalizers)

# -- MyST ---------------------------------------------------------------------

myst_enable_extensions = [
    "colon_fence",
    "deflist",
    "fieldlist",
    "attrs_inline",
    "substitution",
]
# {{ repository }} on a page: the link to the repository (see above).
myst_substitutions = {
    "repository": f"[{REPOSITORY_URL.split('://', 1)[-1]}]({REPOSITORY_URL})",
}
# Generate anchors for headings down to ### so pages can link to sections.
myst_heading_anchors = 3

# -- Breathe ------------------------------------------------------------------

breathe_projects = {
    "accinte": str(DOXYGEN_XML),
    "torch_accinte": str(DOXYGEN_CHAPTERS_XML),
}
breathe_default_project = "accinte"
# The "#include" line Breathe adds to each class links to the header's file
# compound, which no page renders (chapters' names are rendered by namespace).
breathe_show_include = False
# Render the emulator's C headers in the C++ domain too, so that the chapters'
# C++ declarations link to the emulator's types (accinteError_t, ...).
breathe_domain_by_extension = {"h": "cpp"}
breathe_default_members = ("members",)

# -- HTML ---------------------------------------------------------------------

html_theme = "furo"
html_title = "torch_accinte: a PrivateUse1 backend, step by step"
# The buttons at the top of each page: "view" shows its Markdown source at
# the commit the guide was built from, "edit" edits it on the branch.
html_theme_options = {
    "source_repository": REPOSITORY_URL,
    "source_branch": REPOSITORY_BRANCH,
    "source_directory": "",
    "source_view_link": f"{REPOSITORY_URL}/blob/{REPOSITORY_COMMIT}/{{filename}}",
    "source_edit_link": f"{REPOSITORY_URL}/edit/{REPOSITORY_BRANCH}/{{filename}}",
    "top_of_page_buttons": ["view", "edit"],
}
# SVG stays sharp at any zoom and its text can be searched and selected.
graphviz_output_format = "svg"
# One style for every diagram: fonts, the default node and the edge colour,
# as Graphviz command-line defaults (docs/_ext/accinte_diagrams.py, which also
# checks each diagram's own attributes against them).
from accinte_diagrams import DOT_ARGS as graphviz_dot_args  # noqa: E402

# Where each listing's caption links to (docs/_ext/accinte_listings.py).
accinte_repository_url = REPOSITORY_URL
accinte_repository_commit = REPOSITORY_COMMIT

html_static_path = ["docs/_static"]
# Layout fixes (in-page contents at 1280 px, tables that fit): see the file.
html_css_files = ["accinte.css"]
# Scroll hints of wide tables and diagrams on narrow screens: see the file.
html_js_files = ["accinte.js"]
# NB: without an icon a browser asks the site root for /favicon.ico, a 404.
html_favicon = "docs/_static/favicon.svg"
