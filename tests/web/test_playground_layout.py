"""The playground's layout in headless Chromium, at a phone's width (390 px) and a desktop's (1280 px),
asserted on the elements' geometry: every fieldset of a tab is as wide as its neighbours and inside
its panel, no input cuts its placeholder short (the API key's, Upload's and Design's included), and
Record and Stop recording sit side by side. Each tab's screenshot is kept (tests/web/artifacts), and
README's screenshot is taken here: `POLYVOX_README_SCREENSHOT=1` writes it to docs/playground.png."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from web.playground import TABS, open_playground, speak, wait_for_sound

WIDTHS = {"phone": (390, 844), "desktop": (1280, 900)}
README_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "playground.png"

# The visible fieldsets of the tab shown: their left and right edges, and the panel's content box.
FIELDSETS = """() => {
  const panel = document.querySelector('[role="tabpanel"]:not([hidden])');
  const style = getComputedStyle(panel);
  const box = panel.getBoundingClientRect();
  const inner = [box.left + parseFloat(style.borderLeftWidth) + parseFloat(style.paddingLeft),
                 box.right - parseFloat(style.borderRightWidth) - parseFloat(style.paddingRight)];
  const edges = [...panel.querySelectorAll("fieldset")].filter((f) => f.offsetParent !== null)
    .map((f) => {
      const r = f.getBoundingClientRect();
      return [f.querySelector("legend").textContent, r.left, r.right];
    });
  return { inner, edges };
}"""

# Every visible input or textarea with a placeholder: the placeholder's width in the input's own font,
# and the width its text box has.
PLACEHOLDERS = """() => {
  const context = document.createElement("canvas").getContext("2d");
  return [...document.querySelectorAll("input[placeholder], textarea[placeholder]")]
    .filter((input) => input.offsetParent !== null)
    .map((input) => {
      const style = getComputedStyle(input);
      context.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
      const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
      return { id: input.id, needed: context.measureText(input.placeholder).width, room };
    });
}"""


def show_design_fieldset(page) -> None:
    """Voice design is VoxCPM2's (hidden on the embedded voice); shown here to check its layout."""
    page.evaluate("document.getElementById('design-voice').hidden = false")


@pytest.mark.parametrize("screen", WIDTHS)
def test_fieldsets_line_up_no_placeholder_is_cut_and_record_sits_beside_stop(
    page, embedded_server, artifacts, screen
):
    width, height = WIDTHS[screen]
    page.set_viewport_size({"width": width, "height": height})
    open_playground(page, embedded_server)
    show_design_fieldset(page)
    for tab in TABS:
        page.click(f"#tab-{tab}")
        layout = page.evaluate(FIELDSETS)
        (left, right) = layout["inner"]
        for legend, fieldset_left, fieldset_right in layout["edges"]:
            where = f"{legend!r} in the {tab} tab at {width} px"
            assert fieldset_left == pytest.approx(left, abs=1) and fieldset_right == pytest.approx(
                right, abs=1
            ), where
        cut = [p for p in page.evaluate(PLACEHOLDERS) if p["needed"] > p["room"] + 0.5]
        assert cut == [], f"placeholders cut short in the {tab} tab at {width} px"
        page.screenshot(path=str(artifacts / f"layout-{screen}-{tab}.png"), full_page=True)
    page.click("#tab-clone")
    record, stop = (page.locator(button).bounding_box() for button in ("#clone-record", "#clone-record-stop"))
    assert record["y"] == pytest.approx(stop["y"], abs=1) and record["x"] + record["width"] <= stop["x"]


def test_readme_screenshot_is_the_speak_tab_after_speaking(page, embedded_server, artifacts):
    """Pitch and emotion shown; on the embedded voice, as README says under it."""
    page.set_viewport_size({"width": 1280, "height": 900})
    open_playground(page, embedded_server)
    page.fill("#speak-input", "Hello from polyvox. This page speaks as the audio arrives.")
    page.select_option("#speak-voice", "nova")
    assert speak(page).startswith("Done"), page.inner_text("#speak-error")
    wait_for_sound(page)
    assert page.is_visible("#speak-pitch") and page.is_visible("#speak-emotion")
    shot = artifacts / "readme-playground.png"
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("POLYVOX_README_SCREENSHOT") == "1":
        shutil.copyfile(shot, README_SCREENSHOT)
