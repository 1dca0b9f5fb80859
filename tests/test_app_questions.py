"""The four questions of issue 67, answered on the page alone in headless Chromium, step by step
as a new user would click, each answer checked against the command line run here with its
options written out by hand (the oracle is the CLI's JSON, not the page's own command):

1. does Llama-3-70B train on 64 H100s, and at what MFU: the search's fastest layout, applied;
2. the largest micro-batch that fits: the sentence under the verdict, and the points of the
   memory-against-``b`` curve that stay under the capacity line;
3. the request rate a Llama-3-8B deployment on one H100 sustains at p90 TTFT <= 0.5 s;
4. the most expensive operation of a layer and its bound (compute or memory).

A link with the page's state opens the same answer in a fresh page.  Each view's screenshot is
kept (``page_driver.screenshot``)."""

import json

from page_driver import cli, opened, screenshot, searched, served_page, settle

SEQUENCE, DEVICES, GLOBAL_BATCH = 8192, 64, 128
"""Llama-3-70B's pre-training sequence, on 64 H100s with 128 sequences a step."""


def g4(value: float) -> str:
    """As the command line prints a number: four significant digits."""
    return f"{value:.4g}"


def fastest_layout() -> dict:
    """``search``'s fastest layout of Llama-3-70B on 64 H100s, ZeRO-1 and flash attention."""
    status, out, error = cli("search", "--preset", "llama-3-70b", "--devices", str(DEVICES), "--global-batch",
                             str(GLOBAL_BATCH), "--seq", str(SEQUENCE), "--zero", "1", "--system", "h100", "--flash",
                             "--json")
    assert status == 0, error
    best = json.loads(out)["best"][0]
    assert best["schedule"] == "1f1b" and best["vp"] == 1 and best["offload"] == "none"   # the page's fields hold it
    return best


def summary_of(row: dict) -> dict:
    """``summary --json`` of a search row, written out as a user would type it."""
    layout = [f"{name}={row[name]}" for name in ("b", "m1", "s1", "p", "d", "n_micro")]
    status, out, error = cli("summary", "--preset", "llama-3-70b", "--set", f"l={SEQUENCE}", *layout,
                             "--zero", str(row["zero"]), "--recompute", row["recompute"], "--system", "h100",
                             "--flash", "--json")
    assert status == 0, error
    return json.loads(out)


def most_expensive(row: dict) -> tuple[str, str]:
    """The operation of one layer with the most time in ``table --format json --units si`` (forward
    and backward, communication included) and whether its compute or its memory time is larger."""
    status, out, error = cli("table", "--preset", "llama-3-70b", "--block", "layer", "--set", f"b={row['b']}",
                             f"l={SEQUENCE}", f"m1={row['m1']}", f"s1={row['s1']}", "--system", "h100", "--flash",
                             "--format", "json", "--units", "si")
    assert status == 0, error
    ops = json.loads(out)
    top = max(ops, key=lambda op: op["t_total_fwd"] + op["t_total_bwd"])
    compute, memory = top["t_comp_fwd"] + top["t_comp_bwd"], top["t_mem_fwd"] + top["t_mem_bwd"]
    return top["layer"], "compute" if compute >= memory else "memory"


def test_four_questions_answered_on_the_page(tmp_path):
    best = fastest_layout()
    oracle = summary_of(best)
    with served_page() as (page, url):
        opened(page, url)
        # 1. Llama-3-70B on 64 H100s: pick the model, the sequence, ZeRO-1 and flash; search; apply the fastest
        page.select_option("#preset", "llama-3-70b")
        page.select_option("#system", "h100")
        page.check("#flash")
        page.select_option("#zero", "1")
        page.fill("#set-l", str(SEQUENCE))
        settle(page)
        page.fill("#devices", str(DEVICES))
        page.fill("#global-batch", str(GLOBAL_BATCH))
        searches = int(page.get_attribute("body", "data-searches") or 0)
        page.click("#search-run")
        searched(page, searches)
        first = page.locator("#layout-0 td").all_inner_texts()
        assert first[1:5] == [str(best[k]) for k in ("m1", "s1", "p", "d")]
        page.click("#layout-0 button.apply")
        settle(page)
        verdict = page.inner_text("#verdict")
        peak, capacity = oracle["peak"]["bytes"], oracle["peak"]["capacity_bytes"]
        assert peak <= capacity and oracle["world_size"] == DEVICES
        assert verdict.startswith(f"fits: {g4(peak / 2**30)} GiB of {g4(capacity / 2**30)} GiB per device")
        assert f"on {DEVICES} h100s" in verdict and f"MFU {100 * oracle['predicted']['mfu']:.1f}%" in verdict
        screenshot(page, tmp_path, "training")

        # 2. the largest micro-batch that fits, in words and on the curve against b
        largest = oracle["peak"]["largest_micro_batch"]
        assert page.inner_text("#largest-b").endswith(f"79.65 GiB: {largest}")
        assert int(page.get_attribute("#plot-b-memory", "data-fitting")) == largest

        # 4. the most expensive operation of a layer, and its bound
        name, bound = most_expensive(best)
        assert page.inner_text("#most-expensive") == name and page.inner_text("#most-expensive-bound") == bound
        assert page.locator("#layers-table tr.top td").first.inner_text() == name

        # the address bar holds the state: a fresh page opened on it answers the same
        shared = page.url
        assert "preset=llama-3-70b" in shared and f"set-m1={best['m1']}" in shared
        again = page.context.browser.new_page(viewport={"width": 1280, "height": 1100})
        opened(again, shared)
        assert again.inner_text("#verdict") == verdict
        again.close()

        # 3. serving Llama-3-8B on one H100: the rate held at p90 TTFT <= 0.5 s
        page.click("#view-serving")
        page.select_option("#preset", "llama-3-8b")
        page.fill("#slo_ttft", "0.5")
        page.fill("#slo_itl", "")
        page.select_option("#slo_percentile", "90")
        settle(page)
        status, out, error = cli("inference", "--preset", "llama-3-8b", "--system", "h100", "--slo-ttft", "0.5",
                                 "--flash", "--json")      # flash attention stays checked from question 1
        assert status == 0, error
        load = json.loads(out)["load"]
        assert page.inner_text("#sustained-rate") == g4(load["sustained_rate"])
        assert load["p90_ttft"] <= 0.5
        assert page.inner_text("#serving-verdict").startswith("fits:")
        assert page.locator("#plot-rate-ttft polyline").count() == 2        # p50 and p90 against the rate
        screenshot(page, tmp_path, "serving")

        # and which layout of 2 devices serves most under that SLO: the page's ranking is the command line's
        page.fill("#serve-devices", "2")
        searches = int(page.get_attribute("body", "data-serve-searches") or 0)
        page.click("#serve-search-run")
        page.wait_for_function(f"Number(document.body.dataset.serveSearches || 0) > {searches} && "
                               f"document.body.dataset.pending === '0'", timeout=120_000)
        status, out, error = cli("inference", "--preset", "llama-3-8b", "--system", "h100", "--slo-ttft", "0.5",
                                 "--flash", "--devices", "2", "--json")
        assert status == 0, error
        best = json.loads(out)["layouts"][0]
        assert page.locator("#serve-layout-0 td").all_inner_texts()[1:3] == [best["layout"], g4(best["rate"])]


def test_a_slo_no_rate_meets_is_said_so():
    """Serving Llama-3-8B on one H100 at p90 TTFT <= 0.01 s: a lone request's first token takes
    longer (the command line's ``sustained_rate`` is 0), so the verdict says no rate meets the SLO,
    the load table is empty, and no curve is drawn (the page used to print "undefined" and ask for
    load tests at a rate of 0)."""
    status, out, error = cli("inference", "--preset", "llama-3-8b", "--system", "h100", "--slo-ttft", "0.01", "--json")
    assert status == 0, error
    assert json.loads(out)["load"]["sustained_rate"] == 0
    with served_page() as (page, url):
        opened(page, url)
        page.click("#view-serving")
        page.select_option("#preset", "llama-3-8b")
        page.fill("#slo_ttft", "0.01")
        page.fill("#slo_itl", "")
        settle(page)
        assert page.inner_text("#sustained-rate") == "no rate"
        assert "undefined" not in page.inner_text("body")
        assert page.locator("#load-table tr").count() == 0 and page.locator("#plot-rate-ttft polyline").count() == 0
