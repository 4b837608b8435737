"""The report's HTML: plain semantic markup, numbers in ``<table>``s, figures as embedded PNG
images with alt text, one inline style sheet, no script and no link off the machine (the page
opens from the file system). Every text that came from a student or a notebook is escaped.
Each page carries the private mark that ``publish`` refuses (release.publish)."""

from __future__ import annotations

import html
from datetime import datetime, timezone

from ...release.publish import PRIVATE_MARK
from .assemble import AssignmentReport
from .figures import measured_histogram, points_histogram
from .graded import GradedCohort
from .measured import tier_counts
from .statistics import QUINTILES

#: Pairs listed in the similarity section (the most similar first).
PAIRS_SHOWN = 15
STYLE = """
body{font-family:system-ui,sans-serif;max-width:75em;margin:1em auto;padding:0 1em;
color:#1a1a1a;background:#fff;line-height:1.4}
table{border-collapse:collapse;margin:0.5em 0 1em;font-size:0.92em}
th code{font-weight:normal;font-size:0.85em}
th,td{border:1px solid #767676;padding:0.2em 0.5em;text-align:left;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums}
caption{text-align:left;font-weight:bold;padding:0.3em 0}
.private{border:2px solid #8a1c00;background:#fff0eb;padding:0.5em 1em}
.figures{display:flex;flex-wrap:wrap;gap:0.5em}
pre{white-space:pre-wrap;word-break:break-word;margin:0;font-size:0.85em}
td.code{width:50%}
a{color:#0b4f8a}
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _num(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _head(title: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="robots" content="noindex, nofollow">'
            f'<meta name="tinyprof-private" content="{_e(PRIVATE_MARK)}">'
            f"<title>{_e(title)}</title><style>{STYLE}</style></head><body><main>")


def _private() -> str:
    return ('<p class="private"><strong>Private to the instructors.</strong> This report holds '
            "grades and students' code: it stays on this machine, out of git and out of "
            "everything published. Similar pairs are a list to look at, never a verdict.</p>")


def _foot() -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"<footer><p>Written by <code>python -m autograder report</code> on {when} from "
            "what the grader recorded; nothing was run again.</p></footer></main></body>"
            "</html>\n")


def assignment_page(report: AssignmentReport) -> str:
    title = f"Cohort report: {report.assignment}"
    parts = [_head(title), f"<h1>{_e(title)}</h1>", _private(), _overview(report),
             _exercises(report), _measured(report), _mistakes(report), _look(report),
             _similarity(report), '<p><a href="index.html">All assignments</a></p>', _foot()]
    return "\n".join(parts)


def _overview(report: AssignmentReport) -> str:
    statuses: dict[str, int] = {}
    for row in report.rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    said = ", ".join(f"{count} {_e(status)}" for status, count in sorted(statuses.items()))
    return (f"<p>{len(report.rows)} submission(s): {said}. Statistics are over the "
            f"{len(report.graded)} graded ones.</p>")


def _exercises(report: AssignmentReport) -> str:
    quintiles = "".join(f'<th scope="col">Q{i + 1}</th>' for i in range(QUINTILES))
    lines = ['<section aria-labelledby="exercises"><h2 id="exercises">Exercises</h2>',
             "<p>Difficulty: the mean score over the points (1: everyone scored full marks). "
             "Discrimination: the correlation of the exercise's score with the rest of the "
             "total (n/a when either does not vary). Q1 to Q5: the mean score over the points "
             "of each fifth of the class by total score, lowest first.</p>",
             "<table><caption>Exercise statistics</caption><thead><tr>"
             '<th scope="col">Exercise (grade id)</th><th scope="col">Points</th>'
             '<th scope="col">Scored</th><th scope="col">Mean</th>'
             '<th scope="col">SD</th><th scope="col">Difficulty</th>'
             f'<th scope="col">Discrimination</th>{quintiles}'
             '<th scope="col">Awaiting manual grade</th></tr></thead><tbody>']
    for s in report.stats:
        cells = "".join(f'<td class="num">{_num(q)}</td>' for q in s.quintiles)
        lines.append(f'<tr><th scope="row">{_e(s.name)}<br><code>{_e(s.grade_id)}</code></th>'
                     f'<td class="num">{s.points:g}</td><td class="num">{s.count}</td>'
                     f'<td class="num">{_num(s.mean)}</td><td class="num">{_num(s.sd)}</td>'
                     f'<td class="num">{_num(s.difficulty)}</td>'
                     f'<td class="num">{_num(s.discrimination)}</td>{cells}'
                     f'<td class="num">{s.awaiting}</td></tr>')
    lines.append("</tbody></table><h3>Points scored</h3><div class=\"figures\">")
    lines += [points_histogram(s.name, s.points, s.histogram).img()
              for s in report.stats if s.count]
    lines.append("</div></section>")
    return "\n".join(lines)


def _measured(report: AssignmentReport) -> str:
    if not report.measured:
        return ('<section aria-labelledby="measured"><h2 id="measured">What the tests '
                "measured</h2><p>No speed, busy-device or leak test recorded a measurement "
                "in this assignment (a folder graded before the grader recorded them has "
                "none: grade it again to see them).</p></section>")
    names = {e.grade_id: e.name for e in report.exercises}
    lines = ['<section aria-labelledby="measured"><h2 id="measured">What the tests measured'
             "</h2><p>The speed-ups, device busy shares and memory growth per step the grader "
             "measured, each tier a dashed line.</p>",
             "<table><caption>Measurements per test</caption><thead><tr>"
             '<th scope="col">Test</th><th scope="col">Measured</th>'
             '<th scope="col">Students</th><th scope="col">Median</th>'
             '<th scope="col">Students per tier</th></tr></thead><tbody>']
    figures = []
    for test in report.measured:
        values = sorted(test.values.values())
        reached = "; ".join(tier_counts(test.kind, test.decided(), test.tiers))
        name = names.get(test.grade_id, test.grade_id)
        lines.append(f'<tr><th scope="row">{_e(name)}<br><code>{_e(test.grade_id)}</code></th>'
                     f"<td>{_e(test.unit)}</td>"
                     f'<td class="num">{len(values)}</td>'
                     f'<td class="num">{values[len(values) // 2]:.3g}</td>'
                     f"<td>{_e(reached) or 'no tier'}</td></tr>")
        figures.append(measured_histogram(name, test.unit, values, test.tiers,
                                          tier_counts(test.kind, test.decided(),
                                                      test.tiers)).img())
    lines += ["</tbody></table>", '<div class="figures">', *figures, "</div></section>"]
    return "\n".join(lines)


def _mistakes(report: AssignmentReport) -> str:
    names = {e.grade_id: e.name for e in report.exercises}
    lines = ['<section aria-labelledby="mistakes"><h2 id="mistakes">What the class got wrong'
             "</h2>"]
    for named, heading, caption in (
            (True, "Named mistakes", "The hints the hidden tests gave, by how many students"),
            (False, "Failures with no named hint", "Grouped by message (numbers and quoted "
                                                    "text blanked), by how many students")):
        groups = [g for g in report.mistakes if g.named == named]
        lines.append(f"<h3>{heading}</h3>")
        if not groups:
            lines.append("<p>None.</p>")
            continue
        what = "Hint" if named else "Message"
        lines.append(f"<table><caption>{caption}</caption><thead><tr>"
                     '<th scope="col">Students</th><th scope="col">Exercise</th>'
                     f'<th scope="col">{what}</th><th scope="col">Example</th>'
                     "</tr></thead><tbody>")
        for group in groups:
            student, notebook = group.students[0], group.notebooks[0]
            link = report.link(student, notebook)
            example = f'<a href="{_e(link)}">{_e(student)}</a>' if link else _e(student)
            lines.append(f'<tr><td class="num">{group.count}</td>'
                         f"<td>{_e(names.get(group.grade_id, group.grade_id))}</td>"
                         f"<td>{_e(group.text)}</td><td>{example}</td></tr>")
        lines.append("</tbody></table>")
    lines.append("</section>")
    return "\n".join(lines)


def _look(report: AssignmentReport) -> str:
    lines = ['<section aria-labelledby="look"><h2 id="look">Before releasing grades</h2>']
    flagged = [row for row in report.rows if row.get("flagged")]
    lines.append(f"<h3>Flagged for review ({len(flagged)})</h3>")
    lines.append(_rows_table(flagged, "flagged", "Why it is flagged") if flagged
                 else "<p>None.</p>")
    other = [row for row in report.rows if row["status"] != "graded"]
    lines.append(f"<h3>Not graded ({len(other)})</h3>")
    lines.append(_rows_table(other, "status", "Status") if other else "<p>None.</p>")
    manual = [row for row in report.rows if row.get("needs_manual_grade") == "yes"]
    awaiting = {e.grade_id: e.name for e in report.exercises if not e.auto}
    lines.append(f"<h3>Awaiting a manual grade ({len(manual)})</h3>")
    if manual:
        items = []
        for row in manual:
            left = [awaiting[g] for g in awaiting if not str(row.get(g, "")).strip()]
            items.append(f"<li>{_e(row['student'])}"
                         + (f": {_e(', '.join(left))}" if left else "") + "</li>")
        lines.append("<ul>" + "".join(items) + "</ul>")
    else:
        lines.append("<p>None.</p>")
    lines.append(f"<h3>Problems ({len(report.problems)})</h3>")
    lines.append("<ul>" + "".join(f"<li>{_e(p)}</li>" for p in report.problems) + "</ul>"
                 if report.problems else "<p>None.</p>")
    lines.append("</section>")
    return "\n".join(lines)


def _rows_table(rows: list[dict[str, str]], column: str, heading: str) -> str:
    body = "".join(f'<tr><th scope="row">{_e(row["student"])}</th><td>{_e(row.get(column, ""))}'
                   "</td></tr>" for row in rows)
    return (f'<table><thead><tr><th scope="col">Student</th><th scope="col">{_e(heading)}</th>'
            f"</tr></thead><tbody>{body}</tbody></table>")


def _similarity(report: AssignmentReport) -> str:
    pairs = report.pairs[:PAIRS_SHOWN]
    lines = ['<section aria-labelledby="similarity"><h2 id="similarity">Similar answers, to '
             "look at</h2>",
             "<p>Pairs of submissions whose answer cells are most alike, by copydetect's "
             "fingerprints with the released notebook's code as boilerplate and every name "
             "replaced (renaming variables changes nothing). Similarity: the mean of the two "
             "shares of each student's own code found in the other's. A list to look at, "
             "never a verdict: short exercises have few ways to be written.</p>"]
    compared = len(report.codes) * (len(report.codes) - 1) // 2
    if not pairs:
        lines.append(f"<p>No pair of the {compared} compared shares any fingerprint.</p>"
                     "</section>")
        return "\n".join(lines)
    scores = sorted([p.similarity for p in report.pairs]
                    + [0.0] * (compared - len(report.pairs)))
    lines.append(f"<p>For comparison, the median pair of this class scores "
                 f"{scores[len(scores) // 2]:.2f}, and {len(report.pairs)} of the {compared} "
                 "pairs share any fingerprint at all.</p>")
    lines.append(f"<table><caption>The {len(pairs)} most similar of {compared} pairs"
                 "</caption><thead><tr>"
                 '<th scope="col">Rank</th><th scope="col">Students</th>'
                 '<th scope="col">Similarity</th><th scope="col">Shares</th></tr></thead><tbody>')
    for rank, pair in enumerate(pairs, 1):
        lines.append(f'<tr><td class="num">{rank}</td><td><a href="#pair-{rank}">'
                     f"{_e(pair.first)} and {_e(pair.second)}</a></td>"
                     f'<td class="num">{pair.similarity:.2f}</td>'
                     f'<td class="num">{pair.shares[0]:.2f} / {pair.shares[1]:.2f}</td></tr>')
    lines.append("</tbody></table>")
    for rank, pair in enumerate(pairs, 1):
        lines.append(f'<h3 id="pair-{rank}">{rank}. {_e(pair.first)} and {_e(pair.second)}: '
                     f"{pair.similarity:.2f}</h3>"
                     f"<table><caption>Answer cells of {_e(pair.first)} and "
                     f"{_e(pair.second)}, side by side</caption><thead><tr>"
                     f'<th scope="col">{_e(pair.first)}</th>'
                     f'<th scope="col">{_e(pair.second)}</th></tr></thead><tbody><tr>'
                     f'<td class="code"><pre>{_e(report.codes[pair.first])}</pre></td>'
                     f'<td class="code"><pre>{_e(report.codes[pair.second])}</pre></td>'
                     "</tr></tbody></table>")
    lines.append("</section>")
    return "\n".join(lines)


def failed_page(assignment: str, why: str) -> str:
    title = f"Cohort report: {assignment}"
    return "\n".join([_head(title), f"<h1>{_e(title)}</h1>", _private(),
                      f"<p>This assignment's report could not be built: {_e(why)}. The other "
                      "assignments' pages are unaffected.</p>", _foot()])


def index_page(cohort: GradedCohort, reports: list[AssignmentReport],
               pages: list[str]) -> str:
    title = "Cohort report"
    by_name = {r.assignment: r for r in reports}
    items = []
    for assignment, page in zip(cohort.assignments(), pages):
        report = by_name.get(assignment)
        named = [g for g in report.mistakes if g.named] if report else []
        said = (f": {len(report.rows)} submission(s), {len(report.graded)} graded; "
                f"{sum(g.count for g in named)} named mistake(s) made, of {len(named)} kind(s)"
                if report else ": could not be built")
        items.append(f'<li><a href="{_e(page)}">{_e(assignment)}</a>{_e(said)}</li>')
    problems = "".join(f"<li>{_e(p)}</li>" for p in cohort.problems + cohort.unread)
    return "\n".join([_head(title), f"<h1>{title}</h1>", _private(),
                      f"<p>Graded folder: <code>{_e(cohort.out)}</code></p>",
                      "<h2>Assignments</h2><ul>" + "".join(items) + "</ul>",
                      f"<h2>Every problem ({len(cohort.problems) + len(cohort.unread)})</h2>",
                      f"<ul>{problems}</ul>" if problems else "<p>None.</p>", _foot()])
