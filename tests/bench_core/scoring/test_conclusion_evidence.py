"""Issue 38, "C from evidence": a conclusion's numbers must agree with the clean re-run, and a claim that contradicts
the reference's fails C (reproduction 5). Issue 49: only numbers a passing re-run produced count (a re-run that did not
pass supports none; without a re-run they are not scored). Real mini-suite tasks, real validator comparisons
(`compare_metrics`) for the re-run's rows."""

from __future__ import annotations

import json
import re
import time

import pytest

from failatlas.bench_core.scoring import JUDGES, JudgeInput, JudgeOptions
from failatlas.bench_core.scoring.checks.claims import contradictions
from failatlas.bench_core.scoring.checks.conclusion import judge_conclusion
from failatlas.bench_core.scoring.erules.base import compare_metrics
from failatlas.bench_core.scoring.erules.expected_outcome import from_expected_outcome
from failatlas.bench_core.scoring.records import Validation
from failatlas.bench_core.suites import load_suite
from failatlas.bench_core.tasks.model import RunSpec, TaskKind, TaskSpec

TASKS = {t.id: t for t in load_suite("failatlas-mini")}
WITH_CONCLUSION = [t for t in TASKS.values() if t.expected_conclusion]
REPRODUCTION_5 = (
    "No. Cross-validation selects alpha = 10, and the ridge model's test MSE (about 3.70) is not less than half that "
    "of ordinary least squares (about 10.19, against a noise floor of 1.0): with nearly as many features as samples "
    "least squares has very high variance, and a penalty chosen on held-out folds removes none of it.")


def _expected_values(task: TaskSpec) -> dict:
    values = {m.name: m.value for m in task.expected_results}
    if task.success is not None:
        values[task.success.metric] = task.success.oracle_values[0] if task.success.oracle_values \
            else task.success.value
    return values


def _rerun(task: TaskSpec, exit_code: int = 0, **observed: float | None) -> Validation:
    """What the validator stores for a re-run that wrote these results (the task's values, some replaced)."""
    results = {k: v for k, v in {**_expected_values(task), **observed}.items() if v is not None}
    ok, rows = compare_metrics(task, results if exit_code == 0 else {})
    return Validation("passed" if ok else ("wrong_value" if exit_code == 0 else "runtime_error"),
                      command="python3 run.py", exit_code=exit_code, metrics=rows)


# ----------------------------------------------------------------------------------------- reproduction 5

def test_reproduction_5_the_opposite_conclusion_fails():
    task = TASKS["mini-ridge-cv"]
    verdict = judge_conclusion(task, REPRODUCTION_5)
    assert verdict.passed is False and verdict.score == 0.0
    assert verdict.verdict["reference_score"] > 0.9  # what the overlap rule alone gave it
    kinds = {row["kind"] for row in verdict.verdict["contradictions"]}
    assert kinds == {"answer", "reversed", "negated"}
    assert "answers No where the reference answers Yes" in verdict.error_analysis
    assert "'not less' where the reference says 'less'" in verdict.error_analysis


@pytest.mark.parametrize("old,new,kind", [
    ("Yes.", "No.", "answer"),
    ("Yes.", "Hardly.", "answer"),  # a hedged No (red team of issue 38)
    ("Yes.", "Not really.", "answer"),
    ("is less than half", "is not less than half", "reversed"),
    ("is less than half", "is more than half", "reversed"),
    ("very high variance", "very low variance", "reversed"),
    ("removes much of it", "removes none of it", "negated"),
    ("removes much of it", "does not remove much of it", "negated"),
])
def test_each_flip_of_reproduction_5_fails_alone(old, new, kind):
    task = TASKS["mini-ridge-cv"]
    flipped = task.expected_conclusion.replace(old, new)
    assert flipped != task.expected_conclusion
    verdict = judge_conclusion(task, flipped)
    assert verdict.passed is False
    assert [row["kind"] for row in verdict.verdict["contradictions"]] == [kind]


@pytest.mark.parametrize("text", [
    "**Conclusion:** No. " + REPRODUCTION_5.removeprefix("No. "),
    "# Conclusion\n\nNo, " + REPRODUCTION_5.removeprefix("No. "),
    "It is not the case that the ridge model's test MSE (about 3.70) is less than half that of ordinary least "
    "squares (about 10.19).",
])
def test_the_opposite_finding_dressed_up_still_fails(text):
    task = TASKS["mini-ridge-cv"]
    assert contradictions(task.expected_conclusion, task.question, text)
    assert judge_conclusion(task, text).passed is False


def test_a_later_sentence_starting_with_no_is_no_answer():
    task = TASKS["mini-ridge-cv"]
    text = task.expected_conclusion.removeprefix("Yes. ") + " No other penalty was tried."
    assert judge_conclusion(task, text).passed


# -------------------------------------------------------------------------------------- numbers vs evidence

def test_about_0_58_fails_where_the_rerun_gave_0_50():
    task = TASKS["mini-imbalance-reweight"]
    verdict = judge_conclusion(task, task.expected_conclusion, _rerun(task, balanced_accuracy_unweighted=0.50))
    assert verdict.passed is False and verdict.score == 0.0
    # issue 49: a re-run that did not pass supports no number about a result, whatever the number
    assert verdict.verdict["evidence"] == "no passing re-run"
    wrong = [row for row in verdict.verdict["numbers"] if not row["ok"]]
    assert ("0.58", ["balanced_accuracy_unweighted"], "value") in [(row["stated"], row["metrics"], row["by"])
                                                                  for row in wrong]
    assert "states 0.58 about balanced_accuracy_unweighted, but the clean re-run did not pass (wrong_value)" in \
        verdict.error_analysis
    # where the re-run passed and gave 0.5805, the same 0.58 is a number it produced
    assert judge_conclusion(task, task.expected_conclusion, _rerun(task)).passed


def test_the_stated_precision_decides_what_agrees():
    """'about 3.70' admits the re-run's drift within the metric's tolerance, not 3.75; 'about 1.0' is no claim of
    0.92 either (prose rounding is capped at 5 % of the value)."""
    task = TASKS["mini-ridge-cv"]
    assert judge_conclusion(task, task.expected_conclusion, _rerun(task, test_mse_ridge_cv=3.6985)).passed
    drifted = judge_conclusion(task, task.expected_conclusion, _rerun(task, test_mse_ridge_cv=3.75))
    assert drifted.passed is False and "did not pass (wrong_value)" in drifted.error_analysis
    bf16 = TASKS["mini-mlp-bf16"]
    vague = bf16.expected_conclusion.replace("(both about 0.92)", "(test accuracy fp32 about 1.0, bf16 about 0.92)")
    verdict = judge_conclusion(bf16, vague, _rerun(bf16))
    assert verdict.passed is False
    assert any(row["stated"] == "1.0" and row["by"] == "name" and not row["ok"] for row in verdict.verdict["numbers"])


def test_a_number_named_by_its_clause_is_checked_against_that_metric():
    task = TASKS["mini-imbalance-reweight"]
    extra = task.expected_conclusion + " Without weighting, plain accuracy unweighted is 0.99."
    verdict = judge_conclusion(task, extra, _rerun(task))
    row = next(r for r in verdict.verdict["numbers"] if r["stated"] == "0.99")
    assert row["by"] == "name" and row["metrics"] == ["accuracy_unweighted"] and not row["ok"]
    assert verdict.passed is False
    bound = task.expected_conclusion + " Plain accuracy unweighted stays above 0.9."
    assert judge_conclusion(task, bound, _rerun(task)).passed  # a bound is no stated value


def test_a_number_of_several_metrics_is_about_the_one_its_clause_names():
    """Gold's 'alpha = 10' agrees with the expected values of selected_alpha and of test_mse_ols (10.19): its clause
    names alpha, so a re-run that selected alpha = 1000 (fault-wrong-constant) fails C."""
    task = TASKS["mini-ridge-cv"]
    verdict = judge_conclusion(task, task.expected_conclusion, _rerun(task, selected_alpha=1000.0))
    assert verdict.passed is False
    row = next(r for r in verdict.verdict["numbers"] if r["stated"] == "10")
    assert row["metrics"] == ["selected_alpha"] and row["ok"] is False


def test_a_claim_about_a_metric_the_rerun_did_not_produce_fails():
    task = TASKS["mini-ridge-cv"]
    verdict = judge_conclusion(task, task.expected_conclusion, _rerun(task, test_mse_ols=None))
    assert verdict.passed is False and "about test_mse_ols, but the clean re-run did not pass" in \
        verdict.error_analysis


def test_without_a_passing_rerun_no_number_is_supported_and_without_a_rerun_none_is_scored():
    """Issue 49: the expected values never stand in for a re-run (a stub with the reference's conclusion earned C)."""
    task = TASKS["mini-imbalance-reweight"]
    failed = _rerun(task, exit_code=1)
    verdict = judge_conclusion(task, task.expected_conclusion, failed)
    assert verdict.passed is False and verdict.verdict["evidence"] == "no passing re-run"
    assert "did not pass (runtime_error)" in verdict.error_analysis
    unjudged = judge_conclusion(task, task.expected_conclusion, None)  # a task with no clean re-run
    assert unjudged.passed and unjudged.verdict["evidence"] == "not checked"
    assert "not scored" in unjudged.verdict["result_claims"]


def test_numbers_and_direction_that_agree_pass():
    task = TASKS["mini-ridge-cv"]
    text = ("Yes: ridge wins. The penalty picked by cross-validation is alpha = 10. Ordinary least squares has a "
            "much higher test MSE (about 10.19) than the ridge model (about 3.70), more than twice as large, with a "
            "noise floor of 1.0. With nearly as many features as samples, least squares has very high variance; the "
            "penalty chosen on held-out folds removes much of it.")
    verdict = judge_conclusion(task, text, _rerun(task, test_mse_ridge_cv=3.6961, test_mse_ols=10.1905))
    assert verdict.passed, verdict.error_analysis
    assert verdict.verdict["evidence"] == "the clean re-run" and verdict.verdict["numbers_disagreeing"] == 0
    assert verdict.verdict["numbers_checked"] >= 3 and verdict.verdict["contradictions"] == []


def test_an_exp_bench_outcome_is_checked_against_the_numbers_its_rerun_printed():
    """EXP-Bench: the anchors are the expected outcome's numbers, observed as the validator matched them in the
    answer the agent's script printed (`from_expected_outcome`)."""
    outcome = "Yes. The pruned model keeps a top-1 accuracy of 76.1% while using 40.5% fewer parameters."
    task = TaskSpec(id="t-exp", benchmark="exp-bench", kind=TaskKind.T1, question="Does pruning keep accuracy?",
                    run=RunSpec(agent_script=True), expected_conclusion=outcome)
    for printed, passes in (('{"top1": 0.761, "params_saved": 40.5}', True),
                            ('{"top1": 0.701, "params_saved": 40.5}', False)):
        rows = from_expected_outcome(task, printed, "").metrics
        rerun = Validation("passed", command="bash .failatlas/run.sh", exit_code=0, metrics=rows)
        verdict = judge_conclusion(task, outcome, rerun)
        assert verdict.passed is passes and verdict.verdict["evidence"] == "the clean re-run", verdict.error_analysis
    assert "states 76.1%" in verdict.error_analysis


def test_no_number_and_no_contradiction_keeps_the_overlap_rule():
    task = TaskSpec(id="t-prose", benchmark="failatlas-mini", kind=TaskKind.MASKED_FUNCTIONS,
                    question="Does standardising the features help L2-regularised logistic regression?",
                    run=RunSpec(command="python3 run.py", results_file="results.json"),
                    expected_conclusion="Yes. Standardising helps, because the L2 penalty is not invariant to "
                                        "feature scale.")
    same = judge_conclusion(task, "Yes: standardising helps, because the L2 penalty is not invariant to feature "
                                  "scale.")
    assert same.passed and same.verdict["evidence"].startswith("none") and "reference_score" not in same.verdict
    off_topic = judge_conclusion(task, "Yes. The learning rate schedule mattered most for convergence speed.")
    assert off_topic.passed is False and off_topic.verdict["contradictions"] == []
    assert "content overlap" in off_topic.error_analysis


# ---------------------------------------------------------------------------------- gold, paraphrases, flips

@pytest.mark.parametrize("task", WITH_CONCLUSION, ids=lambda t: t.id)
def test_gold_conclusion_of_every_mini_task_passes(task):
    for validation in (None, _rerun(task) if (task.expected_results or task.success) else None):
        verdict = judge_conclusion(task, task.expected_conclusion, validation)
        assert verdict.passed, verdict.error_analysis
        assert verdict.verdict["contradictions"] == [] and verdict.verdict["numbers_disagreeing"] == 0
    if task.expected_results:
        assert verdict.verdict["evidence"] == "the clean re-run" and verdict.verdict["numbers_checked"] > 0


PARAPHRASES = {
    "mini-ridge-cv": "Ridge regression with its penalty chosen by cross-validation (alpha = 10) predicts held-out "
                     "data better than ordinary least squares: test MSE about 3.70 against about 10.19.",
    "mini-imbalance-reweight": (
        "Yes. Balanced accuracy goes from about 0.58 without weighting to about 0.78 with inverse-frequency "
        "weighting, since the unweighted model nearly always predicts the majority class. Plain accuracy is the "
        "price: it drops from about 0.95 to about 0.81, because the reweighted model accepts many false positives "
        "to detect many more positives."),
    "mini-kmeans-init": (
        "Yes. Uniform random seeding reaches the best clustering in only 10% of runs (3 of 30) with a mean final "
        "inertia of about 1308, while k-means++ seeding does so in 70% of runs (21 of 30) with a mean inertia of "
        "about 470, almost three times lower. Random seeding often places two centres in one blob, and Lloyd's "
        "iterations cannot move a centre across the empty space between well-separated blobs."),
    "mini-logreg-scaling": (
        "Yes. Without standardisation, the L2 penalty makes the large weights the tiny-scale informative features "
        "need too costly, and the model learns essentially nothing: test accuracy about 0.48, no better than the "
        "0.50 majority-class rate. With standardised features the same model reaches about 0.82, a change of more "
        "than 30 points: L2 regularisation is not invariant to feature scale."),
    "mini-mlp-bf16": (
        "No. Training under bf16 autocast does not change test accuracy in a meaningful way: both bf16 and fp32 "
        "training reach about 0.92, within about half a percentage point, much smaller than any difference that "
        "matters here, so mixed precision can be used without loss of accuracy."),
    "mini-tree-depth": (
        "Deeper trees fit the training labels better: training accuracy rises with depth and an unlimited tree "
        "memorises the flipped labels, reaching 1.0. Test accuracy is highest at a moderate depth (about 0.76 at "
        "depth 4, close to the roughly 0.8 ceiling the label noise allows) and falls to about 0.66 for an unlimited "
        "tree. The train-test gap grows from about zero at depths 1-2 to about 0.34 unpruned: beyond depth 4 "
        "deeper trees fit noise and do worse on held-out data."),
}
CONTRADICTIONS = [
    ("mini-ridge-cv", "Ridge's test MSE (about 3.70) is greater than that of ordinary least squares (about 10.19).",
     "reversed"),
    ("mini-ridge-cv", "Ridge regression with a cross-validated penalty does not predict held-out data better than "
                      "ordinary least squares.", "reversed"),
    ("mini-ridge-cv", "Ordinary least squares predicts held-out data better than ridge regression.", "reversed"),
    # red team (issue 38): the reference's words and numbers, then the opposite finding in words the cues lacked
    ("mini-ridge-cv", "Cross-validation selects alpha = 10, and the ridge model's test MSE (about 3.70) looks small "
                      "next to that of ordinary least squares (about 10.19), yet this is an artefact. Ridge regression "
                      "with the penalty chosen by cross-validation is the poorer predictor of held-out data and lags "
                      "ordinary least squares, which should be preferred.", "reversed"),
    ("mini-ridge-cv", "Ridge regression with a cross-validated penalty is the weaker predictor of held-out data.",
     "reversed"),
    ("mini-imbalance-reweight", "Inverse-frequency weighting does not improve the balanced accuracy of logistic "
                                "regression.", "reversed"),
    ("mini-imbalance-reweight", "Inverse-frequency weighting lowers balanced accuracy from about 0.58 to about "
                                "0.78.", "reversed"),
    ("mini-kmeans-init", "k-means++ seeding reaches a higher final inertia than uniform random seeding.", "reversed"),
    ("mini-logreg-scaling", "No. Standardising the features leaves the test accuracy where it was.", "answer"),
    ("mini-mlp-bf16", "Training under bf16 autocast changes the test accuracy compared with fp32 training.",
     "negated"),
    ("mini-mlp-bf16", "Yes, bf16 autocast training reaches test accuracy within half a point of fp32.", "answer"),
    ("mini-tree-depth", "The gap between training and test accuracy shrinks from about zero at depths 1-2 to about "
                        "0.34 unpruned.", "reversed"),
    ("mini-tree-depth", "Beyond depth 4 deeper trees fit noise yet do better on held-out data.", "reversed"),
]
ANTONYMS = {"less": "greater", "lower": "higher", "higher": "lower", "smaller": "larger", "more": "fewer",
            "below": "above", "high": "low", "worse": "better", "raises": "lowers", "rises": "falls",
            "falls": "rises", "grows": "shrinks"}


@pytest.mark.parametrize("task_id", sorted(PARAPHRASES))
def test_paraphrases_of_the_reference_contradict_nothing(task_id):
    task = TASKS[task_id]
    assert contradictions(task.expected_conclusion, task.question, PARAPHRASES[task_id]) == []
    if task_id != "mini-ridge-cv":  # that one is too short for the overlap rule, which is unchanged
        verdict = judge_conclusion(task, PARAPHRASES[task_id], _rerun(task) if task.expected_results else None)
        assert verdict.passed, verdict.error_analysis


@pytest.mark.parametrize("task_id,text,kind", CONTRADICTIONS, ids=lambda x: x if len(x) < 30 else x[:30])
def test_contradictions_in_other_words_fail(task_id, text, kind):
    task = TASKS[task_id]
    found = contradictions(task.expected_conclusion, task.question, text)
    assert [row["kind"] for row in found][:1] == [kind], found


def _flips():
    for task in WITH_CONCLUSION:
        for m in re.finditer(r"\b[a-z]+\b", task.expected_conclusion):
            if m.group() in ANTONYMS:
                text = task.expected_conclusion
                yield task.id, m.group(), text[:m.start()] + ANTONYMS[m.group()] + text[m.end():]


@pytest.mark.parametrize("task_id,word,text", list(_flips()), ids=lambda x: x if len(x) < 30 else "")
def test_every_reversed_cue_of_every_reference_fails_c(task_id, word, text):
    task = TASKS[task_id]
    verdict = judge_conclusion(task, text)
    assert verdict.passed is False
    assert [row["kind"] for row in verdict.verdict["contradictions"]] == ["reversed"], word


def test_the_judge_reads_the_runs_validation_and_stays_bounded():
    task = TASKS["mini-imbalance-reweight"]
    judge = JUDGES.create("conclusion-reference", options=JudgeOptions())
    wrong = _rerun(task, balanced_accuracy_unweighted=0.50)
    [verdict] = judge(JudgeInput(task=task, outputs={"conclusion": task.expected_conclusion}, validation=wrong))
    assert verdict.passed is False and verdict.verdict["evidence"] == "no passing re-run"
    # the reference's words and cues without a sentence end (a unit that long once took 19 s: windows are
    # quadratic in a unit's length, so units are cut), and numbers in one clause
    for hostile in (("inverse frequency weighting does not raise balanced accuracy lower higher 0.58 " * 3000),
                    "balanced accuracy unweighted " + " ".join(f"{i / 100:.2f}" for i in range(20000))):
        start = time.process_time()  # this process's CPU: a machine busy with other work does not move it much
        verdict = judge_conclusion(task, hostile[:200_000], wrong)
        assert verdict.passed is False and time.process_time() - start < 5


def test_on_real_exp_bench_outcomes_a_reversed_cue_fails_and_the_outcome_itself_passes(shared_data):
    """The 206 expected outcomes of EXP-Bench's ICLR 2024 papers: none contradicts itself or the next outcome of its
    paper list; of every single cue reversed (`lower` for `higher`, `degraded` for `improved`, ...), at least 95 %
    are found (261 of 267 when written; the rest sit in hedges such as `higher, lower, or similar`)."""
    swap = {"less": "more", "more": "less", "lower": "higher", "higher": "lower", "smaller": "larger",
            "larger": "smaller", "below": "above", "above": "below", "worse": "better", "better": "worse",
            "improves": "hurts", "increases": "decreases", "decreases": "increases", "increase": "decrease",
            "outperforms": "underperforms", "improved": "degraded", "improvement": "degradation",
            "reduced": "increased"}
    outcomes = [(q.get("question"), q["expected_outcome"])
                for path in sorted((shared_data / "expbench" / "iclr2024").glob("*.json"))
                for q in json.loads(path.read_text()).get("questions", [])
                if isinstance(q.get("expected_outcome"), str)]
    assert len(outcomes) > 200
    assert not [o for q, o in outcomes if contradictions(o, q, o)]
    assert not [o2 for (q1, o1), (_, o2) in zip(outcomes, outcomes[1:], strict=False) if contradictions(o1, q1, o2)]
    found = total = 0
    for question, outcome in outcomes:
        for m in re.finditer(r"\b[a-z]+\b", outcome):
            if m.group() in swap:
                total += 1
                found += bool(contradictions(outcome, question, outcome[:m.start()] + swap[m.group()]
                                             + outcome[m.end():]))
    assert total > 250 and found >= 0.95 * total, (found, total)


# ------------------------------------------------------------------------------------ swapped subjects (issue 38)

SWAPPED = [
    "Yes. Cross-validation selects alpha = 10. Ridge's test MSE is 10.19 and OLS's test MSE is 3.70, so the "
    "penalty changes the error by more than half.",
    "Yes. Cross-validation selects alpha = 10; the test MSE of ridge is about 10.19, while ordinary least squares "
    "(OLS) reaches a test MSE of 3.70.",
]
HONEST = [
    "Yes. Cross-validation selects alpha = 10. Ridge's test MSE is 3.70 and OLS's test MSE is 10.19, less than "
    "half with the penalty.",
    "Yes. Cross-validation selects alpha = 10, and the test MSE drops from 10.19 (OLS) to 3.70 (ridge), less than "
    "half: least squares has very high variance and the penalty removes much of it.",
    "Yes. Compared with OLS, ridge's test MSE is 3.70 against 10.19: less than half, alpha = 10.",
]


@pytest.mark.parametrize("text", SWAPPED)
def test_numbers_stated_about_the_wrong_subject_fail(text):
    """Each number matches some expected value, but the one its sentence names right before it is the other's."""
    task = TASKS["mini-ridge-cv"]
    verdict = judge_conclusion(task, text, _rerun(task))
    assert verdict.passed is False, verdict.verdict
    bad = [row for row in verdict.verdict["numbers"] if not row["ok"]]
    assert bad and all(row["by"] == "name" for row in bad)


@pytest.mark.parametrize("text", HONEST)
def test_numbers_stated_about_the_right_subject_pass(text):
    task = TASKS["mini-ridge-cv"]
    verdict = judge_conclusion(task, text, _rerun(task))
    assert all(row["ok"] for row in verdict.verdict.get("numbers", [])), verdict.verdict["numbers"]


# ------------------------------------------------------------------- issue 49, the second round of attacks on C

PERTURBED = ("Yes. Cross-validation selects a penalty of 10.04. The ridge model's test MSE (about 3.718) is less "
             "than half that of ordinary least squares (about 10.232, against a noise floor of 1.0): with nearly as "
             "many features as samples least squares has very high variance, and a penalty chosen on held-out folds "
             "removes much of it.")


def test_numbers_near_the_references_are_claims_about_its_metrics():
    """A stub whose re-run crashed, with the reference's conclusion and its numbers nudged off their value (so no
    value or name ties them to a metric), earned C 0.98: they are claims about the metrics the reference's numbers
    report, unsupported without a passing re-run and wrong beside the values a passing one produced."""
    task = TASKS["mini-ridge-cv"]
    crashed = judge_conclusion(task, PERTURBED, _rerun(task, exit_code=1))
    assert crashed.passed is False and crashed.score == 0.0
    assert {m for row in crashed.verdict["numbers"] for m in row["metrics"]} >= {"test_mse_ridge_cv", "test_mse_ols"}
    assert all(row["ok"] is False for row in crashed.verdict["numbers"] if row["by"] == "reference")
    passing = judge_conclusion(task, PERTURBED, _rerun(task, test_mse_ridge_cv=3.6953, test_mse_ols=10.1878))
    assert passing.passed is False and "the clean re-run gave" in passing.error_analysis
    honest = PERTURBED.replace("3.718", "3.70").replace("10.232", "10.19").replace("10.04", "10")
    fine = judge_conclusion(task, honest, _rerun(task, test_mse_ridge_cv=3.6961, test_mse_ols=10.1905))
    assert fine.passed, fine.error_analysis


_GOLD_RIDGE = TASKS["mini-ridge-cv"].expected_conclusion


@pytest.mark.parametrize("text", [
    *(opening + " " + _GOLD_RIDGE.removeprefix("Yes. ") for opening in (
        "Answer — no.", "Answer: no.", "Not in our run.", "The answer is false.", "The hypothesis is rejected.",
        "Our hypothesis was refuted.")),  # the second round's openings
    *(_GOLD_RIDGE + " " + added for added in (
        "My answer is no.", "Definitely not.", "Of course not.", "No way.", "So the answer turns out to be no.",
        "Overall we would answer the question in the negative.")),  # the third round's endings
])
def test_more_forms_of_a_no_answer_fail(text):
    task = TASKS["mini-ridge-cv"]
    verdict = judge_conclusion(task, text, _rerun(task))
    assert verdict.passed is False
    assert [row["kind"] for row in verdict.verdict["contradictions"]] == ["answer"]


@pytest.mark.parametrize("text", [
    "The answer is true. " + TASKS["mini-ridge-cv"].expected_conclusion.removeprefix("Yes. "),
    "Not all folds agreed on the penalty, but " + TASKS["mini-ridge-cv"].expected_conclusion,
])
def test_agreeing_forms_stay_agreeing(text):
    task = TASKS["mini-ridge-cv"]
    verdict = judge_conclusion(task, text, _rerun(task))
    assert verdict.verdict["contradictions"] == [], verdict.verdict["contradictions"]


@pytest.mark.parametrize("old,new", [
    ("is less than half", "is hardly less than half"),
    ("is less than half", "is scarcely less than half"),
])
def test_hardly_negates_the_comparison(old, new):
    task = TASKS["mini-ridge-cv"]
    verdict = judge_conclusion(task, task.expected_conclusion.replace(old, new), _rerun(task))
    assert verdict.passed is False and [r["kind"] for r in verdict.verdict["contradictions"]] == ["reversed"]


def test_wins_and_loses_are_a_comparison_of_quality():
    task = TASKS["mini-ridge-cv"]
    reference = "Ridge regression predicts held-out data better than ordinary least squares."
    assert contradictions(reference, task.question, "Ordinary least squares wins: ridge regression predicts "
                          "held-out data worse.")
    assert not contradictions(reference, None, "Ridge regression wins against ordinary least squares on held-out "
                              "data.")


# -------------------------------------------------------------------- issue 49, the third round of attacks on C

@pytest.mark.parametrize("added", [
    "Ridge's test MSE is 2.76 times lower than OLS's.",
    "Ridge cuts the test MSE of OLS by 63.7%.",
    "On the held-out folds the ridge model's mean validation MSE was 3.41.",
    "OLS's training MSE is 0.09.",
    "The noise floor corresponds to a test MSE of 1.0.",
])
def test_numbers_about_other_quantities_are_not_results(added):
    """A ratio, an amount of change, a value on another split of the data, or a number the reference states about
    no result is no claim about a metric: an honest conclusion that adds one passes."""
    task = TASKS["mini-ridge-cv"]
    verdict = judge_conclusion(task, task.expected_conclusion + " " + added,
                               _rerun(task, test_mse_ridge_cv=3.6961, test_mse_ols=10.1905))
    assert verdict.passed, verdict.error_analysis



@pytest.mark.parametrize("text", [
    "Test MSE: OLS 3.70, ridge 10.19 (noise floor 1.0). Cross-validation selects alpha = 10.",
    "- OLS test MSE: 3.70\n- ridge model test MSE: 10.19\n- alpha = 10",
])
def test_results_swapped_in_a_list_or_after_a_label_fail(text):
    task = TASKS["mini-ridge-cv"]
    verdict = judge_conclusion(task, task.expected_conclusion + "\n" + text, _rerun(task))
    assert verdict.passed is False, verdict.verdict["numbers"]
    honest = text.replace("3.70", "X").replace("10.19", "3.70").replace("X", "10.19")
    fine = judge_conclusion(task, task.expected_conclusion + "\n" + honest, _rerun(task))
    assert fine.passed, fine.error_analysis


def test_a_double_negation_agrees():
    task = TASKS["mini-ridge-cv"]
    text = task.expected_conclusion + " It is not true that ridge fails to predict held-out data better."
    assert contradictions(task.expected_conclusion, task.question, text) == []
