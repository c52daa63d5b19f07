"""The sweep report's confirmation section: the power statements, then each candidate's plan, screening and
confirmation side by side."""

from __future__ import annotations

from tuner.records import (
    CandidatePlanRecord,
    ConfirmationRecord,
    DecisionRowRecord,
    StoredRatio,
    SweepSummary,
    trial_ratio,
)
from tuner.report.describe import fmt_p, fmt_ratio
from tuner.report.document import Doc


def confirmation_section(doc: Doc, summary: SweepSummary) -> None:
    """The power statements and the candidates' screening and confirmation estimates side by side."""
    power, confirmation = summary["power"], summary["confirmation"]
    if power["before_screening"] is None and power["before_confirmation"] is None and confirmation is None:
        return  # a summary from before the confirmation phase
    doc.h("Confirmation")
    doc.p(
        "Screening (the search) only nominates candidates; each is re-tested against the baseline on fresh pairs "
        "(O'Brien-Fleming looks, Holm across candidates). Only the confirmation estimate is an effect."
    )
    for phase, statement in (
        ("before_screening", power["before_screening"]),
        ("before_confirmation", power["before_confirmation"]),
    ):
        if statement:
            doc.p(f"{POWER_TITLES[phase]}:")
            doc.bullets(statement["lines"])
    if confirmation is None:
        doc.p(summary["winner"]["reason"])
        return
    doc.bullets([*confirmation["notes"], *([confirmation["mde_note"]] if confirmation["mde_note"] else [])])
    decision = confirmation["decision"]
    first = summary["objectives"][0]["metric"]
    screened = {t["number"]: trial_ratio(t, first) for t in summary["trials"]}
    doc.table(
        ["trial", "measured by", "planned pairs (MDE)", "screening ratio [95% CI]", "confirmation ratio [95% CI]",
         "pairs", "p (Holm)", "status"],
        [_candidate_row(trial, plan, row, screened[trial]) for trial, (plan, row) in _candidates(confirmation).items()]
        or [["-", "-", "-", "-", "-", "-", "-", decision["reason"]]],
    )  # fmt: skip
    doc.p(
        "Each candidate is planned on its own: the method and grain of its screening, its screening's per-pair "
        "noise, the pairs its budget holds at its pair rate, its MDE (80% power, one-sided 2.5%, Holm over the "
        "candidates measured). The decision reads each look's sign-flip test, whose CI is the one shown."
    )


def _candidates(
    confirmation: ConfirmationRecord,
) -> dict[int, tuple[CandidatePlanRecord | None, DecisionRowRecord | None]]:
    """Each candidate's plan (none in a summary from before per-candidate plans) and decision row (none: not
    measured), by trial."""
    candidates: dict[int, tuple[CandidatePlanRecord | None, DecisionRowRecord | None]] = {
        plan["trial"]: (plan, None) for plan in confirmation["plan"]
    }
    for row in confirmation["decision"]["rows"]:
        plan, _ = candidates.setdefault(row["trial"], (None, None))
        candidates[row["trial"]] = (plan, row)
    return candidates


def _candidate_row(
    trial: int, plan: CandidatePlanRecord | None, row: DecisionRowRecord | None, screened: StoredRatio | None
) -> list[str]:
    """One candidate of the confirmation: its plan (None: not planned on its own), its decision row (None: not
    measured) and its screening ratio."""
    grain = str(plan["grain"] or "-") if plan else "-"
    if row is None:
        return [f"#{trial}", grain, _planned(plan), fmt_ratio(screened), "-", "0", "-", NOT_MEASURED]
    confirmed = row["confirmation"]
    return [
        f"#{trial}",
        grain,
        _planned(plan),
        fmt_ratio(row["screening"] or screened),
        fmt_ratio(confirmed),
        str(confirmed["n"] if confirmed else 0),
        fmt_p(row["p_holm"]),
        row["status"] or NOT_MEASURED,
    ]


def _planned(plan: CandidatePlanRecord | None) -> str:
    if not plan:
        return "-"
    mde = f"{plan['mde']:.2%}" if plan["mde"] is not None else "-"
    return f"{plan['pairs']} ({mde})"


POWER_TITLES = {"before_screening": "Power before screening", "before_confirmation": "Power before confirmation"}
NOT_MEASURED = "not measured: its budget cannot reach the test's level"
