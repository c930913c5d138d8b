#!/usr/bin/python3
"""Checks a `roce matrix --html` page in a real headless browser.

    check_matrix.py PAGE.html EXPECTED

EXPECTED is JSON (inline, or @FILE), derived from the suite.json files, not
from the renderer:

    {"setups": 2,
     "cells": [{"case": "…", "group": "psn", "setup": 0,
                "verdict": "fails", "reason": "wire: …"}],   # every cell, every group
     "changed": ["…"]}                                    # cases whose verdict differs

On the laid-out page: every `tr.case` cell shows its verdict as text, has it as
class and its reason (or none) as `title`, and is visible; the rows and cells are
exactly the expected ones (none missing, none extra); the rows drawn highlighted
(class `changed`, and a case cell whose computed background differs from an
unchanged row's) are exactly the changed cases; the page loads nothing and logs
no error. Prints what it checked; exits 1 with every failure listed, 2 when the
browser cannot be started.

Runs chromium through chromedriver (Debian: chromium, chromium-driver,
python3-selenium; scripts/setup.sh --test installs them); $CHROMEDRIVER and
$CHROMIUM override their paths. No network is used.
"""
import sys

import headless

COLLECT = r"""
const rows = [];
for (const tr of document.querySelectorAll('#matrix tr.case')) {
  const caseTd = tr.querySelector('td.case');
  const cells = [];
  for (const td of tr.querySelectorAll('td.cell')) {
    const r = td.getBoundingClientRect();
    cells.push({setup: parseInt(td.dataset.setup, 10), text: td.textContent.trim(),
                classes: Array.from(td.classList), title: td.getAttribute('title'),
                shown: r.width > 0 && r.height > 0 && getComputedStyle(td).visibility === 'visible'});
  }
  rows.push({case: tr.dataset.case, group: tr.dataset.group, classes: Array.from(tr.classList),
             bg: getComputedStyle(caseTd).backgroundColor, cells: cells});
}
const external = Array.from(document.querySelectorAll('[src],[href]'))
  .map(e => e.getAttribute('src') || e.getAttribute('href'));
return {rows: rows, setups: document.querySelectorAll('#matrix th.setup').length,
        resources: performance.getEntriesByType('resource').map(r => r.name), external: external};
"""


def main():
    args = headless.arguments("check_matrix", __doc__)
    if args is None:
        return 2
    page, exp = args
    failures = []
    fail = failures.append

    def say(msg):
        print(f"  ok: {msg}")

    loaded = headless.collect("check_matrix", page, COLLECT)
    if loaded is None:
        return 2
    res, logs, binary = loaded
    print(f"check_matrix: {page} in {binary or 'chromium'} (headless)")

    if res["resources"] or res["external"]:
        fail(f"not self-contained: loads {res['resources']}, references {res['external']}")
    errors = [l for l in logs if l.get("level") == "SEVERE"]
    if errors:
        fail(f"the browser logged errors: {[e.get('message') for e in errors]}")
    if res["setups"] != exp["setups"]:
        fail(f"{res['setups']} setup columns, expected {exp['setups']}")

    seen = {}
    for r in res["rows"]:
        for c in r["cells"]:
            key = (r["case"], r["group"], c["setup"])
            if key in seen:
                fail(f"cell {key} drawn twice")
            seen[key] = c
    want = {(c["case"], c["group"], c["setup"]): c for c in exp["cells"]}
    for key in sorted(set(seen) - set(want)):
        fail(f"a cell no suite.json has: {key}")
    for key, w in sorted(want.items()):
        c = seen.get(key)
        if c is None:
            fail(f"missing cell {key}")
            continue
        if c["text"] != w["verdict"]:
            fail(f"cell {key} shows {c['text']!r}, suite.json says {w['verdict']!r}")
        if w["verdict"] not in c["classes"] or "cell" not in c["classes"]:
            fail(f"cell {key} has classes {c['classes']}, expected 'cell {w['verdict']}'")
        if c["title"] != w.get("reason"):
            fail(f"cell {key} says on hover {c['title']!r}, expected {w.get('reason')!r}")
        if not c["shown"]:
            fail(f"cell {key} is not visible")
    if len(seen) == len(want) and not any(f.startswith("cell") or f.startswith("missing") for f in failures):
        say(f"{len(want)} cells: text, class and hover reason match suite.json")

    unchanged_bg = {r["bg"] for r in res["rows"] if "changed" not in r["classes"]}
    marked = {r["case"] for r in res["rows"] if "changed" in r["classes"]}
    painted = {r["case"] for r in res["rows"] if r["bg"] not in unchanged_bg}
    expected = set(exp["changed"])
    if marked != expected:
        fail(f"rows with class 'changed': {sorted(marked)}, expected {sorted(expected)}")
    if painted != expected:
        fail(f"rows drawn highlighted: {sorted(painted)}, expected {sorted(expected)}")
    if marked == expected == painted:
        say(f"highlighted rows are exactly the {len(expected)} changed cases: {sorted(expected)}")

    if failures:
        print(f"check_matrix: FAILED, {len(failures)} problems:", file=sys.stderr)
        for f in failures:
            print(f"  - {f}", file=sys.stderr)
        return 1
    print("check_matrix: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
