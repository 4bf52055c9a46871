"""What a conformance run found: each vector's result, and the report over them.

A run at depth passes millions of vectors, and a passing one says nothing but that it
passed: ``Results`` keeps it as no object at all — its id rebuilt from its index, its
agreed steps (and its seconds, when a JUnit report will show them) in typed arrays — and
keeps whole only the results that did not pass, so the report of ``--extra-states 3``
fits where that of the default vectors does.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from agentfsm.spec.vectorfile import Expect, Refused, Vector
from agentfsm.verify.conformance.harness import Observation

Status = Literal["pass", "fail", "not-implemented", "not-run"]


@dataclass(frozen=True)
class StepReport:
    """One step as run: ``actual`` is what came back (None if nothing usable did)."""

    number: int
    event: str
    params: Mapping[str, Any]
    expect: Expect | Refused
    actual: Observation | None
    problems: tuple[str, ...] = ()


@dataclass(slots=True)
class VectorResult:
    """A vector as run: ``agreed`` steps matched; ``steps`` are reported only up to a failure."""

    vector: Vector
    status: Status
    steps: list[StepReport] = field(default_factory=list)
    message: str = ""
    failure: str = ""
    seconds: float = 0.0
    agreed: int = 0

    @property
    def failed_step(self) -> int | None:
        """The 1-based step that failed (0: the reset), or None."""
        if self.status == "pass":
            return None
        return self.steps[-1].number if self.steps else 0


def vector_ids(vectors: Iterable[Vector]) -> Callable[[int], str] | None:
    """The id of a run's vector by its index, without the vector when the source can say
    (``Vectors.vector_id``); None for a bare iterator, whose ids must be kept."""
    named = getattr(vectors, "vector_id", None)
    if callable(named):
        return named   # type: ignore[no-any-return]
    if isinstance(vectors, Sequence):
        return lambda index: vectors[index].id
    return None


class Results(Sequence[VectorResult]):
    """Results in vector order, a passing one kept as its agreed steps (and seconds) only.

    The last result appended stays whole until ``settle`` or the next (the run may still
    judge it: output nobody asked for fails it), and so does every result that did not pass; a passing one read back is
    a fresh ``VectorResult`` whose vector has its id and no steps or covers. ``ids`` gives
    a vector's id by its index (None: the ids are kept, 50-odd bytes each). Without
    ``timed`` no seconds are kept: a passing result reads back with 0.
    """

    def __init__(self, machine: str, ids: Callable[[int], str] | None, timed: bool = True) -> None:
        self.machine = machine
        self.ids = ids
        self.kept_ids: list[str] | None = [] if ids is None else None
        self.seconds = array("d") if timed else None
        self.agreed = array("L")
        self.others: dict[int, VectorResult] = {}   # by index: the results that did not pass
        self.last: VectorResult | None = None

    def append(self, result: VectorResult) -> None:
        self.settle()
        self.last = result

    def add_passed(self, seconds: float, agreed: int, vector_id: str = "") -> None:
        """A passing result, without making it (``vector_id`` needed only when the ids are kept)."""
        self.settle()
        if self.seconds is not None:
            self.seconds.append(seconds)
        self.agreed.append(agreed)
        if self.kept_ids is not None:
            self.kept_ids.append(vector_id)

    def settle(self) -> None:
        """The run is over: the last result, judged, is kept as the others are."""
        if self.last is not None:
            self._fold(self.last)
            self.last = None

    def extend(self, results: Iterable[VectorResult]) -> None:
        for result in results:
            self.append(result)

    def _fold(self, result: VectorResult) -> None:
        if result.status != "pass":
            self.others[len(self.agreed)] = result
        if self.seconds is not None:
            self.seconds.append(result.seconds)
        self.agreed.append(result.agreed)
        if self.kept_ids is not None:
            self.kept_ids.append(result.vector.id)

    def __len__(self) -> int:
        return len(self.agreed) + (self.last is not None)

    @overload
    def __getitem__(self, index: int) -> VectorResult: ...

    @overload
    def __getitem__(self, index: slice) -> list[VectorResult]: ...

    def __getitem__(self, index: int | slice) -> VectorResult | list[VectorResult]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        if index == len(self.agreed):
            assert self.last is not None
            return self.last
        found = self.others.get(index)
        if found is not None:
            return found
        vid = self.kept_ids[index] if self.kept_ids is not None else self.ids(index)   # type: ignore[misc]
        return VectorResult(Vector(vid, self.machine, (), ()), "pass",
                            seconds=0.0 if self.seconds is None else self.seconds[index], agreed=self.agreed[index])

    def __iter__(self) -> Iterator[VectorResult]:
        return map(self.__getitem__, range(len(self)))

    def not_passed(self) -> list[VectorResult]:
        """The results that did not pass, in vector order (no passing one is made)."""
        last = [self.last] if self.last is not None and self.last.status != "pass" else []
        return [*self.others.values(), *last]


def not_passed(results: Sequence[VectorResult]) -> list[VectorResult]:
    """The results that did not pass, in order: read from ``Results`` without making the passing ones."""
    if isinstance(results, Results):
        return results.not_passed()
    return [r for r in results if r.status != "pass"]


@dataclass
class Report:
    """The results; after an early stop, ``unlisted`` more vectors were not run (nor made, when made lazily)."""

    machine: str
    results: Sequence[VectorResult]
    seconds: float
    stopped: str = ""
    unlisted: int = 0

    def count(self, status: Status) -> int:
        if status == "pass":
            return len(self.results) - len(self.not_passed())
        return sum(r.status == status for r in self.not_passed()) + (self.unlisted if status == "not-run" else 0)

    @property
    def total(self) -> int:
        return len(self.results) + self.unlisted

    @property
    def ok(self) -> bool:
        return not self.not_passed() and not self.stopped

    def not_passed(self) -> list[VectorResult]:
        return not_passed(self.results)

    def shortest_failure(self) -> VectorResult | None:
        failing = [r for r in self.not_passed() if r.status == "fail"]
        return min(failing, key=lambda r: (len(r.vector.steps), r.vector.id), default=None)
