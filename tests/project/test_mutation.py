"""The mutation run (tests/mutation_run.py): its operators, fast; the run itself under
``make test-slow``, held to the published results in tests/mutation_baseline.json."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from mutation_coverage import LineMap
from mutation_operators import mutants
from mutation_run import (
    BASELINE,
    ROOT,
    TESTS,
    code_fingerprint,
    current_mutants,
    fingerprint,
    plan,
    problems,
    reprinted_lines,
    rest_of,
    sample,
    scope_fingerprints,
    scope_of,
    scores,
    summary,
)

SAMPLE = '''"""A docstring is never mutated."""
LIMIT: int = 3


def f(a: int, b: int) -> int:
    """Nor is this one."""
    if a < b and b != 0:
        log(a, b)
        a += 1
    return a
'''


def test_each_operator_makes_its_mutant() -> None:
    keys = {m.key for m in mutants("m.py", SAMPLE)}
    assert keys == {
        "m.py:<module>:const+1:3 -> 4", "m.py:<module>:const-1:3 -> 2",
        "m.py:f:negate:if a < b and b != 0: -> if not (a < b and b != 0):",
        "m.py:f:boolop:a < b and b != 0 -> a < b or b != 0",
        "m.py:f:compare:a < b -> a <= b", "m.py:f:compare:b != 0 -> b == 0",
        "m.py:f:const+1:0 -> 1", "m.py:f:const-1:0 -> -1",
        "m.py:f:remove:log(a, b) -> pass", "m.py:f:swap-args:log(a, b) -> log(b, a)",
        "m.py:f:remove:a += 1 -> pass", "m.py:f:const+1:1 -> 2", "m.py:f:const-1:1 -> 0",
        "m.py:f:return-none:return a -> return None",
    }


def test_mutants_parse_differ_and_keep_their_keys_when_lines_move() -> None:
    found = mutants("m.py", SAMPLE)
    original = ast.unparse(ast.parse(SAMPLE))
    assert all(ast.unparse(ast.parse(m.source)) != original for m in found)
    assert len({m.source for m in found}) == len(found)
    assert all('"""A docstring is never mutated."""' in m.source and "LIMIT: int" in m.source for m in found)
    moved = mutants("m.py", SAMPLE.replace("LIMIT: int = 3\n", "LIMIT: int = 3\n\n\nOTHER = 'x'\n"))
    assert {m.key for m in found} == {m.key for m in moved}
    assert [m.line + 3 for m in found if m.line > 2] == [m.line for m in moved if m.line > 5]


def test_each_module_maps_to_existing_fast_tests() -> None:
    for module, files in TESTS.items():
        assert (ROOT / module).is_file()
        assert files and all((ROOT / f).is_file() for f in files)


def test_the_docs_list_each_modules_test_files_as_the_run_has_them() -> None:
    text = (ROOT / "docs/testing.md").read_text()
    for module, files in TESTS.items():
        names = ", ".join(Path(f).stem for f in files)
        assert f"| `{module}` | {names} |" in text, f"docs/testing.md's row of {module}"


@pytest.mark.slow   # CI's share: the modules changed since their baseline, a sample of the others
def test_no_mutant_the_suite_killed_survives_and_no_score_drops(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "mutation_run.py"), "--changed", "--check",
                           "--out", str(out)], capture_output=True, text=True, timeout=3600)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(out.read_text()).keys() == TESTS.keys()


def test_the_score_counts_timeouts_as_detected_and_leaves_out_equivalent_mutants() -> None:
    results = {"m.py": {"a": "killed", "b": "timeout", "c": "survived", "d": "survived"}, "n.py": {}}
    assert scores(results, {"d": "why"}) == {"m.py": 66.7, "n.py": 100.0}
    assert summary(results, {"d": "why"})[2] == "| `m.py` | 4 | 1 | 1 | 2 | 1 | 66.7% |"


def test_the_published_baseline_covers_every_module_and_gives_reasons() -> None:
    baseline = json.loads(BASELINE.read_text())
    assert set(baseline["score"]) == set(baseline["killed"]) == set(baseline["source"]) == set(baseline["scopes"]) \
        == set(TESTS)
    assert all(reason for reason in baseline["equivalent"].values())


def test_writing_the_baseline_of_one_module_keeps_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mutation_run
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"score": {"a.py": 90.0, "b.py": 50.0}, "killed": {"a.py": ["a1"], "b.py": ["b1", "b5"]},
                                "equivalent": {"b2": "why"}}))
    monkeypatch.setattr(mutation_run, "BASELINE", path)
    monkeypatch.setattr(mutation_run, "fingerprint", lambda module: f"hash of {module}")
    monkeypatch.setattr(mutation_run, "module_scopes", lambda module: {"f": f"f of {module}"})
    # b5 did not run (its scope is unchanged): it keeps the baseline's status; b6 is new and did not run.
    mutation_run.write_baseline({"b.py": {"b1": "killed", "b2": "survived", "b3": "timeout", "b4": "survived"}},
                                {"b.py": ("b1", "b2", "b3", "b4", "b5", "b6")})
    assert json.loads(path.read_text()) == {"score": {"a.py": 90.0, "b.py": 60.0},
                                            "killed": {"a.py": ["a1"], "b.py": ["b1", "b3", "b5"]},
                                            "equivalent": {"b2": "why"}, "source": {"b.py": "hash of b.py"},
                                            "scopes": {"b.py": {"f": "f of b.py"}}}


def test_a_mutant_runs_first_the_tests_that_ran_its_line_in_the_order_they_ran() -> None:
    lines = LineMap(("t.py::a", "t.py::b", "u.py::c"), {3: frozenset({"u.py::c", "t.py::a"}), 4: frozenset()})
    assert lines.tests_for(3) == ["t.py::a", "u.py::c"]
    assert lines.tests_for(4) == lines.tests_for(5) == []


def test_lines_map_to_where_the_reprinted_source_has_them() -> None:
    text = 'x = f(1,\n      2)\n\n\n# a comment\nif x:\n    y = (x\n         + 1)\n'
    assert reprinted_lines(text) == {1: 1, 2: 1, 6: 2, 7: 3, 8: 3}


def test_ci_runs_the_mutants_of_the_scopes_changed_since_the_baseline_and_a_fixed_sample_of_the_others() -> None:
    baseline = json.loads(BASELINE.read_text())
    changed, unscoped, *others = TESTS
    scope = scope_of(baseline["killed"][changed][0])
    baseline["source"] = {**baseline["source"], changed: "not its source", unscoped: "not its source"}
    baseline["scopes"] = {**baseline["scopes"], changed: {**baseline["scopes"][changed], scope: "not its code"}}
    del baseline["scopes"][unscoped]
    todo = plan(baseline, changed_only=True, size=5)
    assert todo[unscoped] is None
    in_scope = {k for k in current_mutants(changed) if scope_of(k) == scope}
    kept = [k for k in baseline["killed"][changed] if scope_of(k) != scope]
    assert in_scope and todo[changed] == in_scope | sample(kept, 5)
    for module in others:
        assert todo[module] == sample(baseline["killed"][module], 5) and len(todo[module] or ()) == 5
    assert plan(baseline, changed_only=False) == dict.fromkeys(TESTS)
    assert sample(["a", "b", "c", "d"], 2) == sample(["d", "c", "b", "a"], 2)


def test_a_run_falls_short_when_a_killed_mutant_survives_an_equivalence_goes_stale_or_a_score_drops() -> None:
    baseline = {"killed": {"m.py": ["m.py:f:a", "m.py:f:b", "m.py:g:c"], "n.py": ["n.py:g:a"]},
                "score": {"m.py": 100.0, "n.py": 90.0},
                "equivalent": {"m.py:f:e": "why", "n.py:g:gone": "why"}}
    now = {"m.py": ("m.py:f:a", "m.py:f:b", "m.py:f:e", "m.py:g:c"), "n.py": ("n.py:g:a",)}
    results = {"m.py": {"m.py:f:a": "killed", "m.py:f:b": "timeout", "m.py:f:e": "survived"}}
    assert problems(results, baseline, now) == []
    results["n.py"] = {"n.py:g:a": "killed"}
    assert problems(results, baseline, now) == [
        "listed as equivalent, no longer a mutant (the code changed): n.py:g:gone"]
    del results["n.py"]
    results["m.py"]["m.py:f:b"] = "survived"
    assert problems(results, baseline, now) == ["killed in the published run, survives now: m.py:f:b",
                                                "m.py: score 66.7% (published 100.0%)"]
    # A new mutant of a changed scope that survives lowers the score the run implies.
    now["m.py"] += ("m.py:f:new",)
    results["m.py"].update({"m.py:f:b": "killed", "m.py:f:new": "survived"})
    assert problems(results, baseline, now) == ["m.py: score 75.0% (published 100.0%)"]


def test_an_edit_changes_the_fingerprint_of_its_own_scope_only() -> None:
    text = ('X = 1\n\n\nclass C:\n    def f(self):\n        def g():\n            return 1\n        return g\n\n\n'
            'def h():\n    return 2\n')
    before = scope_fingerprints(text)
    assert set(before) == {"<module>", "C", "C.f", "C.f.g", "h"}
    for edit, scope in (("return 1", "C.f.g"), ("return g", "C.f"), ("return 2", "h"), ("X = 1", "<module>")):
        after = scope_fingerprints(text.replace(edit, edit.replace("1", "3").replace("2", "3").replace("g", "g or 3")))
        assert {s for s in before if before[s] != after[s]} == {scope}
    assert set(scope_fingerprints(text.replace("def h():", "def k():"))) == {"<module>", "C", "C.f", "C.f.g", "k"}
    keys = {scope_of(m.key) for m in mutants("x.py", text)}
    assert keys <= set(before)


def test_a_module_keeps_its_baseline_when_only_its_imports_or_docstrings_change() -> None:
    moved = SAMPLE.replace('"""A docstring is never mutated."""', 'from x import y\nimport z').replace(
        '"""Nor is this one."""', '"""Reworded."""\n    import w')
    assert code_fingerprint(moved) == code_fingerprint(SAMPLE)
    renamed = SAMPLE.replace("log(a, b)", "journal.log(a, b)")
    moved_too = "from . import logs as journal\n" + renamed
    assert code_fingerprint("import journal\n" + renamed) == code_fingerprint(moved_too)
    assert code_fingerprint(renamed) != code_fingerprint("import journal\n" + renamed)
    assert code_fingerprint(SAMPLE.replace("a += 1", "a += 2")) != code_fingerprint(SAMPLE)
    assert code_fingerprint(SAMPLE.replace("LIMIT: int = 3", "LIMIT: int = 4")) != code_fingerprint(SAMPLE)


def test_a_module_whose_code_matches_its_baseline_still_has_every_mutant_the_baseline_names() -> None:
    """The fingerprint ignores the names imports bind, mutant keys quote code: a module renamed
    under its importer (``graph_fair.escape`` to ``liveness.escape``) keeps its fingerprint, so its
    keys must be renamed with it, or CI's sample would draw mutants that no longer exist."""
    baseline = json.loads(BASELINE.read_text())
    for module in TESTS:
        if baseline["source"][module] != fingerprint(module):
            continue
        now = {m.key for m in mutants(module, (ROOT / module).read_text())}
        named = set(baseline["killed"][module]) | {k for k in baseline["equivalent"] if k.startswith(module + ":")}
        assert named <= now, sorted(named - now)


@pytest.mark.parametrize(("deselected", "status"), [((), 1), (("test_two.py::test_fails",), 0),
                                                    (("test_two.py::test_passes", "test_two.py::test_fails"), 0)])
def test_a_surviving_mutant_runs_the_rest_of_the_list_and_nothing_left_is_a_pass(
        tmp_path: Path, deselected: tuple[str, ...], status: int) -> None:
    """After the tests of its line, a mutant runs its files with those deselected: a test still
    to run decides (here one that fails), and none left is the survival the first run found."""
    (tmp_path / "test_two.py").write_text("def test_passes() -> None:\n    pass\n\n\n"
                                          "def test_fails() -> None:\n    raise AssertionError\n")
    rest = rest_of(["test_two.py"], list(deselected))
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r}); import mutation_run; "
            "from hypothesis import settings; settings.register_profile('mutation'); "   # as a worker does
            f"sys.exit(mutation_run._pytest({rest!r}, nothing_left=0)())")
    assert subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True).returncode == status
