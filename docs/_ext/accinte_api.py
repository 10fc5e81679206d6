"""The C++ API reference, one header at a time.

``{accinte-api} chapters/NN_name/csrc/header.h`` renders every entry that
the chapters' Doxygen project (docs/Doxyfile.chapters) documents in that
header: its classes and structs, the functions, variables and typedefs it
declares in namespace ``accinte`` (and namespaces inside it, except
``detail`` ones) and its macros, in the order of the header. The entries are read from Doxygen's XML
when the page is built and rendered with Breathe's ``doxygenclass``,
``doxygenfunction``, ... directives, so an entry added to a header appears
without anyone editing the page.

Breathe's ``doxygenfile`` cannot do this: it declares the namespace once per
file, which Sphinx reports as duplicate declarations, and
``doxygennamespace`` gives one flat list. Each header must be named by
exactly one directive, so that each name is declared once; a header that
Doxygen documents and no directive names is reported when the build ends.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Dict, List, Tuple

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

_PROJECT = "torch_accinte"
_LOGGER = logging.getLogger(__name__)

#: Breathe directive per Doxygen member kind.
_MEMBER_DIRECTIVES = {
    "function": "doxygenfunction",
    "variable": "doxygenvariable",
    "typedef": "doxygentypedef",
    "enum": "doxygenenum",
    "define": "doxygendefine",
}


def _xml_dir(app: Sphinx) -> Path:
    return Path(app.config.breathe_projects[_PROJECT])


def _entries(xml_dir: Path) -> Dict[str, List[Tuple[int, str, str]]]:
    """Per header path: (line, directive, argument) of every entry."""
    index = ET.parse(xml_dir / "index.xml").getroot()
    entries: Dict[str, List[Tuple[int, str, str]]] = {}

    def add(location, directive: str, argument: str) -> None:
        if location is None:
            return
        entries.setdefault(location.get("file"), []).append(
            (int(location.get("line", 0)), directive, argument)
        )

    for compound in index.findall("compound"):
        kind, name = compound.get("kind"), compound.findtext("name")
        if kind in ("class", "struct"):
            # NB: a nested class is rendered by its enclosing class.
            if name.startswith("accinte::") and "::" not in name[len("accinte::"):]:
                root = ET.parse(xml_dir / f"{compound.get('refid')}.xml").getroot()
                add(root.find("compounddef/location"), f"doxygen{kind}", name)
        elif kind in ("namespace", "file"):
            # NB: `detail` namespaces hold what a header needs but its users
            # do not call (the helpers of a macro, ...).
            if kind == "namespace" and (
                not (name == "accinte" or name.startswith("accinte::"))
                or "::detail" in name
            ):
                continue
            root = ET.parse(xml_dir / f"{compound.get('refid')}.xml").getroot()
            members = root.findall("compounddef/sectiondef/memberdef")
            names = Counter(m.findtext("name") for m in members)
            for member in members:
                member_kind = member.get("kind")
                if member_kind not in _MEMBER_DIRECTIVES:
                    continue
                if kind == "file" and member_kind != "define":
                    continue  # namespace members are listed by their namespace
                argument = member.findtext("name")
                if kind == "namespace":
                    argument = f"{name}::{argument}"
                    if member_kind == "function" and names[member.findtext("name")] > 1:
                        argument += member.findtext("argsstring") or ""
                add(member.find("location"), _MEMBER_DIRECTIVES[member_kind], argument)
    for items in entries.values():
        items.sort()
    return entries


def _cached_entries(env) -> Dict[str, List[Tuple[int, str, str]]]:
    if not hasattr(env, "accinte_api_entries"):
        env.accinte_api_entries = _entries(_xml_dir(env.app))
    return env.accinte_api_entries


class ApiOfHeader(SphinxDirective):
    """``{accinte-api} HEADER``: the documented entries of one header."""

    required_arguments = 1
    has_content = False

    def run(self):
        header = self.arguments[0]
        entries = _cached_entries(self.env).get(header)
        if not entries:
            _LOGGER.warning(
                "accinte-api: Doxygen documents nothing in %s", header,
                location=self.get_location(),
            )
            return []
        _named_headers(self.env)[header] = self.env.docname
        lines: List[str] = []
        # NB: the pages are MyST Markdown, and the content is parsed as such.
        for _, directive, argument in entries:
            lines += [f"```{{{directive}}} {argument}", f":project: {_PROJECT}"]
            if directive in ("doxygenclass", "doxygenstruct"):
                lines.append(":members:")
            lines += ["```", ""]
        content = StringList(lines, source=f"<accinte-api {header}>")
        container = nodes.container()
        nested_parse_with_titles(self.state, content, container)
        return container.children


def _named_headers(env) -> Dict[str, str]:
    if not hasattr(env, "accinte_api_headers"):
        env.accinte_api_headers = {}
    return env.accinte_api_headers


def _purge(app, env, docname):
    headers = _named_headers(env)
    for header in [h for h, d in headers.items() if d == docname]:
        del headers[header]
    if hasattr(env, "accinte_api_entries"):
        del env.accinte_api_entries


def _merge(app, env, docnames, other):
    _named_headers(env).update(
        {h: d for h, d in _named_headers(other).items() if d in docnames}
    )


def _check_all_named(app, env):
    """Every header with documented entries is named by a directive."""
    missing = sorted(set(_entries(_xml_dir(app))) - set(_named_headers(env)))
    for header in missing:
        _LOGGER.warning(
            "accinte-api: %s has documented entries, but no {accinte-api} "
            "directive renders them", header,
        )


def setup(app: Sphinx) -> dict:
    app.setup_extension("breathe")
    app.add_directive("accinte-api", ApiOfHeader)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-check-consistency", _check_all_named)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
