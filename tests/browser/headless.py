"""What the browser checks share: their arguments, and a page loaded in headless
chromium (through chromedriver, nothing allowed off the machine) with a script run
in it. Each returns None after saying why on stderr; the check then exits 2."""
import json
import os
import shutil
import sys
import tempfile


def arguments(name, doc):
    """(page, expectations) from `PAGE SPEC` (SPEC: JSON, or @FILE holding it)."""
    if len(sys.argv) != 3:
        print(doc.strip().split("\n\n")[1], file=sys.stderr)
        return None
    page, spec = sys.argv[1], sys.argv[2]
    if spec.startswith("@"):
        with open(spec[1:]) as f:
            spec = f.read()
    exp = json.loads(spec)
    if not os.path.isfile(page):
        print(f"{name}: {page}: no such file", file=sys.stderr)
        return None
    return page, exp


def collect(name, page, script):
    """(what `script` returned, the browser's log, the chromium binary) for `page`."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:
        print(f"{name}: cannot import selenium ({e}); install python3-selenium (scripts/setup.sh --test does)", file=sys.stderr)
        return None
    opts = webdriver.ChromeOptions()
    binary = os.environ.get("CHROMIUM") or next(
        (p for p in ("/usr/lib/chromium/chromium", "/usr/bin/chromium") if os.path.exists(p)), None)
    if binary:
        opts.binary_location = binary
    profile = tempfile.mkdtemp(prefix=f"{name}-")
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000", f"--user-data-dir={profile}",
              # Nothing may leave the machine: no proxy reachable, no name resolves.
              "--proxy-server=http://127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-default-apps", "--disable-extensions", "--no-first-run", "--mute-audio"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver_path = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
    try:
        driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=opts)
    except Exception as e:  # noqa: BLE001 - any failure to start is reported the same way
        print(f"{name}: cannot start headless chromium with {driver_path}: {e}\n"
              "hint: install chromium and chromium-driver (scripts/setup.sh --test does)", file=sys.stderr)
        shutil.rmtree(profile, ignore_errors=True)
        return None
    try:
        driver.get("file://" + os.path.abspath(page))
        res = driver.execute_script(script)
        logs = driver.get_log("browser")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    return res, logs, binary
