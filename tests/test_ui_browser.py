"""A real browser against `perfdoctor ui`: headless Chromium answers two questions and sees the ranking."""
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO, stop_process
from perfdoctor.yamlio import load_file

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
LABEL = re.compile(r"\[(\w+), [^\]]*\](?:: (baseline|now))?$")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def perfdoctor_cmd():
    script = Path(sys.executable).parent / "perfdoctor"
    return [str(script)] if script.exists() else [sys.executable, "-m", "perfdoctor.cli"]


def wait_healthy(proc, port, log, deadline_s=90):
    url = f"http://127.0.0.1:{port}/_stcore/health"
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"perfdoctor ui exited with {proc.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.read().strip() == b"ok":
                    return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"perfdoctor ui not healthy after {deadline_s}s:\n{log.read_text()}")


def browser(profile):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}", "--window-size=1600,1800"):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


class FormNotReady(Exception):
    """The question's heading is drawn but none of its answer fields yet (a busy machine renders slowly)."""


def answer_form(driver, wait, values, attempts=6):
    """Type the example's values into the question form and submit; retried if Streamlit re-renders under us
    or has not drawn the fields yet."""
    from selenium.common.exceptions import StaleElementReferenceException
    for attempt in range(attempts):
        try:
            return _answer_form_once(driver, wait, values)
        except (StaleElementReferenceException, FormNotReady) as exc:
            if attempt == attempts - 1:
                raise AssertionError(f"no field of '{exc}' could be answered") if isinstance(exc, FormNotReady) \
                    else exc
            time.sleep(1)


def _answer_form_once(driver, wait, values):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    time.sleep(0.5)   # let the rerun that drew this question settle
    form = driver.find_element(By.CSS_SELECTOR, '[data-testid="stForm"]')
    heading = form.find_element(By.TAG_NAME, "h3").text
    typed = 0
    for box in form.find_elements(By.CSS_SELECTOR, "input[type=text]"):
        m = LABEL.search(box.get_attribute("aria-label") or "")
        if not m:
            continue
        part = "baseline" if m.group(2) == "baseline" else "current"
        if m.group(1) in values[part]:
            box.click()
            box.send_keys(Keys.CONTROL, "a")
            box.send_keys(str(values[part][m.group(1)]))
            typed += 1
    if not typed:
        raise FormNotReady(heading)
    form.find_element(By.XPATH, ".//button[.//p[text()='Submit answer']]").click()
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, '[data-testid="stForm"] h3').text != heading)
    return heading


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} not installed (apt-get install chromium chromium-driver)")
def test_browser_two_questions_rank_prompt_growth_first(tmp_path):
    pytest.importorskip("selenium")
    pytest.importorskip("streamlit")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    ex = load_file(REPO / "examples" / "code_completion_13b.yaml")
    port, log = free_port(), tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(perfdoctor_cmd() + ["ui", "--port", str(port)], stdout=out, stderr=subprocess.STDOUT,
                                cwd=tmp_path)
    driver = None
    try:
        wait_healthy(proc, port, log)
        driver = browser(tmp_path / "profile")
        from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
        wait = WebDriverWait(driver, 60, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))
        driver.get(f"http://127.0.0.1:{port}/")
        wait.until(lambda d: d.find_elements(By.XPATH, "//h1[contains(., 'Diagnose a slowdown')]"))
        driver.find_element(By.XPATH, "//label[.//p[text()='Time to first token (TTFT)']]").click()
        wait.until(lambda d: "Split latency" in d.find_element(By.CSS_SELECTOR, '[data-testid="stForm"] h3').text)

        asked = [answer_form(driver, wait, ex), answer_form(driver, wait, ex)]
        assert "Split latency into queue, prefill and decode" in asked[0]
        assert "Load, batch and request lengths" in asked[1]

        def first_ranked(d):
            items = d.find_elements(By.XPATH, "//ol[li//code[text()='prompt_length_growth']]/li[1]")
            return items and "prompt_length_growth" in items[0].text
        wait.until(first_ranked)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stGraphVizChart"] svg'))
        time.sleep(1)
        driver.save_screenshot(str(tmp_path / "ui.png"))
        if os.environ.get("PERFDOCTOR_SCREENSHOT_DIR"):
            shot_dir = Path(os.environ["PERFDOCTOR_SCREENSHOT_DIR"])
            shot_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy(tmp_path / "ui.png", shot_dir / "ui.png")
        assert "Traceback" not in driver.page_source
    finally:
        if driver is not None:
            driver.quit()
        stop_process(proc)
