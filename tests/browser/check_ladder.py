#!/usr/bin/python3
"""Checks a `roce run --html` / `roce report --html` page in a real headless browser.

    check_ladder.py PAGE.html EXPECTED

EXPECTED is JSON (inline, or @FILE) with the facts the page must show:

    {"passed": 0, "failed": 1,
     "scenarios": [
       {"name": "…", "pass": false,
        "frames": 35,                      # arrows in the ladder (0: no ladder)
        "lanes": ["a", "b"],               # endpoints drawn as lanes
        "failing_verdicts": ["wire of QP q from b"],
        "class_counts": {"dropped": 1, "nak": 1},
        "arrows": [{"frame": 12, "from": "b", "to": "a",
                    "label": "SEND First  PSN 8227874",
                    "classes": ["dropped"], "not_classes": ["nak"]}],
        "notes": ["No capture was recorded"]}  # visible text in the section
     ]}

Everything is measured on the laid-out page (getScreenCTM, getBoundingClientRect):
each arrow starts on its sender's lane and ends on its receiver's lane (±2 px),
except dropped ones, which end between the lanes at a ✗; arrows run top to bottom
in frame order; labels are visible, inside the diagram, and overlap no other text;
the page loads nothing from anywhere and logs no error. Prints what it checked;
exits 1 with every failure listed, 2 when the browser cannot be started.

Runs chromium through chromedriver (Debian: chromium, chromium-driver,
python3-selenium; scripts/setup.sh --test installs them); $CHROMEDRIVER and
$CHROMIUM override their paths. No network is used.
"""
import os
import sys

import headless

TOL = 2.0  # px

COLLECT = r"""
function pt(el, x, y) {
  const m = el.getScreenCTM();
  const p = el.ownerSVGElement.createSVGPoint();
  p.x = x; p.y = y;
  const q = p.matrixTransform(m);
  return [q.x, q.y];
}
function rect(el) {
  const r = el.getBoundingClientRect();
  return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height};
}
function shown(el) {
  // Rendered, by style up to the root; fill not transparent.
  for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
    const cs = getComputedStyle(e);
    if (cs.display === 'none' || cs.visibility !== 'visible' || parseFloat(cs.opacity) === 0) return false;
  }
  const cs = getComputedStyle(el);
  if (el instanceof SVGElement) {
    if (cs.fill === 'none' || /rgba\(.*,\s*0\)$/.test(cs.fill)) return false;
  }
  const r = el.getBoundingClientRect();
  return r.width > 0 && r.height > 0 && parseFloat(cs.fontSize) >= 8;
}
const res = {resources: performance.getEntriesByType('resource').map(e => e.name), external: []};
for (const el of document.querySelectorAll('[src], link[href], [href]')) {
  const u = el.getAttribute('src') || el.getAttribute('href') || '';
  if (!u.startsWith('#')) res.external.push(el.outerHTML.slice(0, 120));
}
const sum = document.getElementById('summary');
res.summary = sum ? {passed: sum.dataset.passed, failed: sum.dataset.failed, text: sum.innerText, shown: shown(sum)} : null;
res.scenarios = [];
for (const sec of document.querySelectorAll('section.scenario')) {
  const s = {name: sec.dataset.name, pass: sec.dataset.pass, text: sec.innerText};
  const badge = sec.querySelector('.badge');
  s.badge = badge ? {text: badge.textContent.trim(), shown: shown(badge)} : null;
  s.failing = Array.from(sec.querySelectorAll('tr.verdict.failed')).map(tr => ({what: tr.cells[2].textContent, shown: shown(tr)}));
  const svgs = sec.querySelectorAll('svg.ladder');
  s.ladders = svgs.length;
  const svg = svgs[0];
  if (svg) {
    s.svg = rect(svg);
    s.lanes = Array.from(svg.querySelectorAll('line.lane')).map(l => {
      const a = pt(l, l.x1.baseVal.value, l.y1.baseVal.value), b = pt(l, l.x2.baseVal.value, l.y2.baseVal.value);
      const r = rect(l);
      return {name: l.dataset.endpoint, x1: a[0], y1: a[1], x2: b[0], y2: b[1], rect_x: (r.left + r.right) / 2};
    });
    s.arrows = Array.from(svg.querySelectorAll('.arrow')).map(g => {
      const sh = g.querySelector('line.shaft');
      const a = sh ? pt(sh, sh.x1.baseVal.value, sh.y1.baseVal.value) : null;
      const b = sh ? pt(sh, sh.x2.baseVal.value, sh.y2.baseVal.value) : null;
      const head = g.querySelector('.head');
      const x = g.querySelector('.x');
      const label = g.querySelector('text.label');
      const title = g.firstElementChild && g.firstElementChild.tagName === 'title' ? g.firstElementChild.textContent : null;
      return {
        tag: g.tagName, classes: Array.from(g.classList), frame: g.dataset.frame, from: g.dataset.from, to: g.dataset.to,
        data_label: g.dataset.label, title: title, start: a, end: b,
        head: head ? rect(head) : null, x: x ? rect(x) : null,
        x_title: x && x.querySelector('title') ? x.querySelector('title').textContent : null,
        label: label ? {text: label.textContent, rect: rect(label), shown: shown(label)} : null,
      };
    });
    s.texts = Array.from(svg.querySelectorAll('text')).map(t => ({
      cls: t.getAttribute('class') || '', text: t.textContent,
      frame: t.closest('.arrow') ? t.closest('.arrow').dataset.frame : null, rect: rect(t)}));
  }
  res.scenarios.push(s);
}
return res;
"""


def fail_list():
    failures = []

    def fail(msg):
        failures.append(msg)

    return failures, fail


def overlaps(a, b, eps=0.5):
    return (a["left"] < b["right"] - eps and b["left"] < a["right"] - eps
            and a["top"] < b["bottom"] - eps and b["top"] < a["bottom"] - eps)


def check_scenario(exp, s, fail, say):
    name = exp["name"]
    want_pass = exp["pass"]
    shown = "PASS" if want_pass else "FAIL"
    b = s.get("badge")
    if not b or not b["shown"] or b["text"] != shown:
        fail(f"{name!r}: the page does not show {shown} (badge: {b})")
    elif s["pass"] != ("true" if want_pass else "false"):
        fail(f"{name!r}: data-pass is {s['pass']}, expected {want_pass}")
    else:
        say(f"{name!r}: {shown} shown")
    failing = [f["what"] for f in s["failing"] if f["shown"]]
    if "failing_verdicts" in exp and sorted(failing) != sorted(exp["failing_verdicts"]):
        fail(f"{name!r}: failing expectations shown {failing}, expected {exp['failing_verdicts']}")
    elif failing:
        say(f"{name!r}: failing expectations highlighted: {', '.join(failing)}")
    for n in exp.get("notes", []):
        if n not in s["text"]:
            fail(f"{name!r}: the section does not show {n!r}")
        else:
            say(f"{name!r}: shows {n!r}")

    frames = exp["frames"]
    if frames == 0:
        if s["ladders"]:
            fail(f"{name!r}: a ladder is drawn, but no frames were expected")
        return
    if s["ladders"] != 1:
        fail(f"{name!r}: {s['ladders']} ladder diagrams, expected 1")
        return
    lanes = {l["name"]: l for l in s["lanes"]}
    if "lanes" in exp and sorted(lanes) != sorted(exp["lanes"]):
        fail(f"{name!r}: lanes {sorted(lanes)}, expected {sorted(exp['lanes'])}")
    for l in s["lanes"]:
        if abs(l["x1"] - l["x2"]) > 0.5:
            fail(f"{name!r}: lane {l['name']} is not vertical ({l['x1']:.1f} → {l['x2']:.1f})")
        if abs(l["x1"] - l["rect_x"]) > 1.5:
            fail(f"{name!r}: lane {l['name']}: SVG geometry x={l['x1']:.1f} but laid out at x={l['rect_x']:.1f}")
    say(f"{name!r}: lanes " + ", ".join(f"{n} at x={l['x1']:.1f}" for n, l in sorted(lanes.items())))

    arrows = s["arrows"]
    if len(arrows) != frames:
        fail(f"{name!r}: {len(arrows)} arrows, expected {frames} (one per RoCE frame)")
    else:
        say(f"{name!r}: {len(arrows)} arrows = {frames} RoCE frames")
    bad_geometry = 0
    prev = None
    for a in arrows:
        where = f"{name!r} frame {a['frame']}"
        if not a["title"] or a["title"].split()[0] != a["frame"]:
            fail(f"{where}: its <title> is not the decoded frame ({a['title']!r})")
        src, dst = lanes.get(a["from"]), lanes.get(a["to"])
        if not src or not dst or src is dst:
            fail(f"{where}: from {a['from']!r} to {a['to']!r}: not two lanes of the diagram")
            bad_geometry += 1
            continue
        if not a["start"] or not a["end"]:
            fail(f"{where}: no shaft (line.shaft) to measure")
            bad_geometry += 1
            continue
        (x1, y1), (x2, y2) = a["start"], a["end"]
        ok = True
        if "synthesized" in a["classes"]:
            # Sent by the switch: it starts between the lanes.
            lo, hi = sorted((src["x1"], dst["x1"]))
            if not (lo + TOL < x1 < hi - TOL):
                fail(f"{where}: synthesized by the switch, but starts at x={x1:.1f}, not between the lanes ({lo:.1f}–{hi:.1f})")
                ok = False
        elif abs(x1 - src["x1"]) > TOL:
            fail(f"{where}: starts at x={x1:.1f}, but {a['from']}'s lane is at x={src['x1']:.1f}")
            ok = False
        if "dropped" in a["classes"]:
            lo, hi = sorted((src["x1"], dst["x1"]))
            if not (lo + TOL < x2 < hi - TOL):
                fail(f"{where}: dropped, but ends at x={x2:.1f}, not between the lanes ({lo:.1f}–{hi:.1f})")
                ok = False
            x = a["x"]
            if not x or abs((x["left"] + x["right"]) / 2 - x2) > TOL or a["x_title"] != "dropped by the lab switch":
                fail(f"{where}: dropped, but no ✗ titled 'dropped by the lab switch' where it ends ({x}, {a['x_title']!r})")
                ok = False
        else:
            if abs(x2 - dst["x1"]) > TOL:
                fail(f"{where}: ends at x={x2:.1f}, but {a['to']}'s lane is at x={dst['x1']:.1f}")
                ok = False
            h = a["head"]
            tip = None if not h else (h["right"] if dst["x1"] > src["x1"] else h["left"])
            if tip is None or abs(tip - dst["x1"]) > TOL:
                fail(f"{where}: its arrowhead does not end on {a['to']}'s lane (tip {tip}, lane {dst['x1']:.1f})")
                ok = False
        if abs(y1 - y2) > 0.5:
            fail(f"{where}: not horizontal (y {y1:.1f} → {y2:.1f})")
            ok = False
        for l in (src, dst):
            if not (min(l["y1"], l["y2"]) <= y1 <= max(l["y1"], l["y2"])):
                fail(f"{where}: at y={y1:.1f}, outside the lane lines")
                ok = False
        if prev:
            if int(a["frame"]) <= int(prev["frame"]):
                fail(f"{where}: comes after frame {prev['frame']}: not in frame order")
                ok = False
            if y1 <= prev["start"][1] + 1:
                fail(f"{where}: at y={y1:.1f}, not below frame {prev['frame']} (y={prev['start'][1]:.1f})")
                ok = False
        if not ok:
            bad_geometry += 1
        prev = a
    if arrows and not bad_geometry:
        ndrop = sum("dropped" in a["classes"] for a in arrows)
        say(f"{name!r}: every arrow starts on its sender's lane and ends on its receiver's (±{TOL:g} px); "
            f"{ndrop} dropped end between the lanes at a ✗; frames {arrows[0]['frame']}–{arrows[-1]['frame']} run top to bottom")

    # Labels: visible, inside the diagram, the text they claim, and overlapping nothing.
    svg = s["svg"]
    bad_labels = 0
    for a in arrows:
        lab = a["label"]
        where = f"{name!r} frame {a['frame']}"
        if not lab or not lab["shown"]:
            fail(f"{where}: its label is not visible")
            bad_labels += 1
            continue
        r = lab["rect"]
        if r["left"] < svg["left"] - 1 or r["right"] > svg["right"] + 1 or r["top"] < svg["top"] - 1 or r["bottom"] > svg["bottom"] + 1:
            fail(f"{where}: its label is outside the diagram (clipped)")
            bad_labels += 1
        if lab["text"] != a["data_label"]:
            fail(f"{where}: label text {lab['text']!r} is not data-label {a['data_label']!r}")
            bad_labels += 1
    texts = sorted(s["texts"], key=lambda t: t["rect"]["top"])
    clashes = 0
    for i, t in enumerate(texts):
        for u in texts[i + 1:]:
            if u["rect"]["top"] >= t["rect"]["bottom"]:
                break
            if "label" in (t["cls"] + " " + u["cls"]).split() and overlaps(t["rect"], u["rect"]):
                clashes += 1
                if clashes <= 10:
                    fail(f"{name!r}: text {t['text']!r} (frame {t['frame']}) overlaps {u['text']!r} (frame {u['frame']})")
    if clashes > 10:
        fail(f"{name!r}: … {clashes} overlapping texts in all")
    if not bad_labels and not clashes:
        say(f"{name!r}: {len(arrows)} labels visible inside the diagram; no label overlaps any of its {len(texts)} texts")

    by_frame = {a["frame"]: a for a in arrows}
    for e in exp.get("arrows", []):
        where = f"{name!r} frame {e['frame']}"
        a = by_frame.get(str(e["frame"]))
        if not a:
            fail(f"{where}: no arrow")
            continue
        problems = []
        for k in ("from", "to"):
            if k in e and a[k] != e[k]:
                problems.append(f"{k} {a[k]!r}, expected {e[k]!r}")
        if "label" in e and (a["data_label"] != e["label"] or not a["label"] or a["label"]["text"] != e["label"]):
            problems.append(f"label {a['data_label']!r}, expected {e['label']!r}")
        for c in e.get("classes", []):
            if c not in a["classes"]:
                problems.append(f"not marked {c!r} (classes {a['classes']})")
        for c in e.get("not_classes", []):
            if c in a["classes"]:
                problems.append(f"marked {c!r}, but should not be")
        if problems:
            fail(f"{where}: " + "; ".join(problems))
        else:
            say(f"{where}: {a['from']} → {a['to']} {a['data_label']!r} [{' '.join(c for c in a['classes'] if c != 'arrow')}]")
    for c, n in exp.get("class_counts", {}).items():
        got = sum(c in a["classes"] for a in arrows)
        if got != n:
            fail(f"{name!r}: {got} arrows marked {c!r}, expected {n}")
    if exp.get("class_counts"):
        say(f"{name!r}: marks counted: " + ", ".join(f"{c} {n}" for c, n in exp["class_counts"].items()))


def main():
    args = headless.arguments("check_ladder", __doc__)
    if args is None:
        return 2
    page, exp = args
    failures, fail = fail_list()

    def say(msg):
        print(f"  ok: {msg}")

    loaded = headless.collect("check_ladder", page, COLLECT)
    if loaded is None:
        return 2
    res, logs, binary = loaded
    print(f"check_ladder: {page} in {binary or 'chromium'} (headless)")

    if res["resources"] or res["external"]:
        fail(f"the page is not self-contained: loads {res['resources']}, references {res['external']}")
    else:
        say("self-contained: nothing loaded, no src/href outside the page")
    errors = [l for l in logs if l.get("level") == "SEVERE"]
    if errors:
        fail(f"the browser logged errors: {[e.get('message') for e in errors]}")
    sm = res["summary"]
    if not sm or not sm["shown"]:
        fail("no visible summary (#summary)")
    else:
        for k in ("passed", "failed"):
            if k in exp and (sm[k] != str(exp[k]) or f"{exp[k]} {k}" not in sm["text"]):
                fail(f"the summary shows {sm[k]} {k} ({sm['text'].splitlines()[1:2]}), expected {exp[k]}")
        if "passed" in exp and "failed" in exp:
            say(f"summary: {exp['passed']} passed, {exp['failed']} failed")
    scen = {s["name"]: s for s in res["scenarios"]}
    if len(res["scenarios"]) != len(exp["scenarios"]):
        fail(f"{len(res['scenarios'])} scenario sections, expected {len(exp['scenarios'])}")
    for e in exp["scenarios"]:
        s = scen.get(e["name"])
        if not s:
            fail(f"no section for scenario {e['name']!r} (sections: {list(scen)})")
            continue
        check_scenario(e, s, fail, say)

    if failures:
        print(f"check_ladder: FAILED, {len(failures)} problems:", file=sys.stderr)
        for f in failures:
            print(f"  - {f}", file=sys.stderr)
        return 1
    print("check_ladder: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
