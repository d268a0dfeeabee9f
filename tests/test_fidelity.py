"""How close the emulation came (pglab.analysis.fidelity, pglab.views.fidelity_html): synthetic frames, no servers."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from pglab.analysis import fidelity
from pglab.views import fidelity_html, report_notebook

OFF, ON, LOCAL, REMOTE = "off @ 10 clients", "on @ 20 clients", "local @ 20 clients", "remote @ 5 clients"
ARTICLE = pd.DataFrame({"point": [ON, OFF, LOCAL, REMOTE], "unit": "tps", "article": [254.0, 6247.4, 3000.0, 100.0]})


def _measured(**values: list[float]) -> pd.DataFrame:
    names = {"off": OFF, "on": ON, "local": LOCAL, "remote": REMOTE}
    return pd.DataFrame([{"point": names[k], "value": v} for k, vs in values.items() for v in vs])


MEASURED = _measured(off=[6100, 6000, 6200, 6150, 6050, 6300], on=[440, 444, 450, 430, 445, 460],
                     local=[2700, 2600, 2800])


def _calibration(k: float = 1.0, ok: bool = True, **extra: object) -> dict:
    return {"k": k, "share": 0.62, "period_us": 10000, "seconds": 35.2, "ok": ok, "said": "",
            "points": [{"point": OFF, "knob": "cpu", "article": 6247.4, "target": 6247.4 / k, "measured": 6100.0,
                        "error": -0.024, "within": True}], **extra}


def test_roles_order_and_columns() -> None:
    t = fidelity.table(ARTICLE, MEASURED, _calibration())
    assert list(t.columns) == fidelity.COLUMNS
    assert list(t.point) == [ON, OFF, LOCAL, REMOTE]  # the article's order, not the measured's
    assert list(t.role) == ["prediction", "calibration", "prediction", "not measured"]
    assert list(t.n) == [6, 6, 3, 0]
    # no calibration (an older run): every measured point is a prediction
    assert list(fidelity.table(ARTICLE, MEASURED, None).role) == ["prediction"] * 3 + ["not measured"]


def test_median_interval_error_sign_and_within() -> None:
    t = fidelity.table(ARTICLE, MEASURED, _calibration()).set_index("point")
    on = t.loc[ON]
    assert on.emulated == 444.5 and (on.ci_low, on.ci_high) == (430.0, 460.0)  # 6 values: the order-statistic range
    assert on.error == round(444.5 / 254 - 1, 4) > 0 and on.within is False
    local = t.loc[LOCAL]
    assert local.error == -0.1 and local.within is True  # below the article's: negative, within 20%
    off = t.loc[OFF]
    assert off.error == round(6125 / 6247.4 - 1, 4) and off.within is True  # -2%: within the 5% of a calibration
    remote = t.loc[REMOTE]
    assert math.isnan(remote.emulated) and math.isnan(remote.error) and remote.within is None


def test_a_calibration_point_is_held_to_five_percent() -> None:
    t = fidelity.table(ARTICLE, _measured(off=[5500.0] * 3, local=[2500.0] * 3), _calibration()).set_index("point")
    assert t.loc[OFF].within is False  # -12%: a prediction would pass, a calibration point does not
    assert t.loc[LOCAL].within is True and t.loc[LOCAL].error == pytest.approx(-1 / 6, abs=1e-4)


def test_slow_motion_divides_the_article_by_k() -> None:
    t = fidelity.table(ARTICLE, MEASURED, _calibration(k=2.0)).set_index("point")
    assert t.loc[ON].article == 254.0 and t.loc[ON].article_here == 127.0
    assert t.loc[LOCAL].error == round(2700 / 1500 - 1, 4)
    assert t.loc[REMOTE].article_here == 50.0
    for k in (None, "x", 0, -1, math.nan):  # no factor recorded, or none that makes sense: 1
        assert fidelity.k_of({"k": k}) == 1.0
    assert fidelity.k_of(None) == 1.0


def test_median_abs_error_is_over_predictions_only() -> None:
    t = fidelity.table(ARTICLE, _measured(off=[1000.0], on=[254 * 1.3], local=[3000 * 0.9]), _calibration())
    assert fidelity.median_abs_error(t) == pytest.approx(0.2)  # the calibration point's -84% left out
    assert fidelity.median_abs_error(fidelity.table(ARTICLE, _measured(off=[6247.4]), _calibration())) is None
    assert fidelity.median_abs_error(fidelity.table(ARTICLE.iloc[:0], MEASURED, None)) is None


def test_gate_passes_and_says_so() -> None:
    t = fidelity.table(ARTICLE, MEASURED, _calibration())
    ok, words = fidelity.gate(t, [OFF, LOCAL])
    assert ok
    assert words == (f"the emulation's predictions at {OFF}, {LOCAL} came within 20% of the article's (-2%, -10%)")


def test_gate_fails_naming_each_point() -> None:
    t = fidelity.table(ARTICLE, MEASURED, _calibration())
    ok, words = fidelity.gate(t, [ON, REMOTE, "nowhere @ 1 client"])
    assert not ok
    assert words == ("the emulation's predictions at the claim's own points are off: on @ 20 clients 444 tps "
                     "against the article's 254 (+75%), beyond 20%; not measured: remote @ 5 clients, "
                     "nowhere @ 1 client")
    assert fidelity.gate(t, [ON], tolerance=0.8)[0]  # the tolerance asked, not the one stored
    bad = fidelity.table(ARTICLE, _measured(off=[5500.0]), _calibration())
    ok, words = fidelity.gate(bad, [OFF], tolerance=0.5)  # a calibration point: its own 5%, whatever asked
    assert not ok and "beyond 5%" in words and "(-12%)" in words


def test_gate_in_slow_motion_says_the_division() -> None:
    ok, words = fidelity.gate(fidelity.table(ARTICLE, MEASURED, _calibration(k=2.0)), [ON])
    assert not ok and "against the article's 254 / k = 127 (+250%)" in words


def test_said() -> None:
    assert fidelity.said(None) == "" and fidelity.said({}) == ""
    assert fidelity.said(_calibration()) == ("CPU calibrated to the article's off @ 10 clients (6,247 tps): 6,100 "
                                             "measured at a 62% CPU share")
    slow = fidelity.said(_calibration(k=2.1))
    assert slow.endswith("; in slow motion, k = 2.1: every emulated time x2.1, the article's rates compared divided "
                         "by 2.1")
    assert "2,975 in slow motion" in slow
    assert fidelity.said(_calibration(ok=False, said="no share reached 6,247 tps")) == (
        "calibration failed: no share reached 6,247 tps")
    assert fidelity.said(_calibration(ok=False)).startswith("calibration failed: off @ 10 clients: 6,100 measured")


def test_table_is_deterministic_to_the_byte() -> None:
    shuffled = MEASURED.sample(frac=1, random_state=3)
    a = fidelity.table(ARTICLE, MEASURED, _calibration()).to_csv(index=False)
    assert a == fidelity.table(ARTICLE, shuffled, _calibration()).to_csv(index=False)
    assert a.splitlines()[0] == ",".join(fidelity.COLUMNS)


def test_empty_inputs() -> None:
    assert list(fidelity.table(ARTICLE.iloc[:0], MEASURED, None).columns) == fidelity.COLUMNS
    t = fidelity.table(ARTICLE, pd.DataFrame(columns=["point", "value"]), None)
    assert set(t.role) == {"not measured"} and not fidelity.gate(t, [ON])[0]
    assert fidelity_html.section_html(fidelity.table(ARTICLE.iloc[:0], MEASURED, None), None) == ""


def test_num_and_percent() -> None:
    assert [fidelity_html.num(x) for x in (6247.4, 444.5, 12.34, 0.01234, 1234567, 0, math.nan, None)] == [
        "6,250", "444", "12.3", "0.0123", "1,230,000", "0", "-", "-"]
    assert [fidelity.percent(e) for e in (0.12, -0.034, -0.001, 0.0)] == ["+12%", "-3%", "+0%", "+0%"]


def test_section_html() -> None:
    t = fidelity.table(ARTICLE, MEASURED, _calibration())
    h = fidelity_html.section_html(t, _calibration())
    assert h.startswith("<h2 id=\"fidelity\">How close the emulation came</h2><p>CPU calibrated")
    assert "Divided by k" not in h and "No slow motion (k = 1)" in h
    assert "<th>Point</th><th>Role</th><th>The article&#x27;s</th><th>Emulated (95% interval)</th><th>Off by</th>" in h
    assert h.count("<tr class=\"warn\">") == 1  # on @ 20 clients, +75%; local at -10% is not marked
    assert "calibration point" in h and ">prediction<" in h and ">not measured<" in h
    assert "6,250 tps" in h and "444 [430, 460]" in h and "<b>+75%</b>" in h and ">-10%<" in h
    assert "Median absolute error of the predictions: 42% (tolerance 20%)" in h
    assert "only where the predictions at its own points are within 20%" in h
    assert report_notebook.clean_html(h).count("<tr") == h.count("<tr")  # nothing the report's cleaner drops


def test_section_html_in_slow_motion() -> None:
    cal = _calibration(k=2.1)
    h = fidelity_html.section_html(fidelity.table(ARTICLE, MEASURED, cal), cal)
    assert "<th>Divided by k = 2.1</th>" in h and "2,970 tps" in h
    assert "slow motion: every emulated time was multiplied by k = 2.1" in h
    assert "the article's numbers are shown divided by k" in h


def test_section_html_escapes_and_repeats_to_the_byte() -> None:
    evil = "<script>alert(1)</script> & \"q\""
    article = pd.DataFrame({"point": [evil, ON], "unit": ["<i>tps</i>", "tps"], "article": [10.0, 254.0]})
    measured = pd.DataFrame({"point": [evil, evil, ON], "value": [11.0, 12.0, 250.0]})
    cal = _calibration(ok=False, said="<img src=x onerror=alert(1)>")
    h = fidelity_html.section_html(fidelity.table(article, measured, cal), cal)
    assert "<script>" not in h and "<img" not in h and "<i>tps" not in h
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;q&quot;" in h and "&lt;img src=x" in h
    again = fidelity_html.section_html(fidelity.table(article, measured, cal), cal)
    assert h.encode() == again.encode()
    assert "No prediction was measured" not in h and "The calibration failed" in h


def test_the_studies_calibrate_on_the_articles_own_numbers_and_no_claims_ratio() -> None:
    """Each calibration point is a number of the article's table (data/reference), and no claim's ratio."""
    from pathlib import Path

    from pglab.studies.fdw_overhead import claims as fdw_claims
    from pglab.studies.fdw_overhead import fidelity as fdw_fidelity
    from pglab.studies.synchronous_commit import claims as sc_claims
    from pglab.studies.synchronous_commit import fidelity as sc_fidelity

    ref = Path(__file__).resolve().parent.parent / "data" / "reference"
    sc = sc_fidelity.article_points(ref, "on").set_index("point").article
    assert len(sc) == 42 and set(sc_claims.CALIBRATION) == {"cpu", "flush"}
    for level, clients, tps in sc_claims.CALIBRATION.values():
        assert sc[sc_fidelity.point(level, clients)] == pytest.approx(tps)
        assert level != "on"  # every level claim is over on: on is never calibrated, nor a claim's judged count
    calibrated = {sc_fidelity.point(lv, c) for lv, c, _ in sc_claims.CALIBRATION.values()}
    assert not calibrated & set(sc_fidelity.level_points("local", [20]) + sc_fidelity.order_points([20]))
    fdw = fdw_fidelity.article_points(ref).set_index("point").article
    for kind, (_, figure) in fdw_claims.CALIBRATION.items():
        assert fdw[fdw_fidelity.point(kind, "local")] == pytest.approx(figure)
    for c in fdw_claims.claim_set().values():  # every claim rests on a foreign target: a prediction, never calibrated
        assert any("FDW" in p for p in fdw_fidelity.claim_points(c))
    assert sc_fidelity.level_points("local", [20]) == ["on @ 20 clients", "local @ 20 clients"]


def test_a_campaigns_table_is_over_its_runs_in_the_articles_units() -> None:
    """Each run's median times its own k is one value; the section says so and divides nothing by k."""
    runs = [fidelity.table(ARTICLE, _measured(on=[v / k]), _calibration(k=k)) for v, k in ((300, 2.0), (330, 3.0))]
    t = fidelity.pooled(runs)
    on = t.set_index("point").loc[ON]
    assert on["n"] == 2 and on["article_here"] == on["article"] and 300 <= on["emulated"] <= 330
    assert t.set_index("point").loc[OFF, "role"] == "calibration"
    h = fidelity_html.section_html(t, _calibration(k=3.0), runs=2)
    assert "Divided by k" not in h and "shown divided by k" not in h and "multiplied back by its own k" in h
