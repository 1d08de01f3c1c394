"""One verdict model for every reproduction: what a paper says, what our run measures, and how
the two compare.

A reproduction declares its claims as data before anything runs (:class:`ClaimSpec`): the
paper's statement (``paper``: its number, ``paper_ref``: figure/table/section, ``quote``), how
it is compared (``kind``), and its tolerance (the kind's default, the same for every paper,
unless the paper gives its own error bars). A ``measure`` function turns the run's results
into a :class:`Measured` (the value, its 95 % confidence half-width over seeds, the evidence a
cause may cite and the preconditions of the paper's regime). :func:`judge` then gives the
verdict:

``reproduced``
    the measured mean lies inside the tolerance band around the paper's number (an interval
    that merely touches the band is not enough), the measured 95 % confidence interval is no
    wider than the band (else the run cannot tell the paper's number from others) and, where
    the paper states an effect (a ratio other than 1, a gain other than 0), the interval
    excludes no effect. For a ratio the band is also limited by the size of the effect: its
    effect (ratio − 1, or 1 − ratio below 1) must lie within [0.5, 1.5]× the paper's, so that
    1.03 does not pass for the paper's 1.27 although it is within ×/÷ 1.25 of it;
``direction``
    the paper's direction holds with the interval excluding "no effect" (1 for a ratio, 0 for
    a gain or a difference), the magnitude does not;
``not_reproduced``
    neither;
``out_of_regime``
    a precondition of the paper's experiment (overloaded, CPU-bound, at the paper's load)
    does not hold in our run: the claim is not judged, its preconditions' values say why;
``model_check``
    a check of our own model (accounting, conservation): never counted with the paper's claims;
``derived``
    the paper's number is composed from statements at different points (``derived`` gives its
    formula, ``derived_at_one_point`` is False): the paper does not state it, so it is measured
    and shown but not judged, and never counted with the paper's claims. A derived number whose
    parts the paper gives at the same point is judged as any other;
``fit_input``
    a model parameter was fitted on this claim's number (``fit_input`` names the parameter, the
    fit and where it is used): matching it shows the fit, not the model, so it is measured and
    shown but not judged, and never counted with the paper's claims.

A claim that is not ``reproduced`` carries a ``cause``: a text formatted only from its
``evidence`` map of values measured in the run (:class:`Cause` refuses a template with a
numeric literal). ``claims.json`` is a list of :meth:`Claim.to_dict` objects; ``holds`` is
kept for the tools that read it and means ``verdict == "reproduced"``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

REQUIRED_KEYS = ("id", "claim", "paper", "measured", "holds", "verdict")

REPRODUCED = "reproduced"
DIRECTION = "direction"
NOT_REPRODUCED = "not_reproduced"
OUT_OF_REGIME = "out_of_regime"
MODEL_CHECK = "model_check"
DERIVED = "derived"
FIT_INPUT = "fit_input"
VERDICTS = (REPRODUCED, DIRECTION, NOT_REPRODUCED, OUT_OF_REGIME, MODEL_CHECK, DERIVED, FIT_INPUT)
# What a paper's claim can get; model checks, derived numbers and fit inputs are counted apart.
PAPER_VERDICTS = VERDICTS[:4]

# A ratio's effect (ratio − 1, or 1 − ratio below 1) must lie within these multiples of the
# paper's effect (README, "How claims are judged").
EFFECT_RANGE = (0.5, 1.5)

# How a claim is compared with the paper.
RATIO = "ratio"            # a factor between two systems (3.3× the goodput): no effect = 1
VALUE = "value"            # an absolute value in the paper's unit (µs, cores, kRPS)
FRACTION = "fraction"      # a share (of capacity, of cores, of requests)
GAIN = "gain"              # a relative change (+13 %, 23 % less, as 0.13 / -0.23): no effect = 0
DIFFERENCE = "difference"  # an absolute difference in the paper's unit: no effect = 0
BOUND = "bound"            # the paper bounds the value (p99 within the target): side "upper" or "lower"
ORDER = "order"            # one above the other, no number: measured is the effect (ratio or difference)
MONOTONE = "monotone"      # a sequence that rises: measured is its smallest step
CHECK = "check"            # a model check: measured must satisfy the bound given as ``paper``
KINDS = (RATIO, VALUE, FRACTION, GAIN, DIFFERENCE, BOUND, ORDER, MONOTONE, CHECK)
_NO_EFFECT = {RATIO: 1.0, GAIN: 0.0, DIFFERENCE: 0.0, ORDER: 0.0, MONOTONE: 0.0}


@dataclass(frozen=True)
class Tolerance:
    """How far the measured value may lie from the paper's number: a factor (the band
    ``[paper / factor, paper × factor]``), a share of the paper's value (``paper ± rel·|paper|``)
    or an absolute half-width in the claim's unit (the paper's own error bars)."""

    factor: float | None = None
    rel: float | None = None
    abs: float | None = None
    source: str = "default"  # "default", or where the paper gives its error bars

    def __post_init__(self) -> None:
        given = [x for x in (self.factor, self.rel, self.abs) if x is not None]
        if len(given) != 1:
            raise ValueError("Tolerance: give exactly one of factor, rel, abs")
        if self.factor is not None and self.factor < 1:
            raise ValueError(f"Tolerance.factor: must be >= 1, got {self.factor}")
        if (self.rel is not None and self.rel < 0) or (self.abs is not None and self.abs < 0):
            raise ValueError("Tolerance: rel and abs must be >= 0")

    def band(self, paper: float, share: bool = False) -> tuple[float, float]:
        """The values within tolerance of ``paper``. For a ``share`` (a fraction in [0, 1]) a
        factor applies to the share and to its complement, the headroom ``1 − share``, so that a
        share near 1 is not within tolerance of anything above a small one (0.81 of capacity is
        not 0.97: its headroom is 0.19, not 0.03)."""
        if self.factor is not None:
            a, b = paper / self.factor, paper * self.factor
            lo, hi = min(a, b), max(a, b)
            if share and 0 < paper < 1:
                lo = max(lo, 1 - (1 - paper) * self.factor)
                hi = min(hi, 1 - (1 - paper) / self.factor)
            return (lo, hi)
        half = self.rel * abs(paper) if self.rel is not None else self.abs
        return (paper - half, paper + half)

    def text(self) -> str:
        if self.factor is not None:
            return "exact bound" if self.factor == 1 else f"×/÷ {self.factor:g}"
        if self.rel is not None:
            return f"± {self.rel * 100:g} % of the paper's value"
        return f"± {self.abs:g} ({self.source})"


# The same for every paper (README, "How claims are judged").
DEFAULT_TOLERANCE = {
    RATIO: Tolerance(factor=1.25), VALUE: Tolerance(factor=1.25), FRACTION: Tolerance(factor=1.25),
    GAIN: Tolerance(rel=0.5), DIFFERENCE: Tolerance(rel=0.5), BOUND: Tolerance(factor=1.0),
    CHECK: Tolerance(factor=1.0),
}


@dataclass(frozen=True)
class Condition:
    """A precondition of the paper's regime, measured in our run: ``value OP bound``
    (``name`` says what, e.g. "cores busy of 4 at the top demand")."""

    name: str
    value: float | None
    op: str
    bound: float

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"Condition.op: {self.op!r}: use one of {', '.join(_OPS)}")

    @property
    def holds(self) -> bool:
        return self.value is not None and math.isfinite(self.value) and _OPS[self.op](self.value, self.bound)


_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}

# A number standing on its own (not the tail of a name such as p99, c-FCFS or t_e).
_NUMERIC_LITERAL = re.compile(r"(?<![A-Za-z_\d.\-])[-+]?\d+(?:\.\d+)?")
_FIELD = re.compile(r"\{[^{}]*\}")


@dataclass(frozen=True)
class Cause:
    """Why a claim is not reproduced, read from the run: ``text`` is a template whose every
    number comes from ``evidence`` (``{name}`` or ``{name:.2f}``); a numeric literal in the
    template is refused, so a cause cannot quote a figure from another run."""

    text: str
    evidence: Mapping[str, Any]

    def __post_init__(self) -> None:
        check_template(self.text)
        names = {m.group(0)[1:-1].split(":")[0].split("!")[0] for m in _FIELD.finditer(self.text)}
        missing = names - set(self.evidence)
        if missing:
            raise ValueError(f"cause: template fields {sorted(missing)} are not in its evidence")

    def render(self) -> str:
        return self.text.format_map({k: _Fmt(v) for k, v in self.evidence.items()})

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.render(), "evidence": _jsonable(dict(self.evidence))}


def check_template(text: str) -> None:
    """Raises ``ValueError`` when a cause template holds a numeric literal outside its fields."""
    bare = _FIELD.sub(" ", text)
    m = _NUMERIC_LITERAL.search(bare)
    if m:
        raise ValueError(f"cause template holds the numeric literal {m.group(0)!r} (put it in the evidence): "
                         f"{text[:80]!r}")


class _Fmt:
    """An evidence value in a template: ``{x}`` formats numbers readably, ``{x:.2f}`` as asked."""

    def __init__(self, v: Any):
        self.v = v

    def __format__(self, spec: str) -> str:
        if spec:
            return "–" if self.v is None else format(self.v, spec)
        return fmt_number(self.v)


@dataclass
class Measured:
    """What a claim's ``measure`` returns: the value (``None`` when it could not be measured,
    with ``missing`` saying why), its 95 % confidence half-width over ``n`` seeds, the evidence a
    cause may cite, the regime's preconditions, and extra keys for ``claims.json``."""

    value: float | None
    ci95: float | None = None
    n: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    regime: list[Condition] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    missing: str | None = None


# A cause given as data: a template formatted from the measured evidence (plus measured,
# ci95, paper, band_lo, band_hi), or a function of (data, Measured) returning a Cause or None.
CauseSpec = str | Callable[[Any, Measured], "Cause | None"] | None


@dataclass(frozen=True)
class ClaimSpec:
    """A paper's claim, declared before any run."""

    id: str
    claim: str
    paper_ref: str
    kind: str
    measure: Callable[[Any], Measured]
    paper: float | None = None
    quote: str = ""
    unit: str = ""
    how: str = ""  # how the measured value is computed from the run
    tolerance: Tolerance | None = None
    side: str = "upper"  # bound/check: measured <= paper ("upper") or >= ("lower"); order: "above"/"below" no effect
    cause: CauseSpec = None
    group: str = ""  # optional grouping (a figure, a workload) for tables
    # The paper's number is not stated but composed from two statements: its formula (e.g.
    # "1.16 / 1.7: Caladan's and Shenango's p99, both against CoreSync's") and whether the paper
    # gives both parts at the same point (same figure and load). Judged only if it does.
    derived: str = ""
    derived_at_one_point: bool = False
    # A model parameter was fitted on this claim's number: what was fitted, by what, and where
    # it is used (e.g. "server.dispatcher.cost_ns, fitted to 106 ns by ... under --condition X").
    # Never judged: its match is the fit's doing.
    fit_input: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id}: kind {self.kind!r}: use one of {', '.join(KINDS)}")
        needs_number = self.kind in (RATIO, VALUE, FRACTION, GAIN, DIFFERENCE, BOUND, CHECK)
        if needs_number and (self.paper is None or not math.isfinite(self.paper)):
            raise ValueError(f"claim {self.id}: a {self.kind} claim needs the paper's number")
        if self.kind in (BOUND, CHECK) and self.side not in ("upper", "lower"):
            raise ValueError(f"claim {self.id}: side {self.side!r}: use upper or lower")
        if self.kind == ORDER and self.side not in ("above", "below"):
            raise ValueError(f"claim {self.id}: side {self.side!r}: use above or below")
        if self.kind == RATIO and self.paper is not None and self.paper <= 0:
            raise ValueError(f"claim {self.id}: a ratio must be positive")
        if isinstance(self.cause, str):
            check_template(self.cause)
        if self.derived_at_one_point and not self.derived:
            raise ValueError(f"claim {self.id}: derived_at_one_point needs the formula in derived")
        if self.derived and self.kind in (ORDER, MONOTONE, CHECK):
            raise ValueError(f"claim {self.id}: a {self.kind} claim has no paper's number to derive")
        if self.fit_input and (self.kind in (ORDER, MONOTONE, CHECK) or self.derived):
            raise ValueError(f"claim {self.id}: a fit's input is a number the paper states: not a {self.kind} "
                             "claim, not a derived one")

    @property
    def judged(self) -> bool:
        """False for a number composed from statements at different points, or one a model
        parameter was fitted on: not judged."""
        return (not self.derived or self.derived_at_one_point) and not self.fit_input

    @property
    def tol(self) -> Tolerance | None:
        return self.tolerance or DEFAULT_TOLERANCE.get(self.kind)

    @property
    def no_effect(self) -> float | None:
        return _NO_EFFECT.get(self.kind)


@dataclass
class Claim:
    """A judged claim, as ``claims.json`` holds it."""

    id: str
    claim: str
    measured: float | None
    verdict: str
    paper: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        return self.verdict == REPRODUCED

    def to_dict(self) -> dict[str, Any]:
        d = {"id": self.id, "claim": self.claim, "paper": self.paper, "measured": self.measured,
             "holds": self.holds, "verdict": self.verdict}
        for k, v in self.extra.items():
            if k in d:
                raise ValueError(f"claim {self.id}: extra key {k!r} clashes with a required key")
            d[k] = v
        return _jsonable(d)


def judge(spec: ClaimSpec, data: Any) -> Claim:
    """Measures ``spec`` on ``data`` and gives its verdict (see the module's doc)."""
    m = spec.measure(data)
    if not isinstance(m, Measured):
        raise TypeError(f"claim {spec.id}: measure must return Measured, got {type(m).__name__}")
    return verdict_of(spec, m, data)


def verdict_of(spec: ClaimSpec, m: Measured, data: Any = None) -> Claim:
    """The verdict of ``spec`` for an already measured ``m``."""
    value = _finite(m.value)
    ci = _finite(m.ci95)
    ci_used = ci if ci is not None else 0.0
    tol = spec.tol
    band = claim_band(spec)
    extra: dict[str, Any] = {
        "kind": spec.kind, "paper_ref": spec.paper_ref, "ci95": rounded(ci), "n": m.n,
        "tolerance": tol.text() if tol is not None and spec.kind not in (ORDER, MONOTONE) else None,
    }
    if band is not None and spec.kind not in (BOUND, CHECK):
        extra["band"] = [rounded(band[0]), rounded(band[1])]
        if spec.kind == RATIO and effect_band(spec) is not None:
            extra["effect_band"] = [rounded(x) for x in effect_band(spec)]
    if spec.derived:
        extra["derived"] = spec.derived
        extra["derived_at_one_point"] = spec.derived_at_one_point
    if spec.fit_input:
        extra["fit_input"] = spec.fit_input
    for k, v in (("quote", spec.quote), ("unit", spec.unit), ("measure", spec.how), ("group", spec.group)):
        if v:
            extra[k] = v
    if spec.kind in (BOUND, CHECK):
        extra["side"] = spec.side
    if m.regime:
        extra["regime"] = [{"name": c.name, "value": rounded(c.value), "op": c.op, "bound": c.bound,
                            "holds": c.holds} for c in m.regime]
    extra.update(m.extra)

    lo, hi = (value - ci_used, value + ci_used) if value is not None else (math.nan, math.nan)
    failed = [c for c in m.regime if not c.holds]
    if spec.kind == CHECK:
        verdict = MODEL_CHECK
        extra["passed"] = value is not None and _satisfies(spec, lo, hi, band)
    elif spec.fit_input:
        verdict = FIT_INPUT
        extra["verdict_if_judged"] = verdict_of(replace(spec, fit_input=""), m, data).verdict
    elif not spec.judged:
        verdict = DERIVED
        extra["verdict_if_judged"] = verdict_of(replace(spec, derived_at_one_point=True), m, data).verdict
    elif value is None:
        verdict = NOT_REPRODUCED
    elif failed:
        verdict = OUT_OF_REGIME
    elif spec.kind in (ORDER, MONOTONE):
        verdict = REPRODUCED if _beyond_no_effect(spec, lo, hi) else NOT_REPRODUCED
    elif _satisfies(spec, lo, hi, band) and _mean_inside(spec, value, band) and _effect_shown(spec, lo, hi) \
            and _precise(spec, ci, band):
        verdict = REPRODUCED
    elif spec.kind in (RATIO, GAIN, DIFFERENCE) and _beyond_no_effect(spec, lo, hi):
        verdict = DIRECTION
    else:
        verdict = NOT_REPRODUCED

    cause = None
    if verdict in (DIRECTION, NOT_REPRODUCED, OUT_OF_REGIME) or (verdict == MODEL_CHECK and not extra["passed"]):
        cause = _cause(spec, m, data, value, ci, band, failed)
    if verdict == DERIVED:
        cause = Cause("not judged: the paper does not state this number; it is derived as {formula}, from statements "
                      "at different points (judged all the same it would be {if_judged})",
                      {"formula": spec.derived, "if_judged": extra["verdict_if_judged"].replace("_", " ")})
    if verdict == FIT_INPUT:
        cause = Cause("not judged: a model parameter is fitted on this number ({fit}); matching it shows the fit, "
                      "not the model (judged all the same it would be {if_judged})",
                      {"fit": spec.fit_input, "if_judged": extra["verdict_if_judged"].replace("_", " ")})
    if verdict == OUT_OF_REGIME:
        # Not judged; what it would be if it were, for the reader who wants to know all the same.
        inner = verdict_of(spec, Measured(m.value, m.ci95, m.n, m.evidence, [], {}, m.missing), data)
        extra["verdict_if_judged"] = inner.verdict
        if inner.verdict != REPRODUCED:
            why = _cause(spec, m, data, value, ci, band, [])
            cause = Cause(f"{cause.text}; judged all the same it would be {inner.verdict.replace('_', ' ')}: "
                          f"{why.text}", {**why.evidence, **cause.evidence})
    if cause is not None:
        extra["cause"] = cause.to_dict()
    return Claim(id=spec.id, claim=spec.claim, paper=spec.paper, measured=rounded(value), verdict=verdict,
                 extra=extra)


def effect_band(spec: ClaimSpec) -> tuple[float, float] | None:
    """The ratios whose effect (ratio − 1, or 1 − ratio below 1) is within :data:`EFFECT_RANGE`
    of the paper's; None where the paper states no effect (a ratio of 1) or for other kinds."""
    if spec.kind != RATIO or spec.paper is None or spec.paper == 1.0:
        return None
    effect = spec.paper - 1.0
    a, b = 1.0 + EFFECT_RANGE[0] * effect, 1.0 + EFFECT_RANGE[1] * effect
    return (min(a, b), max(a, b))


def claim_band(spec: ClaimSpec) -> tuple[float, float] | None:
    """The values within tolerance of the paper's number: the tolerance's band, for a ratio
    narrowed to the ratios whose effect is within :data:`EFFECT_RANGE` of the paper's."""
    tol = spec.tol
    if tol is None or spec.paper is None:
        return None
    band = tol.band(spec.paper, share=spec.kind == FRACTION)
    eff = effect_band(spec)
    if eff is not None:
        band = (max(band[0], eff[0]), min(band[1], eff[1]))
    return band


def _mean_inside(spec: ClaimSpec, value: float, band: tuple[float, float] | None) -> bool:
    """The measured mean itself inside the band: an interval that only touches the band leaves
    the best estimate outside it."""
    if band is None:
        return False
    if spec.kind in (BOUND, CHECK):
        return True  # a bound asks the whole interval on its side (_satisfies)
    return band[0] <= value <= band[1]


def _satisfies(spec: ClaimSpec, lo: float, hi: float, band: tuple[float, float] | None) -> bool:
    if band is None:
        return False
    if spec.kind in (BOUND, CHECK):  # the whole interval on the bound's side
        return hi <= band[1] if spec.side == "upper" else lo >= band[0]
    return lo <= band[1] and hi >= band[0]


def _precise(spec: ClaimSpec, ci: float | None, band: tuple[float, float] | None) -> bool:
    """A measured interval wider than the tolerance band overlaps it whatever the value: such a
    run cannot tell the paper's number from others, so it does not reproduce it."""
    if spec.kind in (BOUND, CHECK) or band is None or ci is None:
        return True
    return ci <= (band[1] - band[0]) / 2


def _effect_shown(spec: ClaimSpec, lo: float, hi: float) -> bool:
    """Where the paper states an effect (a ratio other than 1, a gain other than 0), a
    reproduction must show it: a tolerance band that reaches "no effect" (×/÷ 1.25 around a
    ratio of 1.11) must not let a measured no-effect count as the paper's number."""
    if spec.no_effect is None or spec.paper is None or spec.paper == spec.no_effect:
        return True
    return _beyond_no_effect(spec, lo, hi)


def _beyond_no_effect(spec: ClaimSpec, lo: float, hi: float) -> bool:
    """The measured interval excludes "no effect" on the side the paper states."""
    null = spec.no_effect
    if spec.kind == ORDER:
        return lo > null if spec.side == "above" else hi < null
    if spec.kind == MONOTONE:
        return lo > null
    if spec.paper is None or spec.paper == null:
        return False
    return lo > null if spec.paper > null else hi < null


def _cause(spec: ClaimSpec, m: Measured, data: Any, value: float | None, ci: float | None,
           band: tuple[float, float] | None, failed: list[Condition]) -> Cause:
    if m.value is None or value is None:
        return Cause("not measured: {why}", {**m.evidence, "why": m.missing or "the run has no value for it"})
    if failed:
        parts, ev = [], {}
        for i, c in enumerate(failed):
            ev[f"pre{i}"], ev[f"pre{i}_value"], ev[f"pre{i}_op"], ev[f"pre{i}_bound"] = c.name, c.value, c.op, c.bound
            parts.append(f"{{pre{i}}} is {{pre{i}_value}}, the paper's regime needs {{pre{i}_op}} {{pre{i}_bound}}")
        return Cause("; ".join(parts), {**ev, **m.evidence})
    ev = {"measured": value, "ci95": ci, "paper": spec.paper, "band_lo": band[0] if band else None,
          "band_hi": band[1] if band else None, **m.evidence}
    diagnosis = _diagnosis(spec, value, ci, band, ev)
    given = spec.cause
    custom = None
    if callable(given):
        custom = given(data, m)
    elif isinstance(given, str):
        custom = Cause(given, ev)
    if custom is not None:
        if diagnosis is None:
            return custom
        return Cause(f"{diagnosis.text}; {custom.text}", {**diagnosis.evidence, **custom.evidence})
    if diagnosis is not None:
        return diagnosis
    if spec.kind in (ORDER, MONOTONE):
        return Cause("measured {measured} ± {ci95}: the interval does not exclude no effect", ev)
    if spec.kind in (BOUND, CHECK):
        return Cause("measured {measured} ± {ci95}: the bound is {paper}", ev)
    return Cause("measured {measured} ± {ci95} against the paper's {paper}; the tolerance band is "
                 "{band_lo} to {band_hi}", ev)


def _diagnosis(spec: ClaimSpec, value: float, ci: float | None, band: tuple[float, float] | None,
               ev: dict[str, Any]) -> "Cause | None":
    """What the verdict model itself found, said before any claim-specific cause: an interval
    too wide to decide, an effect within the band but not shown, a bound met only on average."""
    c = ci or 0.0
    if band is None:
        return None
    ev = dict(ev)
    if spec.kind in (BOUND, CHECK):
        mean_ok = value <= band[1] if spec.side == "upper" else value >= band[0]
        if mean_ok:
            return Cause("inconclusive: the mean {measured} meets the bound {paper} but its interval "
                         "(± {ci95}) crosses it", ev)
        return None
    eff = effect_band(spec)
    if eff is not None and not eff[0] <= value <= eff[1]:
        factor = spec.tol.band(spec.paper)
        if factor[0] <= value <= factor[1]:
            # within ×/÷ the factor of the paper's number, but not the size of its effect
            ev["paper_effect"], ev["measured_effect"] = abs(spec.paper - 1.0), value - 1.0
            ev["effect_lo"], ev["effect_hi"] = EFFECT_RANGE
            ev["factor_lo"], ev["factor_hi"] = factor
            if not _beyond_no_effect(spec, value - c, value + c):
                ev["no_effect"] = spec.no_effect
                return Cause("measured {measured} ± {ci95} is within {factor_lo} to {factor_hi} of the paper's {paper}, "
                             "but the interval includes no effect ({no_effect}): the paper's effect is not shown", ev)
            return Cause("measured {measured} ± {ci95}: within {factor_lo} to {factor_hi} of the paper's {paper}, but "
                         "its effect ({measured_effect}) is not within {effect_lo}× to {effect_hi}× the paper's "
                         "({paper_effect}): the band is {band_lo} to {band_hi}", ev)
    if not _satisfies(spec, value - c, value + c, band):
        return None
    if not _mean_inside(spec, value, band):
        return Cause("the measured mean {measured} is outside the tolerance band {band_lo} to {band_hi}; its "
                     "interval (± {ci95}) only touches it", ev)
    if not _precise(spec, ci, band):
        ev["half_band"] = (band[1] - band[0]) / 2
        return Cause("inconclusive: the measured interval {measured} ± {ci95} is wider than the tolerance band "
                     "{band_lo} to {band_hi} (half-width {half_band}) and overlaps it whatever the value; more "
                     "seeds or longer runs would decide", ev)
    ev["no_effect"] = spec.no_effect
    return Cause("measured {measured} ± {ci95} is within the tolerance band {band_lo} to {band_hi} of the paper's "
                 "{paper}, but the interval includes no effect ({no_effect}): the paper's effect is not shown", ev)


def judge_all(specs: Sequence[ClaimSpec], data: Any) -> list[Claim]:
    ids = [s.id for s in specs]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise ValueError(f"claims declared twice: {', '.join(sorted(dup))}")
    return [judge(s, data) for s in specs]


def counts(claims: Iterable[Mapping[str, Any] | Claim]) -> dict[str, int]:
    """The number of claims per verdict (every verdict present, 0 where none)."""
    out = {v: 0 for v in VERDICTS}
    for c in claims:
        v = c.verdict if isinstance(c, Claim) else c.get("verdict")
        out[v] = out.get(v, 0) + 1
    return out


# ---------------------------------------------------------------------------------------------
# numbers and files


def rounded(x: Any, nd: int = 4) -> float | None:
    """A measured number as a claim shows it: rounded to ``nd`` significant-ish decimals, and
    None when missing or not finite."""
    if x is None:
        return None
    x = float(x)
    if not math.isfinite(x):
        return None
    if x != 0 and abs(x) < 10 ** -nd:
        return float(f"{x:.{nd}g}")
    return round(x, nd)


def _finite(x: Any) -> float | None:
    if x is None:
        return None
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _jsonable(v: Any) -> Any:
    """numpy scalars → Python numbers, NaN/inf → None, containers recursively."""
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        try:
            v = v.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(v, bool) or v is None or isinstance(v, (str, int)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    return str(v)


def write_claims(claims: Iterable[Claim], path: Path) -> Path:
    data = [c.to_dict() for c in claims]
    check_claims(data)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def check_claims(data: Any) -> None:
    """Raises ``ValueError`` unless ``data`` has the claims.json layout."""
    if not isinstance(data, list):
        raise ValueError("claims: must be a list")
    ids = set()
    for i, c in enumerate(data):
        if not isinstance(c, dict):
            raise ValueError(f"claims[{i}]: must be an object")
        missing = [k for k in REQUIRED_KEYS if k not in c]
        if missing:
            raise ValueError(f"claims[{i}]: missing {', '.join(missing)}")
        if not isinstance(c["id"], str) or not c["id"] or c["id"] in ids:
            raise ValueError(f"claims[{i}].id: must be a unique non-empty string")
        ids.add(c["id"])
        if not isinstance(c["claim"], str) or not c["claim"]:
            raise ValueError(f"claims[{i}].claim: must be a non-empty string")
        for k in ("paper", "measured"):
            v = c[k]
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ValueError(f"claims[{i}].{k}: must be a number or null")
        if c["verdict"] not in VERDICTS:
            raise ValueError(f"claims[{i}].verdict: {c['verdict']!r}: use one of {', '.join(VERDICTS)}")
        if c["holds"] is not (c["verdict"] == REPRODUCED):
            raise ValueError(f"claims[{i}].holds: must be true exactly when the verdict is reproduced")
        if c["verdict"] in (DIRECTION, NOT_REPRODUCED, OUT_OF_REGIME):
            cause = c.get("cause")
            if not isinstance(cause, dict) or not isinstance(cause.get("text"), str) \
                    or not isinstance(cause.get("evidence"), dict):
                raise ValueError(f"claims[{i}] ({c['id']}): a {c['verdict']} claim needs a cause "
                                 "{text, evidence}")


# ---------------------------------------------------------------------------------------------
# printing


def fmt_number(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (int, float)):
        v = float(v)
        if not math.isfinite(v):
            return "–"
        a = abs(v)
        if v.is_integer() and a < 1e7:
            return f"{int(v):,}"
        if a < 1e-3 or a >= 1e7:
            return f"{v:.3g}"
        if a < 10:
            return f"{v:.3g}"
        return f"{v:,.1f}" if a < 1000 else f"{v:,.0f}"
    return str(v)


VERDICT_STYLE = {REPRODUCED: "green", DIRECTION: "yellow", NOT_REPRODUCED: "bold red", OUT_OF_REGIME: "magenta",
                 MODEL_CHECK: "dim", DERIVED: "dim", FIT_INPUT: "dim"}


def measured_text(c: Mapping[str, Any]) -> str:
    m = fmt_number(c.get("measured"))
    if isinstance(c.get("ci95"), (int, float)):
        m += f" ± {fmt_number(float(c['ci95']))}"
    if c.get("unit"):
        m += f" {c['unit']}"
    return m


def paper_text(c: Mapping[str, Any]) -> str:
    p = fmt_number(c.get("paper")) if c.get("paper") is not None else "–"
    if c.get("kind") in (BOUND, CHECK) and c.get("paper") is not None:
        p = ("≤ " if c.get("side") == "upper" else "≥ ") + p
    ref = c.get("paper_ref")
    return f"{p} ({ref})" if ref else p


#: The claims table's width when the output is not a terminal.
PIPE_TABLE_WIDTH = 200


def print_claims(claims: Sequence[dict], title: str = "claims", console=None) -> None:
    """The claims as a table: claim, paper (ref), measured ± CI, tolerance, verdict; then the
    counts by verdict and each cause."""
    from rich.table import Table

    from ..cli.render import UNWRAPPED_WIDTH, console as make_console

    con = console or make_console()
    # In a pipe the console is unbounded (messages stay whole); the claim column would stretch to
    # fill it, so the table gets a log-friendly width of its own and wraps inside its cells.
    t = Table(title=title, title_justify="left", show_lines=True,
              width=PIPE_TABLE_WIDTH if con.width >= UNWRAPPED_WIDTH else None)
    t.add_column("claim", ratio=1, min_width=30)
    t.add_column("paper", justify="right")
    t.add_column("measured", justify="right")
    t.add_column("tolerance", justify="right")
    t.add_column("verdict")
    for c in claims:
        text = f"[bold]{c.get('id')}[/bold]\n{c.get('claim')}"
        cause = c.get("cause")
        if isinstance(cause, dict) and cause.get("text"):
            text += f"\n[dim]cause: {cause['text']}[/dim]"
        v = c.get("verdict", REPRODUCED if c.get("holds") else NOT_REPRODUCED)
        if v == MODEL_CHECK:
            v = f"model check: {'passed' if c.get('passed') else 'FAILED'}"
        t.add_row(text, paper_text(c), measured_text(c), c.get("tolerance") or "", f"[{VERDICT_STYLE.get(c.get('verdict'), '')}]{v}[/]")
    con.print(t)
    con.print(counts_line(claims))


def counts_line(claims: Sequence[Mapping[str, Any]]) -> str:
    n = counts(claims)
    paper = sum(n[v] for v in PAPER_VERDICTS)
    return (f"{n[REPRODUCED]} of {paper} paper claims reproduced, {n[DIRECTION]} direction only, "
            f"{n[NOT_REPRODUCED]} not reproduced, {n[OUT_OF_REGIME]} out of regime; {n[MODEL_CHECK]} model checks"
            + (f", {n[DERIVED]} derived numbers not judged" if n[DERIVED] else "")
            + (f", {n[FIT_INPUT]} fit inputs not judged" if n[FIT_INPUT] else ""))
