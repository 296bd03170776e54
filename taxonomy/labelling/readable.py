"""Readable names: a failure type's name is a noun phrase that says what went wrong, never a fragment that ends
mid-clause, a code token, a file name or an exception message. `unreadable_reason` says which of those a name is;
`ReadableNames` wraps any labeller so that a name of those shapes is replaced by one that says honestly that no
readable name was found (the definition keeps the statements themselves as examples), and a category name of
those shapes leaves its types standing alone.

Rules, not a parser: the shapes are recognised by closed word classes (a phrase cannot end on an article,
preposition, conjunction, auxiliary, pronoun or a verb of saying) and by the character shapes of code, paths and
messages. A syntactic parser (spaCy's English pipeline, on PyPI as `en-core-web-sm`) was considered: it is one more
~13 MB model and two compiled dependencies for a check over names of a few words, where its tagger is least sure
(headline-style fragments without a verb), and it would make names depend on a model version. The closed classes
are exactly the words a fragment ends on.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from failatlas.taxonomy.definitions import category_definition
from failatlas.taxonomy.model import CategoryEvidence, CategoryLabel, TypeEvidence, TypeLabel

# words a noun phrase cannot end on: it would continue ("... the instructions that say", "... the file to")
_DANGLING = frozenset(str.split("""
a an the this that these those its their his her my our your some any each every no such
to of in on at by for from with without into onto about as than via per over under between through upon
and or but nor if when while because although though unless until whether which who whom whose where what
is are was were be been being am has have had do does did can could should would will shall may might must
not it they he she we you i them him us me
say says said saying states stating tell tells told mean means meant like
"""))
# Python / shell keywords and code words that are no failure by themselves
_CODE_WORDS = frozenset(str.split("""
def async await lambda elif kwargs args self cls none null nil true false stdout stderr argv dict str int
init main repr eval exec println printf
"""))
# words that name nothing on their own: a name made only of them says nothing of what went wrong
_EMPTY = frozenset(str.split("""
error errors occurred occur occurs issue issues problem problems fail failed happened
something thing things final answer file files path paths output outputs input inputs result results step steps
model agent tool tools code call calls value values data task tasks the a an of in
"""))
# stems of words that state a failure; a short name (three words or fewer) needs one, or it names a topic
_FAILURE_WORD = re.compile(
    r"^(not|no|never|without|non|missing|miss|lack|absent|wrong|incorrect|invalid|fail|error|mismatch|timeout|"
    r"time|crash|hallucinat|unsupport|unknown|broken|bad|ignor|skip|lost|los|leak|overflow|exhaust|denied|deny|"
    r"forbid|refus|reject|unavailab|loop|repeat|unverif|fabricat|prematur|incomplet|inconsisten|excess|redundan|"
    r"duplicat|exceed|limit|abuse|deviat|complian|stuck|hang|abort|kill|oom|nan|diverg|drift|empty|fake|forg|"
    r"stale|outdat|slow|flak|unstable|unclear|vague|confus|poor|misread|misus|misinterpret|mis|un|over|under|"
    r"dis|im|in|halluc|leakage|bug|fault|defect|conflict|violat|breach|block|throttl|corrupt|truncat|cut|issue|problem)",
    re.IGNORECASE)
_EXCEPTION = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception|Warning|Interrupt|Exit)\b\s*[:(]|^Traceback\b")
_FILE = re.compile(r"\b[\w\-]+\.(py|ipynb|json|jsonl|ya?ml|toml|txt|csv|tsv|md|sh|cfg|ini|log|pt|pth|bin|npz?|"
                   r"h5|pkl|parquet|html?|js|ts|c|cpp|h|rs|go|java|zip|tar|gz)\b", re.IGNORECASE)
_CODE_SHAPE = re.compile(r"`|\w\(|\(\)|[{}\[\]<>=;$\\]|\b\w+_\w+\b|\b[a-z]+[A-Z]\w*\b|\w\.\w|(^|\s)[/~]\w|::|->")


def _codeish(token: str) -> str | None:
    """'file name' or 'code token' for a token of that shape, else None."""
    if _FILE.search(token):
        return "file name"
    bare = token.strip(".,;:!?")
    if _CODE_SHAPE.search(bare) or bare.lower() in _CODE_WORDS:
        return "code token"
    return None


# What the note on a withheld name says of it, per reason `unreadable_reason` gives: the sentence reads
# "... (the name proposed for them, '<name>', <clause>) ...".
REASON_CLAUSES = {
    "empty": "is empty",
    "exception message": "is an exception message",
    "code token": "is a code token",
    "file name": "is a file name",
    "quoted message": "is a quoted message",
    "ends mid-clause": "ends mid-clause",
    "repeats a word": "joins a word to itself with 'and'",
    "says nothing specific": "says nothing specific",
    "topic, not a failure": "names a topic, not a failure",
    "starts mid-clause": "starts mid-clause",
    "is a clause": "is a clause, not a name",
}
# words two sides of an 'and' may both hold without the name repeating itself
_JOINERS = frozenset(str.split("a an the of in on to for and or with by at"))


def _repeats_a_word(words: list[str]) -> bool:
    """'Abuse and abuse available': the two sides of an 'and' share a word, so the name is two keywords glued
    together, not a phrase anyone wrote."""
    lowered = [w.lower() for w in words]
    return any(w == "and" and (set(lowered[:k]) & set(lowered[k + 1:])) - _JOINERS for k, w in enumerate(lowered))


def withheld_note(name: str, reason: str) -> str:
    """The sentence a type's definition opens with when its proposed `name` was withheld for `reason`."""
    if reason == "empty" or not name.strip():
        return ("No readable name was found for these statements (they share no phrase to name them by); "
                "read the examples. ")
    return (f"No readable name was found for these statements (the name proposed for them, '{name}', "
            f"{REASON_CLAUSES[reason]}); read the examples. ")


def unreadable_reason(name: str) -> str | None:
    """Why `name` is not a readable failure-type name, or None when it is readable. One of `REASON_CLAUSES`:
    'empty', 'exception message', 'code token' / 'file name' / 'quoted message' (the name is one, or what is left
    without it states no failure: "Missing the end_plan tag" is readable, "Async def" is not), 'ends mid-clause',
    'repeats a word' (one word on both sides of an 'and': "Abuse and abuse available"), 'says nothing specific',
    'topic, not a failure' (three words or fewer, none stating a failure)."""
    text = " ".join(name.split())
    if not text:
        return "empty"
    exception = _EXCEPTION.search(text)
    if exception:  # '<Exception>: <what it is about>' reads; the exception with its raw message does not
        rest = text[exception.end():].strip()
        if exception.group(0).rstrip().endswith("(") or text.startswith("Traceback") or len(rest.split()) < 2 \
                or re.search(r"['\"“”`]", rest) or any(_codeish(t) for t in rest.split()):
            return "exception message"
        text = rest
    stated = exception is not None  # the exception's class says what went wrong
    unquoted = re.sub(r"[\"“][^\"“”]*[\"”]|(?<![A-Za-z])'[^']*'(?![A-Za-z])", " ", text)
    tokens = unquoted.split()
    shapes = [_codeish(t) for t in tokens]
    plain = [t for t, shape in zip(tokens, shapes, strict=True) if shape is None]
    words = re.findall(r"[A-Za-z][A-Za-z'\-]*", " ".join(plain))
    other = "quoted message" if unquoted != text else next((x for x in shapes if x), None)
    if other and (len(words) < 2 or not any(_FAILURE_WORD.match(w) for w in words)):
        return other
    if not words:
        return "code token"
    last = re.sub(r"\s*\([^)]*\)\s*$", "", text)  # a trailing "(keyword)" added to tell names apart
    tail = re.findall(r"[A-Za-z][A-Za-z'\-]*", last)
    if tail and tail[-1].lower() in _DANGLING or text.endswith(":"):
        return "ends mid-clause"
    if _repeats_a_word(words):
        return "repeats a word"
    lowered = [w.lower() for w in words]
    if all(w in _EMPTY for w in lowered) and not stated:
        return "says nothing specific"
    if len(words) <= 3 and not stated and not any(_FAILURE_WORD.match(w) for w in words):
        return "topic, not a failure"
    return None


_AUXILIARY_START = re.compile(r"^(is|are|was|were|be|been|has|have|had|do|does|did|can|could|would|should|will)\b",
                              re.IGNORECASE)
_CLAUSE = re.compile(r"\b(is|are|was|were)\b(?!\s+(not|never|no)\b)", re.IGNORECASE)


def fragment(name: str) -> str | None:
    """Why `name` cannot stand as a name or be listed as one: a start mid-clause ("Is not installed": no subject),
    a clause ("Error was with the formatting": a subject and its verb, not a noun phrase), or an
    `unreadable_reason`; None when it can."""
    text = name.strip()
    if _AUXILIARY_START.match(text):
        return "starts mid-clause"
    if _CLAUSE.search(re.sub(r"\s*\([^)]*\)\s*$", "", text)):
        return "is a clause"
    return unreadable_reason(text)


_HONEST = "Unnamed type "


def honest_name(evidence: TypeEvidence | str) -> str:
    """The name of a type no readable name was found for: says so, and which type it is."""
    key = evidence if isinstance(evidence, str) else evidence.key
    return f"{_HONEST}{key} (no readable common phrase)"


def is_honest(name: str) -> bool:
    """Whether `name` is the honest name of a type no readable name was found for (`honest_name`)."""
    return name.startswith(_HONEST)


def readable_or_honest(name: str, key: str) -> str:
    """`name` when it is readable, else the honest name of type `key`."""
    return name if unreadable_reason(name) is None else honest_name(key)


class ReadableNames:
    """Wraps a labeller: a type name of a fragment shape becomes `honest_name` (its definition says why and keeps
    the representative statements), and a category whose name has such a shape is no category. Everything else
    (name, made_by, ...) is the wrapped labeller's."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)

    def label(self, evidence: TypeEvidence) -> TypeLabel:
        lab = self.inner.label(evidence)
        reason = fragment(lab.name)  # an LLM's name is held to the rules offline names are
        if reason is None:
            return lab
        note = withheld_note(lab.name, reason)
        return lab.model_copy(update={
            "name": honest_name(evidence),
            "definition": note + lab.definition,
            "definition_head": None if lab.definition_head is None else note + lab.definition_head,
            "inclusion_criteria": ([f"Unreadable name withheld ({reason}): {lab.name!r}."] if lab.name.strip() else [])
            + lab.inclusion_criteria,
        })

    def label_category(self, evidence: CategoryEvidence) -> CategoryLabel | None:
        def plain(names: list[str]) -> list[str]:  # an honest name is no phrase to name a category by
            return ["" if n.startswith(_HONEST) else n for n in names]

        original = evidence
        evidence = replace(evidence, type_names=plain(evidence.type_names),
                           other_categories=[plain(o) for o in evidence.other_categories])
        lab = self.inner.label_category(evidence)
        if lab is None or unreadable_reason(lab.name) is not None or "readable common phrase" in lab.name.lower():
            return None
        if lab.naming_method == "offline":  # its definition lists the member types: by their real names
            lab = lab.model_copy(update={"definition": category_definition(original)})
        return lab
