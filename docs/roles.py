"""A Griffe extension (mkdocs.yml) that renders the docstrings' Sphinx roles, :func:`fp.run` and the
like, which mkdocstrings would print as written: a role naming an object of the API reference
(docs/reference/api.md) becomes a link to it; any other becomes code.  ``~a.b.c`` shows ``c``, as
in Sphinx.  The site's build fails on a role left in a page (hooks.py, ``on_post_page``)."""
from __future__ import annotations

import os
import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|data|attr|exc|obj|const):`([^`]+)`")
API_PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference", "api.md")
_DOCUMENTED = re.compile(r"^::: ([\w.]+)\s*$", re.M)
# The name the package is imported as in the docstrings and pages (``import fedpne_jax as fp``).
SHORT = {"fp.": "fedpne_jax."}


def documented() -> list[str]:
    """The identifiers the API page renders, in its order."""
    with open(API_PAGE, encoding="utf-8") as fh:
        return _DOCUMENTED.findall(fh.read())


def _lookup(loader, path: str):
    try:
        return loader.modules_collection.get_member(path)
    except (KeyError, ValueError, AttributeError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None


def _canonical(obj) -> str | None:
    try:
        return obj.final_target.path if obj.is_alias else obj.path
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None


class SphinxRoles(griffe.Extension):
    def _anchors(self, loader) -> dict[str, str]:
        anchors = {ident: ident for ident in documented()}
        for ident in documented():
            obj = _lookup(loader, ident)
            try:
                members = [(f"{ident}.{name}", m) for name, m in obj.members.items()
                           if not name.startswith("_")] if obj is not None and obj.is_class else []
            except (griffe.AliasResolutionError, griffe.CyclicAliasError):
                members = []            # the other package is not loaded yet: its own pass links it
            for path, member in ([(ident, obj)] if obj is not None else []) + members:
                anchors.setdefault(path, path)
                canonical = _canonical(member)
                if canonical:
                    anchors.setdefault(canonical, path)
        return anchors

    def _target(self, loader, anchors, obj, name: str) -> str | None:
        for short, full in SHORT.items():
            if name.startswith(short):
                name = full + name[len(short):]
        scopes = [""] + [f"{scope.path}." for scope in (obj.parent, obj.module) if scope is not None]
        for scope in scopes:
            if scope + name in anchors:
                return anchors[scope + name]
            found = _lookup(loader, scope + name)
            canonical = _canonical(found) if found is not None else None
            if canonical in anchors:
                return anchors[canonical]
        return None

    def rewrite(self, loader, anchors, obj, text: str) -> str:
        def one(match):
            written = match.group(1)
            name = written.lstrip("~.").removesuffix("()")
            shown = name.rpartition(".")[2] if written.startswith("~") else name
            target = self._target(loader, anchors, obj, name)
            return f"[`{shown}`][{target}]" if target else f"`{shown}`"
        return ROLE.sub(one, text)

    def on_package(self, *, pkg, loader, **kwargs) -> None:
        # An object's canonical path -> its identifier on the API page (an alias links where it is shown).
        anchors = self._anchors(loader)
        stack = [pkg]
        while stack:
            obj = stack.pop()
            if obj.docstring is not None:
                obj.docstring.value = self.rewrite(loader, anchors, obj, obj.docstring.value)
            stack.extend(m for m in obj.members.values() if not m.is_alias)
