"""What the validator reads from a re-run without a sandbox: the printed JSON answer (AutoExperiment), and the
numbers of EXP-Bench's expected outcomes (read in place from the real task files) matched against an output."""

from __future__ import annotations

import json
import time

import pytest

from failatlas.bench_core.scoring.answers import flatten, last_json_object, observed, printed_answer
from failatlas.bench_core.scoring.outcome_numbers import expected_numbers, match_numbers


def test_the_last_json_object_is_found_in_free_text():
    text = ('loading {cfg} ...\nepoch 1 {"loss": 0.9}\n'
            'Final answer: {"Experiment 1": {"acc": 0.81, "f1": [0.7, 0.6]}, "Experiment 2": 0.5} -- done\n')
    assert last_json_object(text) == {"Experiment 1": {"acc": 0.81, "f1": [0.7, 0.6]}, "Experiment 2": 0.5}
    assert last_json_object('{"a": 1}\nthen a broken one {"b": 2') == {"a": 1}
    assert last_json_object("an apostrophe's {\"a\": {\"b\": 1}} and it's fine") == {"a": {"b": 1}}
    assert last_json_object('{"text": "a } inside a string", "v": 2}') == {"text": "a } inside a string", "v": 2}
    assert last_json_object("no answer here, 0.87") is None
    assert last_json_object("") is None and last_json_object(None) is None


def test_python_dict_reprs_are_read_as_literals_only():
    assert last_json_object("result: {'Experiment 1': {'acc': 0.5}, 'ok': True}") == {
        "Experiment 1": {"acc": 0.5}, "ok": True}
    # an expression is not a literal: it is never evaluated
    assert last_json_object("{'a': __import__('os').system('echo owned')}") is None
    assert last_json_object("{'a': 2**1000000}") is None


def test_a_hostile_output_costs_bounded_time():
    floods = ["{" * 500_000, '{"a": ' * 200_000, "{'x': 1} " + "{" * 300_000 + "}" * 300_000,
              ('{"a": [' * 3000) + ("]}" * 3000)]
    for text in floods:
        start = time.monotonic()
        last_json_object(text)
        assert time.monotonic() - start < 10, text[:20]


def test_answers_flatten_to_the_importers_metric_names():
    assert flatten({"Experiment 1": 0.87, "Experiment 2": {"acc": 0.8, "f1": [0.7, "0.6"]}}) == {
        "Experiment 1": 0.87, "Experiment 2.acc": 0.8, "Experiment 2.f1[0]": 0.7, "Experiment 2.f1[1]": 0.6}
    results = {"experiment 1.IIF": 0.1, "Experiment 2.IIF[0]": 0.2, "Experiment 3.acc": 1.0}
    names = ["Experiment 1.IIF[0]", "Experiment 2.IIF", "Experiment 3.acc", "Experiment 4.acc"]
    assert observed(results, names) == {"Experiment 1.IIF[0]": 0.1, "Experiment 2.IIF": 0.2,
                                        "Experiment 3.acc": 1.0}


def test_per_experiment_sections_make_the_answer_when_no_object_names_them():
    stdout = ("Experiment 1\nlog line {\"step\": 1}\n{\"acc\": 0.5}\nExperiment 2\n{\"acc\": 0.7}\n")
    assert printed_answer(stdout, {"Experiment 1", "Experiment 2"}) == {
        "Experiment 1.acc": 0.5, "Experiment 2.acc": 0.7}
    whole = 'Experiment 1\n{"acc": 0.1}\n{"Experiment 1": {"acc": 0.9}}'
    assert printed_answer(whole, {"Experiment 1"}) == {"Experiment 1.acc": 0.9}
    assert printed_answer("42\n", {"Experiment 1"}) is None and printed_answer(None, {"Experiment 1"}) is None
    assert printed_answer("Experiment 1\nno object\n", {"Experiment 1"}) is None


def _outcome(shared_data, paper: str, index: int) -> str:
    data = json.loads((shared_data / "expbench" / "iclr2024" / f"{paper}.json").read_text())
    return data["questions"][index]["expected_outcome"]


# (paper, question index, the expected results the rule extracts, as written)
REAL_OUTCOMES = [
    ("18244", 1, ["24.61%", "19.91%"]),  # PDF(720) names a model
    ("18013", 0, ["5.16%", "54.40", "65.20"]),  # Llama-2 and "27 tasks" are not results
    ("17595", 1, ["4.32–4.39"]),  # a range; 6.2B, 8 GPUs, Tables 4 and 9, Figure 5 are not
    ("18660", 1, ["20.54 ±0.18", "0.0 ±0.0", "99.19 ±0.54", "525.57 ±105.47"]),
    ("19128", 7, ["72.1", "71.3", "71.6"]),  # M=6, M=4, M=8 are settings
    ("19281", 2, ["12.08", "12.35"]),  # δ = 0.6 and δ = 0.4 are settings
    ("17666", 1, ["95%", "90%"]),  # "above 98%" is a bound; 200 or 400 samples are counts
    ("17388", 0, []),  # prose: gpt-4 and Table 3 and Table 4 only
]


@pytest.mark.parametrize(("paper", "index", "texts"), REAL_OUTCOMES)
def test_the_number_rule_on_real_expbench_outcomes(shared_data, paper, index, texts):
    assert [n.text for n in expected_numbers(_outcome(shared_data, paper, index))] == texts


def test_ranges_spreads_and_percentages_carry_their_tolerance(shared_data):
    [throughput] = expected_numbers(_outcome(shared_data, "17595", 1))
    assert (throughput.low, throughput.high, throughput.percent) == (4.32, 4.39, False)
    pong = expected_numbers(_outcome(shared_data, "18660", 1))[0]
    assert (pong.low, pong.atol) == (20.54, 0.18)
    mse = expected_numbers(_outcome(shared_data, "18244", 1))[0]
    assert mse.percent and mse.atol == pytest.approx(0.005)


def test_every_expected_number_must_appear_in_the_output(shared_data):
    numbers = expected_numbers(_outcome(shared_data, "18244", 1))
    ok, detail = match_numbers(numbers, "epoch 10 loss 0.31\nMSE reduction: 0.2475\nMAE reduction 19.2 %\n")
    assert ok and detail["24.61%"]["observed"] == pytest.approx(0.2475)  # a fraction matches its percentage
    ok, detail = match_numbers(numbers, "MSE reduction: 24.6\nMAE reduction: 17.0\n")
    assert not ok and detail["24.61%"]["ok"] and not detail["19.91%"]["ok"]
    assert detail["19.91%"]["observed"] == pytest.approx(17.0)  # the closest value printed, for the analysis
    ok, detail = match_numbers(numbers, "")
    assert not ok and all(d["observed"] is None for d in detail.values())
    [throughput] = expected_numbers(_outcome(shared_data, "17595", 1))
    assert match_numbers([throughput], "throughput 4.41 samples/s")[0]  # inside the range widened by 5 %
    assert not match_numbers([throughput], "throughput 3.9 samples/s")[0]
