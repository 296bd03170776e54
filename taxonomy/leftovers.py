"""Leftovers in a definition (issue 53): pieces of the machinery or of a clause that a reader should never meet in
a type's or category's definition. `leftovers` lists them; the build's definitions must have none (tests check
the demo's and TRAIL GAIA's).

- a placeholder key: "Unnamed type monitor/T01", "<phase>/T07" (a type's internal id standing for a name);
- a fragment as a listed name: an item of a definition's list of types ("2 failure type(s): A; B.") or of its
  "Not inside: ..." list that `labelling.readable.fragment` refuses (a start mid-clause such as "Is not installed",
  a clause, a fragment shape);
- an empty example (an example quoted as '""') or a dangling "e.g." with nothing after it.
"""

from __future__ import annotations

import re

from failatlas.taxonomy.labelling.readable import fragment

_KEY = re.compile(r"\bUnnamed type\b|\b[a-z_]+/T\d{2}\b")
_TYPE_LIST = re.compile(r"^\d+ failure type\(s\): (.*)\.$")
_NOT_INSIDE = re.compile(r"Not inside: (.*?) \(the nearest other types\)")


def _listed(definition: str) -> list[str]:
    """The names a definition lists: its member types (a category's) or its nearest other types."""
    names: list[str] = []
    whole = _TYPE_LIST.match(definition.strip())
    if whole:
        names += whole.group(1).split("; ")
    for found in _NOT_INSIDE.finditer(definition):
        names += found.group(1).split("; ")
    return [n.strip() for n in names if n.strip()]


def leftovers(definition: str) -> list[str]:
    """Each leftover in `definition`, as a short description naming it; [] when there is none."""
    found = [f"placeholder {m.group(0)!r}" for m in _KEY.finditer(definition)]
    found += [f"fragment {n!r} ({why})" for n in _listed(definition) if (why := fragment(n))]
    if re.search(r'(e\.g\. |; )""(;|\.|$)', definition) or re.search(r"e\.g\.\s*\.?$", definition.strip()):
        found.append("empty example")
    return found
