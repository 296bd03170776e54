"""EXP-Bench importer: the 25 real ICLR 2024 files, their documented defects, and variants of them."""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path

import pytest

from failatlas.bench_core.tasks import TASK_IMPORTERS, TaskKind
from failatlas.bench_core.tasks.importers._common import warning_code
from failatlas.bench_core.tasks.importers.expbench import paper_id_from_name
from failatlas.core.errors import InputError

KNOWN_CODES = {
    "missing-design",
    "alt-design",
    "wrapped-field",
    "design-extra-keys",
    "fenced-json",
    "unparsed-field",
    "method-dict",
    "relative-path",
    "unmaskable-path",
    "unknown-keys",
    "kind-empty-masked",
    "kind-conflict",
    "kind-guess",
    "missing-method",
    "missing-conclusion",
    "bad-field-type",
    "duplicate-question",
    "index",
    "no-repository",
    "gpus-guessed",
    "gpus-unknown",
}


@pytest.fixture(scope="module")
def real_tasks(iclr2024: Path):
    files = sorted(iclr2024.glob("*.json"))
    assert len(files) == 25
    return [t for f in files for t in TASK_IMPORTERS.load(f, "expbench").records]


def _where(tasks, code: str) -> set[tuple[str, int]]:
    return {
        (t.paper.id, t.extra["question_index"])
        for t in tasks
        if any(warning_code(w) == code for w in t.warnings)
    }


def test_all_206_tasks_import_with_a_kind_each(real_tasks):
    assert len(real_tasks) == 206
    assert Counter(t.kind for t in real_tasks) == {TaskKind.T1: 97, TaskKind.T2: 55, TaskKind.T3: 54}
    assert len({t.id for t in real_tasks}) == 206
    assert {t.benchmark for t in real_tasks} == {"expbench"}
    assert {(t.paper.venue, t.paper.year) for t in real_tasks} == {("ICLR", 2024)}
    assert Counter(t.paper.id for t in real_tasks)["18277"] == 7


def test_kinds_follow_the_fields_of_the_source(real_tasks, iclr2024: Path):
    raw = {p.stem: json.loads(p.read_text())["questions"] for p in iclr2024.glob("*.json")}
    for t in real_tasks:
        q = raw[t.paper.id][t.extra["question_index"]]
        assert t.question == q["question"].strip()
        if t.kind == TaskKind.T1:
            assert "masked_source" in q and t.masking.files
            assert t.implementation.requirements == q["requirements"]
        elif t.kind == TaskKind.T2:
            assert "mode" in q and "masked_source" not in q
            assert len(t.masking.files) == len(q["source"])
        else:
            assert "no_answer" in q and not t.masking.files
            assert t.implementation.method_notes == t.method
            assert t.extra["no_answer"] == q["no_answer"]
        assert "README.md" in t.masking.remove_also


def test_every_warning_has_a_known_code_and_lands_on_the_right_tasks(real_tasks):
    codes = Counter(warning_code(w) for t in real_tasks for w in t.warnings)
    assert set(codes) <= KNOWN_CODES
    assert _where(real_tasks, "missing-design") == {("18277", i) for i in range(2, 7)}
    assert _where(real_tasks, "wrapped-field") == (
        {("18013", i) for i in range(6)}
        | {("18277", 0), ("18277", 1)}
        | {("19128", i) for i in (0, 1, 2, 3, 4, 6, 7)}
    )
    assert _where(real_tasks, "method-dict") == {("19044", 0), ("19044", 4)}
    assert _where(real_tasks, "relative-path") == {("19269", 0)}
    assert _where(real_tasks, "unknown-keys") == (
        {("17595", 8), ("19292", 3)} | {("19044", i) for i in range(5)}
    )
    assert codes == {
        "index": 206,  # the index beside iclr2024/ was found: every task says so
        "wrapped-field": 15,
        "gpus-guessed": 11,
        "unknown-keys": 7,
        "missing-design": 5,
        "method-dict": 2,
        "relative-path": 2,
    }
    assert {p for p, _ in _where(real_tasks, "gpus-guessed")} == {"17666", "19209"}


def test_defects_are_repaired_and_nothing_is_lost(real_tasks):
    by_key = {(t.paper.id, t.extra["question_index"]): t for t in real_tasks}
    for i in range(2, 7):
        assert by_key[("18277", i)].design is None
        assert "design" not in by_key[("18277", i)].judgeable_phases
    wrapped = by_key[("18013", 0)]
    assert wrapped.design is not None and wrapped.design.variable_names()
    assert set(wrapped.extra["design_ambiguity"]) == {"ambiguous_variables", "possible_modifications"}
    structured = by_key[("19044", 0)]
    assert isinstance(structured.method, str) and "task_setup" in structured.method
    assert set(structured.extra["method_structured"]) == {
        "task_setup",
        "controlled_conditions",
        "evaluation_strategy",
    }
    assert "experiment_design_complexity" in structured.extra
    relative = by_key[("19269", 0)]
    assert "examples/musc.py" in relative.masking.files
    assert relative.extra["paths_as_given"]["masked_source"][-1] == "workspace/examples/musc.py"
    stray = by_key[("17595", 8)]
    assert stray.extra["related_tables"][0] == "Table 4" and "related_figures" in stray.extra
    assert all(not p.startswith("/") for t in real_tasks for p in t.masking.files)
    assert by_key[("17388", 0)].extra["file"]["main_takeaways"]


def test_paper_id_comes_from_the_file_name():
    assert paper_id_from_name(Path("18277.json")) == "18277"
    assert paper_id_from_name(Path("18277_complete_final_sonnet37.json")) == "18277"
    assert paper_id_from_name(Path("94321_complete_final.json")) == "94321"


def test_ids_do_not_depend_on_question_order(iclr2024: Path, write_json):
    data = json.loads((iclr2024 / "19610.json").read_text())
    original = {t.id: t.question for t in TASK_IMPORTERS.load(iclr2024 / "19610.json", "expbench").records}
    shuffled = dict(data, questions=list(reversed(data["questions"])))
    moved = write_json("neurips2024/19610.json", shuffled)
    reordered = {t.id: t.question for t in TASK_IMPORTERS.load(moved, "expbench").records}
    assert reordered == original


def _one_task(iclr2024: Path, paper: str, index: int) -> dict:
    return copy.deepcopy(json.loads((iclr2024 / f"{paper}.json").read_text())["questions"][index])


def test_unseen_variants_of_the_defects_are_handled(iclr2024: Path, write_json):
    """Defects the README lists that the ICLR half does not show: the NeurIPS half must still import."""
    t1 = _one_task(iclr2024, "17595", 0)
    fenced = dict(t1, design_complexity="```json\n" + json.dumps(t1["design_complexity"]) + "\n```")
    fenced["experiment_constraints"] = json.dumps(t1["experiment_constraints"])
    fenced["masked_source"] = [*t1["masked_source"], "/tmp/repos/Other/train.py"]
    fenced["reproduction_steps"] = ["run it"]
    method_json = dict(_one_task(iclr2024, "17595", 1))
    method_json["method"] = '```json\n{"steps": ["a", "b"]}\n```'
    method_json["design_complexity"] = {
        "design_complexity": method_json["design_complexity"],
        "design_ambiguity": {"ambiguous_variables": {"x": "unclear"}},
    }
    method_json.pop("design_ambiguity", None)
    singular = _one_task(iclr2024, "19044", 0)
    singular.pop("design_complexity")
    tasks = TASK_IMPORTERS.load(write_json(
            "neurips2024/31337_complete_final.json",
            {"questions": [fenced, method_json, singular], "new_top_key": 1},
        ), "expbench").records
    a, b, c = tasks
    assert {t.paper.id for t in tasks} == {"31337"} and a.paper.venue == "NeurIPS"

    codes_a = {warning_code(w) for w in a.warnings}
    assert {"fenced-json", "unmaskable-path", "unknown-keys"} <= codes_a
    assert a.design is not None and a.design.constant
    assert isinstance(a.extra["experiment_constraints"], dict)
    assert "/tmp/repos/Other/train.py" in a.extra["unmaskable_paths"]["masked_source"]
    assert all(not f.startswith("/") for f in a.masking.files) and len(a.masking.files) == len(
        t1["masked_source"]
    )
    assert a.extra["reproduction_steps"] == ["run it"] and a.extra["file"] == {"new_top_key": 1}

    codes_b = {warning_code(w) for w in b.warnings}
    assert {"fenced-json", "method-dict", "wrapped-field"} <= codes_b
    assert b.extra["method_structured"] == {"steps": ["a", "b"]}
    assert b.extra["design_ambiguity"] == {"ambiguous_variables": {"x": "unclear"}}
    assert b.design is not None and b.design.independent

    assert "alt-design" in {warning_code(w) for w in c.warnings}
    assert c.design is not None and c.design.independent == {
        "method": ["Text2Video-Zero", "Tune-A-Video", "AnimateDiff (with MotionLoRA)"]
    }


def test_kinds_of_odd_tasks_are_guessed_with_a_warning(write_json):
    tasks = TASK_IMPORTERS.load(write_json(
            "x.json",
            {
                "questions": [
                    {"question": "How can you train it?", "method": "m", "source": ["/workspace/train.py"]},
                    {"question": "Does it work?", "method": "m", "expected_outcome": "yes"},
                    {"question": "Q", "masked_source": [], "source": ["/workspace/a.py"], "mode": "A"},
                    {
                        "question": "R",
                        "masked_source": ["/tmp/repos/X/a.py"],
                        "source": ["/tmp/repos/X/a.py"],
                    },
                ]
            },
        ), "expbench").records
    assert [t.kind for t in tasks] == [TaskKind.T2, TaskKind.T3, TaskKind.T2, TaskKind.T1]
    assert tasks[3].masking.files == [] and "unmaskable-path" in {warning_code(w) for w in tasks[3].warnings}
    assert tasks[3].extra["unmaskable_paths"] == {
        "source": ["/tmp/repos/X/a.py"],
        "masked_source": ["/tmp/repos/X/a.py"],
    }
    assert "kind-guess" in {warning_code(w) for w in tasks[0].warnings}
    assert "kind-empty-masked" in {warning_code(w) for w in tasks[2].warnings}
    assert "missing-conclusion" in {warning_code(w) for w in tasks[0].warnings}


@pytest.mark.parametrize(
    ("raw", "data", "field", "line"),
    [
        ('{"questions": [\n{"question": "a",}\n]}', None, None, 2),
        (None, {"main_takeaways": []}, "questions", None),
        (None, {"questions": {"0": {}}}, "questions", None),
        (
            None,
            {"questions": [{"question": "fine"}, {"method": "no question"}]},
            "questions[1].question",
            None,
        ),
        (None, {"questions": [{"question": "   "}]}, "questions[0].question", None),
    ],
)
def test_malformed_files_name_the_file_and_field(write_json, raw, data, field, line):
    path = write_json("bad.json", data, raw=raw)
    with pytest.raises(InputError) as err:
        TASK_IMPORTERS.load(path, "expbench")
    assert err.value.path == str(path)
    assert err.value.field == field
    assert err.value.line == line
    assert str(path) in str(err.value)


def test_a_sibling_never_overwrites_a_field_of_the_task(write_json):
    task = {
        "question": "Does it help?",
        "design_ambiguity": {"own": 1},
        "design_complexity": {
            "design_complexity": {"independent_variables": {"lr": [0.1, 0.01]}},
            "design_ambiguity": {"sibling": 2},
        },
        "experiment_constraints": {"experiment_constraints": {"c": 1}, "random_uncertainty": {"sib": 3}},
        "random_uncertainty": {"own": 4},
    }
    (t,) = TASK_IMPORTERS.load(write_json("x.json", {"questions": [task]}), "expbench").records
    assert t.design.independent == {"lr": [0.1, 0.01]}
    assert t.extra["design_ambiguity"] == {"own": 1}
    assert t.extra["design_complexity.design_ambiguity"] == {"sibling": 2}
    assert t.extra["experiment_constraints"] == {"c": 1}
    assert t.extra["random_uncertainty"] == {"own": 4}
    assert t.extra["experiment_constraints.random_uncertainty"] == {"sib": 3}


def test_neurips_shaped_files_import_without_spurious_warnings(iclr2024: Path, write_json):
    """The NeurIPS half names files `<id>_complete_final_with_difficulty_level.json` and adds, per task,
    `paper_id` and a `difficulty_level` object: fields of the format, not stray keys."""
    task = _one_task(iclr2024, "17666", 0)
    task["paper_id"] = "93022"
    task["difficulty_level"] = {"difficulty_analysis": {"core_count": 1}, "complexity_score": 33}
    other = dict(_one_task(iclr2024, "17666", 1), paper_id="93023")
    path = write_json(
        "neurips2024/93022/93022_complete_final_with_difficulty_level.json", {"questions": [task, other]}
    )
    index = path.parents[2] / "neurips2024_index.jsonl"
    index.write_text("\n".join(json.dumps({"id": i, "code_url": f"https://github.com/o/{i}", "reproduce_difficulty":
                                            {"resource_requirements": {"GPUs": {"amount": 2}}}})
                               for i in ("93022", "93023")))
    first, second = TASK_IMPORTERS.load(path, "expbench", {"index": index}).records
    assert (first.paper.id, first.paper.venue, first.paper.year) == ("93022", "NeurIPS", 2024)
    assert first.id.startswith("expbench-93022-")
    assert first.warnings == []
    assert (first.repository.url, first.resources.gpus) == ("https://github.com/o/93022", 2)
    assert first.extra["difficulty_level"]["complexity_score"] == 33
    assert second.paper.id == "93023" and second.id.startswith("expbench-93023-")
    assert [warning_code(w) for w in second.warnings] == ["paper-id-mismatch"]
    assert second.repository.url == "https://github.com/o/93023"
    found = TASK_IMPORTERS.load(path, "expbench").records  # the same index, found beside neurips2024/
    assert [[warning_code(w) for w in t.warnings] for t in found] == [["index"], ["paper-id-mismatch", "index"]]
