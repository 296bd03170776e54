"""Offline names that state a failure: phrase candidates taken from a type's own insights (word runs between
punctuation, 2 to 8 words, not starting or ending on a filler word, paths and URLs left out), scored by how many
of the type's insights say them against how many of its nearest neighbours' insights do, so that a name tells the
type apart. A phrase that the texts go on after with its object or head noun ("deviated from the planned" + "steps",
"call the search_agent" + "tool") is cut short, and scores less than one that ends where its words do. An error
signature (the exception class most members name) leads the name when it is what the type is about."""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Sequence

from failatlas.taxonomy.keywords import DOMAIN_STOP_WORDS
from failatlas.taxonomy.signatures import error_signature

_CLAUSE = re.compile(r"[.,;:!?()\[\]{}|=\n]+|\s-\s|\s—\s")
_QUOTES = re.compile(r"[\"`<>*‘’“”]|(?<![A-Za-z])'|'(?![A-Za-z])")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*(?:'[a-z]+)?")
# A path or URL ('data/gaia/validation/x.mp3', https://...) names no failure: it ends a clause.
# Not "input/output", "and/or" or "JSON/YAML": a path has two separators, starts at a root, has a scheme, or
# names a file ('x/y.mp3').
_TOKEN = re.compile(r"\S+")
_PATHLIKE = re.compile(r"://|^[~.]?[/\\]\w|\w[/\\][^/\\\s]*[/\\]\w|[/\\][\w\-]+\.[A-Za-z0-9]{1,5}\b")


def _unpath(text: str) -> str:
    """Each whitespace-separated token shaped like a path or URL becomes a clause break (token by token, so a
    long run without spaces costs linear time)."""
    return _TOKEN.sub(lambda m: " | " if _PATHLIKE.search(m.group(0)) else m.group(0), text)


# A passage in double quotes of three or more words is cited (the task's instructions, the agent's output): the
# annotator's own words say what went wrong, so a name is never taken from it. A quote opens at a word's start and
# closes at a word's end, on the same line ('a 5" screen' or '{"answer": 42}' cite nothing).
_QUOTE_PAIRS = (('"', '"'), ("“", "”"))
_BEFORE_OPEN = frozenset(" \t\n([{:,;")
_AFTER_CLOSE = frozenset(" \t\n)]}.,;:!?")


def _uncite(text: str) -> str:
    """`text` with each cited passage of three or more words replaced by a clause break. Linear in the text's
    length: every quote is looked at once, its closing quote found by bisection among the closing quotes."""
    cuts: list[tuple[int, int]] = []
    for opener, closer in _QUOTE_PAIRS:
        closes = [k for k, ch in enumerate(text) if ch == closer
                  and (k + 1 == len(text) or text[k + 1] in _AFTER_CLOSE)]
        start = 0
        for k, ch in enumerate(text):
            if ch != opener or k < start or (k and text[k - 1] not in _BEFORE_OPEN):
                continue
            n = bisect.bisect_right(closes, k)
            if n == len(closes):
                break  # no closing quote after this one: none after a later one either
            end = closes[n]
            newline = text.find("\n", k, end)
            if newline == -1 and len(text[k + 1:end].split()) >= 3:
                cuts.append((k, end))
                start = end + 1
    if not cuts:
        return text
    out, last = [], 0
    for a, b in sorted(cuts):
        if a < last:
            continue
        out.append(text[last:a])
        out.append(" | ")
        last = b + 1
    out.append(text[last:])
    return "".join(out)


# "didn't" -> "did not" (a typographic apostrophe counts), so that a name reads as written prose.
_NOT = re.compile(r"\b([A-Za-z]+)n['’]t\b", re.IGNORECASE)
_IRREGULAR_NOT = {"ca": "cannot", "wo": "will not", "sha": "shall not", "ai": "is not"}
# Words a name may hold inside a phrase but neither start nor end on.
_EDGE_TEXT = """
    a an the this that these those it its is are was were be been being has have had do does did to of in on
    at by for from with as and or but not no so than then there here when while which who whose what where why how
    into onto about after before again also any all some each every other another same such very more most many
    much few can could would should will shall may might must one two three first second third instead because
    since although though if else once just only even still already yet ever never both either neither per via
    e g eg ie etc system agent model llm assistant without instead not no named called
"""
# Words that say something went wrong: a phrase holding one states a failure rather than a topic.
_CUE_TEXT = """
    failed fails failing failure error errors incorrect incorrectly wrong wrongly missing missed miss invalid
    unexpected unsupported repeated repeatedly repeating ignored ignoring without instead deviated deviation
    hallucinated fabricated invented misinterpreted misread misunderstood misunderstanding misclassified
    unable cannot couldn't not no never timed timeout exceeded denied forbidden refused crashed raised
    broken mismatch mismatched inconsistent unverified unsupported skipped omitted forgot lost redundant
    deviates hallucinates fails prematurely premature abandoned abandons bypassed violated violating misused
    excessive unnecessary
"""
CUES = frozenset(_CUE_TEXT.split())
# Nouns every insight of this domain uses: no name starts or ends on the rest of DOMAIN_STOP_WORDS, but a name may
# end on these ("did not use any tools", "skipped the planned steps").
_DOMAIN_NOUN_TEXT = "step steps task tasks tool tools output result trace"
_DOMAIN_NOUNS = frozenset(_DOMAIN_NOUN_TEXT.split())
# Of those, the ones too general to head a category ("Tool failures" says nothing in a domain of tool calls).
_GENERIC_NOUNS = _DOMAIN_NOUNS - {"result"}
_FUNCTION_WORDS = frozenset(_EDGE_TEXT.split()) - {"system", "agent", "model", "llm", "assistant", "named", "called"}
_EDGE_WORDS = ((frozenset(_EDGE_TEXT.split()) | DOMAIN_STOP_WORDS) - _DOMAIN_NOUNS
               - (CUES - {"not", "no", "without", "instead"}))
# Cue words that say a failure only beside another word: not enough on their own for a phrase to state one.
_WEAK_CUES = frozenset({"no"})
# Language and tool tokens that are no failure on their own ("Py", "bash"): kept only inside a longer phrase.
_BARE_TEXT = """
    py python python3 pip bash sh shell git docker conda js javascript ts java c cpp go rust r sql json yaml
    csv txt md html ipynb notebook jupyter torch pytorch numpy pandas tf tensorflow sklearn
"""
BARE_TOKENS = frozenset(_BARE_TEXT.split())
# A phrase followed by one of these (or by a content word) in most of its occurrences is cut short: the texts go
# on with its object ("performed to locate" + "the ...") or its head noun ("the required end_plan" + "tag").
_BINDING_TEXT = "the a an its their this that these those his her our your my some any each every another such of to"
_BINDING_NEXT = frozenset(_BINDING_TEXT.split())
# A phrase may start on a negation when a content word follows ("not found error", "no module named x") and on
# an auxiliary when a negation follows ("did not use any tools").
_NEGATIONS = frozenset({"not", "no", "never", "without", "cannot"})
_AUXILIARY_TEXT = "do does did is are was were has have had can could would should will"
_AUXILIARIES = frozenset(_AUXILIARY_TEXT.split())


def _expand_negations(text: str) -> str:
    def expand(m: re.Match[str]) -> str:
        stem = m.group(1)
        return _IRREGULAR_NOT.get(stem.lower(), f"{stem} not")

    return _NOT.sub(expand, text)


def _words_of_clauses(text: str) -> list[list[str]]:
    """The words of each clause of `text`: quotes, paths and URLs removed, contractions of 'not' expanded."""
    cleaned = _QUOTES.sub(" ", _unpath(_uncite(_expand_negations(text))))
    return [_WORD.findall(clause) for clause in _CLAUSE.split(cleaned)]


def _may_start(low: list[str], i: int) -> bool:
    w = low[i]
    # "(not) ask the system", "(did not even) attempt to verify": never start just past a negation, dropping it
    if len(w) < 2 or any(x in _NEGATIONS for x in low[max(0, i - 2):i]):
        return False
    if w not in _EDGE_WORDS:
        return True
    nxt = low[i + 1] if i + 1 < len(low) else ""
    if w in _NEGATIONS:  # "404 Not Found", "without checking"; not "(does) not ask": that starts on its auxiliary
        prev = low[i - 1] if i else ""
        return bool(nxt) and nxt not in _EDGE_WORDS and len(nxt) > 1 and prev not in _AUXILIARIES
    return w in _AUXILIARIES and nxt in _NEGATIONS


def _occurrences(text: str, min_words: int = 2, max_words: int = 8) -> dict[str, tuple[str, bool]]:
    """Every run of `min_words`..`max_words` words inside one clause of `text` that neither starts nor ends on a
    filler word and holds no id-like word (three digits, or a long snake_case name such as a test function),
    lower-cased, mapped to its form in the text and whether its first occurrence ends where the text's words do
    (at a clause end, or before a word that does not bind to it: a preposition, a conjunction)."""
    out: dict[str, tuple[str, bool]] = {}
    for words in _words_of_clauses(text):
        low = [w.lower() for w in words]
        id_like = [_id_like(w) for w in words]
        for i in range(len(words)):
            if id_like[i] or not _may_start(low, i):
                continue
            for j in range(i + 1, min(i + max_words, len(words)) + 1):
                if id_like[j - 1]:  # spans grow one word at a time: no span from i holds an id past here
                    break
                last = low[j - 1]
                if j - i < min_words or last in _EDGE_WORDS or len(last) < 2:
                    continue
                nxt = low[j] if j < len(low) else None
                ends = nxt is None or (nxt in _FUNCTION_WORDS and nxt not in _BINDING_NEXT)
                key = " ".join(low[i:j])
                if key not in out:
                    out[key] = (" ".join(words[i:j]), ends)
    return out


def _topic_only(words: Sequence[str]) -> bool:
    """A phrase that only names what was involved ("page_down tool", "python script"): identifiers, tool and
    language tokens and the domain's nouns, with filler words between them."""
    return all(w in _EDGE_WORDS or w in _DOMAIN_NOUNS or w in BARE_TOKENS or "_" in w for w in words)


def _id_like(word: str) -> bool:
    return sum(ch.isdigit() for ch in word) >= 3 or word.count("_") >= 2 or len(word) > 30


def _document_frequency(texts: Sequence[str], limit: int = 200, forms: dict[str, Counter[str]] | None = None,
                        ends: Counter[str] | None = None) -> Counter[str]:
    """How many of `texts` say each phrase; `forms` collects the phrase's written forms, `ends` how many of
    the texts saying it end it where their words do."""
    counts: Counter[str] = Counter()
    for text in texts[:limit]:
        found = _occurrences(text)
        counts.update(found.keys())
        for low, (original, whole) in found.items():
            if forms is not None:
                forms.setdefault(low, Counter())[original] += 1
            if ends is not None and whole:
                ends[low] += 1
    return counts


def _whole(phrase: str, inside: Counter[str], ends: Counter[str]) -> float:
    """The share of the texts saying `phrase` that end it where their words do (1.0: never cut short)."""
    return ends.get(phrase, 0) / max(inside.get(phrase, 0), 1)


# A best phrase said by fewer than RARE of a type's insights names a few members; one said by COMMON or more
# says what the type is about.
RARE = 0.15
COMMON = 1 / 3


def best_phrase(texts: Sequence[str], contrast: Sequence[str] = (), *, limit: int = 200) -> str | None:
    """The phrase that most of `texts` (a type's insights, most central first) say and fewest of `contrast`
    (its neighbours' insights) say; longer phrases win ties of support, since they say more. Where that phrase
    is said by fewer than RARE of them and another by COMMON or more, the common one, as '<topic> failures'
    where it states no failure itself. None when no phrase is said by two or more insights (or by the only
    one)."""
    forms: dict[str, Counter[str]] = {}
    ends: Counter[str] = Counter()
    inside = _document_frequency(texts, limit, forms, ends)
    if not inside:
        return None
    outside = _document_frequency(contrast, limit)
    n_in = max(min(len(texts), limit), 1)
    n_out = max(min(len(contrast), limit), 1)
    least = 1 if n_in == 1 else 2
    best, best_score = None, 0.0
    failure, failure_score = None, 0.0  # the best phrase that states a failure, said by RARE or more
    for phrase, df in inside.items():
        if df < least:
            continue
        words = phrase.split()
        if all(w in _EDGE_WORDS or w in BARE_TOKENS for w in words):
            continue
        score = _score(phrase, df / n_in, outside.get(phrase, 0) / n_out, _whole(phrase, inside, ends))
        if score > best_score or (score == best_score and best is not None and len(phrase) > len(best)):
            best, best_score = phrase, score
        if df >= RARE * n_in and states_failure(phrase) and (
                score > failure_score or (score == failure_score and failure and len(phrase) > len(failure))):
            failure, failure_score = phrase, score
    if best is not None and failure is not None and not states_failure(best) and failure_score >= best_score / 2:
        best = failure  # a phrase that says what went wrong, nearly as telling, over one that names a topic
    if best is None:  # nothing sets the type apart in words: the phrase most of its insights say
        shared = [(df * (1.0 + 0.25 * min(len(p.split()), 4)), p) for p, df in inside.items() if df >= least
                  and not all(w in _EDGE_WORDS or w in BARE_TOKENS for w in p.split())]
        best = max(shared)[1] if shared else None
    if best is None:
        return None
    if inside[best] < RARE * n_in:
        # said by a few members only: it would name them, not the type. The phrase most members say (of those
        # said by a third or more) says what the type is about, as "<topic> failures" where it states no failure.
        common = [p for p, df in inside.items() if df >= COMMON * n_in and df >= least
                  and not all(w in _EDGE_WORDS or w in BARE_TOKENS for w in p.split())]
        if common:
            topic = max(common, key=lambda p: (_score(p, inside[p] / n_in, outside.get(p, 0) / n_out,
                                                      _whole(p, inside, ends)), p))
            topic = _extend(topic, inside, outside, n_out, ends)
            form = forms[topic].most_common(1)[0][0]
            return form if states_failure(form) else f"{form} failures"
    chosen = _extend(best, inside, outside, n_out, ends)
    form = forms[chosen].most_common(1)[0][0]
    # a phrase that only names what was involved ("page_down tool") is a topic: say so
    return f"{form} failures" if _topic_only(chosen.split()) and not states_failure(form) else form


def _score(phrase: str, support: float, support_outside: float, whole: float) -> float:
    """How well `phrase` names a group: its support inside minus outside, favouring longer phrases (up to four
    words), phrases that end where the texts' words do, and phrases that state a failure rather than only name
    what was involved."""
    words = phrase.split()
    score = (support - support_outside) * (1.0 + 0.25 * min(len(words), 4)) * (0.4 + 0.6 * whole)
    if any(w in CUES and w not in _WEAK_CUES for w in words):
        return score * 1.5
    return score * 0.5 if _topic_only(words) else score


def shared_phrase(groups: Sequence[Sequence[str]], contrast: Sequence[str] = (), exclude: Sequence[str] = (), *,
                  limit: int = 100) -> str | None:
    """The phrase that states what two or more of `groups` (a category's types' insights) have in common: said
    by at least a tenth (and two) of the insights of each of two or more groups, scored as `best_phrase` scores
    over all of them against `contrast` (the phase's other categories). Never one of `exclude` (the types' own
    names). None when no phrase is shared that way."""
    per_group: list[Counter[str]] = []
    forms: dict[str, Counter[str]] = {}
    ends: Counter[str] = Counter()
    for texts in groups:
        per_group.append(_document_frequency(texts, limit, forms, ends))
    inside: Counter[str] = Counter()
    for counts in per_group:
        inside.update(counts)
    outside = _document_frequency(contrast, limit * 2)
    n_in = max(sum(min(len(g), limit) for g in groups), 1)
    n_out = max(min(len(contrast), limit * 2), 1)
    taken = {e.lower() for e in exclude}
    best, best_score = None, 0.0
    for phrase, df in inside.items():
        words = phrase.split()
        if phrase in taken or all(w in _EDGE_WORDS or w in BARE_TOKENS for w in words):
            continue
        spread = sum(counts.get(phrase, 0) >= max(2, 0.1 * min(len(g), limit))
                     for counts, g in zip(per_group, groups, strict=True))
        if spread < 2:
            continue
        score = _score(phrase, df / n_in, outside.get(phrase, 0) / n_out, _whole(phrase, inside, ends))
        score *= 0.5 + 0.5 * spread / len(groups)
        if score > best_score or (score == best_score and best is not None and len(phrase) > len(best)):
            best, best_score = phrase, score
    return forms[best].most_common(1)[0][0] if best else None


def shared_word(groups: Sequence[Sequence[str]], contrast: Sequence[str] = (), *, limit: int = 100) -> str | None:
    """The content word (not a filler, tool or language token, identifier, verb form or exception class) that
    the most of `groups` say in at least a tenth (and two) of their insights, then the one said by the largest
    share of their insights beyond its share of `contrast` (the phase's other types' insights); None if no
    word is said so by two groups."""
    spread: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for texts in groups:
        counts: Counter[str] = Counter()
        for text in texts[:limit]:
            counts.update({w.lower() for clause in _words_of_clauses(text) for w in clause})
        total.update(counts)
        least = max(2, 0.1 * min(len(texts), limit))
        spread.update(w for w, n in counts.items() if n >= least)
    usable = [w for w, n in spread.items() if n >= 2 and category_word(w)]
    outside: Counter[str] = Counter()
    for text in contrast[: limit * 2]:
        outside.update({w.lower() for clause in _words_of_clauses(text) for w in clause})
    n_in = max(sum(min(len(g), limit) for g in groups), 1)
    n_out = max(min(len(contrast), limit * 2), 1)
    return max(usable, key=lambda w: (spread[w], total[w] / n_in - outside[w] / n_out, w)) if usable else None


def category_word(word: str) -> bool:
    """Whether `word` (lower-case) can head a category name '<word> failures': a content word, not a filler,
    one of the nouns every insight uses ('tool', 'step'; 'result' is kept), a tool or language token, an
    identifier, a cue, an exception class or a past participle ('accessed'); gerunds stay ('formatting')."""
    return (len(word) > 2 and word not in _EDGE_WORDS and word not in _GENERIC_NOUNS and word not in BARE_TOKENS
            and "_" not in word and not _id_like(word) and word not in CUES
            and not word.endswith(("error", "errors", "exception", "ed")))


def category_term(phrase: str) -> bool:
    """Whether `phrase` can stand before 'failures' in a category name: one to three words, each one that
    `category_word` accepts ('hidden test', not 'parse the output' or 'did not use any')."""
    words = phrase.lower().split()
    return 1 <= len(words) <= 3 and all(category_word(w) for w in words)


def states_failure(phrase: str) -> bool:
    """Whether `phrase` holds a word that says something went wrong."""
    return any(w in CUES and w not in _WEAK_CUES for w in phrase.lower().split())


def _extend(best: str, inside: Counter[str], outside: Counter[str], n_out: int,
            ends: Counter[str] | None = None) -> str:
    """The longest phrase containing `best` that most insights saying `best` also say (a verb gets its object:
    'failed to include' -> 'failed to include the required end_plan tag') and the neighbours say no more.
    A phrase the texts mostly cut short ('deviated from the planned') is completed by a longer one that ends
    where their words do, said by at least a third of them."""
    ends = ends if ends is not None else Counter()
    base = inside[best]
    padded = f" {best} "
    containing = [
        q for q, df in inside.items()
        if len(q) > len(best) and padded in f" {q} "
        and outside.get(q, 0) / n_out <= outside.get(best, 0) / n_out
    ]
    longer = [q for q in containing if inside[q] >= 0.6 * base]
    chosen = max([best, *longer], key=lambda q: (_whole(q, inside, ends) >= 0.5, inside[q], len(q.split()), q))
    if _whole(chosen, inside, ends) >= 0.5:
        return chosen
    whole = [q for q in containing if inside[q] >= base / 3 and _whole(q, inside, ends) >= 0.5]
    return max(whole, key=lambda q: (inside[q], -len(q.split()), q), default=best)


def dominant_signature(texts: Sequence[str], share: float = 0.5) -> str | None:
    """The exception class named by at least `share` of `texts`, or None."""
    sigs = Counter(s for s in (error_signature(t) for t in texts) if s)
    if not sigs:
        return None
    sig, n = sigs.most_common(1)[0]
    return sig if n >= share * len(texts) else None


def sentence_case(phrase: str) -> str:
    """Capitalise the first word unless it is an identifier (page_down, NotImplementedError)."""
    first = phrase.split(" ", 1)[0]
    if not first.replace("-", "").replace("'", "").isalpha() or any(ch.isupper() for ch in first[1:]):
        return phrase
    return phrase[0].upper() + phrase[1:]


def said_by(phrase: str, texts: Sequence[str]) -> int:
    """How many of `texts` hold `phrase` as a contiguous run of words (any case, any spacing between them)."""
    words = phrase.split()
    if not words:
        return 0
    pattern = re.compile(r"(?<!\w)" + r"\s+".join(map(re.escape, words)) + r"(?!\w)", re.IGNORECASE)
    return sum(bool(pattern.search(t)) for t in texts)


def keyword_phrase(texts: Sequence[str], keywords: Sequence[str]) -> str | None:
    """The top keyword of two or more words that the insights themselves say, word for word (two of them, or the
    only one), or None. A single keyword is a topic ('information'), and two keywords glued with 'and' ("abuse and
    abuse available", "information and access file") are a phrase no annotator wrote."""
    need = min(2, len(texts))
    return next((k for k in keywords if len(k.split()) > 1 and k.lower() not in BARE_TOKENS
                 and said_by(k, texts) >= need), None)


def failure_name(texts: Sequence[str], contrast: Sequence[str] = (), keywords: Sequence[str] = ()) -> str:
    """A short phrase that states the failure: the dominant error signature, if any, joined to the best
    contrastive phrase of the insights ("ModuleNotFoundError: no module named bio"); falls back to the top
    keywords when no phrase is shared."""
    phrase = best_phrase(texts, contrast)
    sig = dominant_signature(texts)
    if phrase is None:
        if sig:
            return f"{sig} raised"
        phrase = keyword_phrase(texts, keywords)
        if phrase is None:
            return ""  # no phrase to name it by: the readable-names check gives it its honest name
    if sig and sig.lower() not in phrase.lower():
        return f"{sig}: {phrase}"
    return sentence_case(phrase)
