"""A hostile dataset, walked page by page in headless Chromium: every text a dataset brings — profile, requirement
type ids and phrases, preferences, timeline, situations, logs, utterances, topics, a memory built from them, a review
batch's guidelines — holds markdown images (nested brackets too), raw HTML images, stylesheets and CSS imports
pointing at a second local server standing for the outside world. The release passes ``pal validate``; after every
page and tab has rendered, that server has received nothing."""

from __future__ import annotations

import pytest

from palset.assemble import UserBundle, write_release
from palset.dataset import dataset_key
from palset.loader import load_dataset
from review.batches import plan_batch, quality_candidates
from testkit.browser import browser_page, chromium_available, running_app, wait_idle
from testkit.hostile_page import loaders, outside_server
from testkit.release import make_bundle
from tests.pages.apptest import app_workspace

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow(seconds=180),
    pytest.mark.skipif(not chromium_available(), reason="Debian chromium not installed (make browser)"),
]


def hostile_bundle(base: str) -> UserBundle:
    """A filler user whose every data text loads things from ``base`` if rendered as markup."""
    data = make_bundle("0000", sessions=3, logs_per_session=6, turns=6, query_sessions=1).model_dump(
        by_alias=True, mode="json")
    for field in ("name", "occupation", "health status", "family members", "hobbies"):
        data["profile"][field] = loaders(base, f"profile-{field.replace(' ', '-')}")
    aspect = next(iter(data["requirement_types"]))  # one more requirement type, its id a markdown image
    rid = f"{aspect}-![r]({base}/rid.png)"
    data["requirement_types"][aspect][rid] = loaders(base, "phrase")
    data["preferences"][aspect][rid] = {"pos": loaders(base, "pos"), "neg": loaders(base, "neg")}
    data["timeline"] = {m: loaders(base, f"month-{m}") for m in data["timeline"]}
    for n, sit in enumerate(data["situations"]):
        sit["situation"] = loaders(base, f"situation-{n}")
        sit["logs"][0]["content"] = loaders(base, f"log-{n}")
        for topic in sit["topics"]:
            topic["user_query"] = loaders(base, f"query-{n}")
            topic["requirement"] = loaders(base, f"requirement-{n}")
        sit["dialogue"][0]["user"]["content"] = loaders(base, f"user-turn-{n}")
        sit["dialogue"][0]["assistant"]["content"] = loaders(base, f"assistant-turn-{n}")
    return UserBundle.model_validate(data)


def test_a_hostile_dataset_loads_nothing_from_outside_on_any_page(tmp_path, monkeypatch):
    with outside_server() as outside:
        root = tmp_path / "hostile"
        write_release(root, [hostile_bundle(outside.base)])
        assert not load_dataset(root).errors  # what `pal validate` calls valid
        env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_EMBEDDER": "hash", "PAL_AUTH": "local",
               "PAL_DATASETS": f"hostile={root}"}
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        ws = app_workspace()
        dataset = load_dataset(root)
        ws.open_builder(dataset, "0000", "gold").run()
        batch = ws.reviews.create_batch(plan_batch(
            "Hostile", "quality", dataset_key(root), quality_candidates(dataset), 2, 7, 1, ["local"],
            guidelines=loaders(outside.base, "guidelines")), "local")
        sample = dataset.users["0000"].history[0].sample_id
        q = "dataset=hostile&user=0000"
        paths = ["/?dataset=hostile", *(f"/users?{q}&tab={t}" for t in ("Profile", "Timeline", "Logs", "Sessions")),
                 f"/users?{q}&session={sample}", *(f"/memory?{q}&tab={t}" for t in ("Snapshot", "Changes")),
                 f"/simulate?{q}", f"/evaluate?{q}", f"/review?dataset=hostile&batch={batch}", f"/review?{q}",
                 f"/settings?{q}", f"/audit?{q}", "/?dataset=hostile&tour=1"]
        with running_app(env=env, script="serve.py") as url, browser_page(height=2400) as page:
            shown = []
            for path in paths:
                page.goto(url + path)
                page.locator("[data-testid='stMainBlockContainer']").wait_for(timeout=90_000)
                wait_idle(page)
                page.wait_for_timeout(800)  # images and stylesheets a render asked for
                shown.append(page.get_by_text("profile-name", exact=False).count() > 0)
            page.goto(f"{url}/users?{q}&tab=Profile")
            wait_idle(page)
            page.get_by_text("phrase", exact=False).first.click()  # the requirement type's expander opens
            wait_idle(page)
            page.wait_for_timeout(800)
            found = list(outside.requests)
            # the control: the same browser does reach the outside server when a page really holds an image
            page.set_content(f'<img src="{outside.base}/control.png">')
            page.wait_for_timeout(1500)
        assert any(shown)  # the hostile texts were on screen, as text
        assert found == []
        assert outside.requests == ["GET /control.png"]
