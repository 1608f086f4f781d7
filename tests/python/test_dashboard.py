"""The dashboard (issue 19) in a real headless Chromium (the Debian package `chromium`, which
scripts/test installs): the page, served at `/` with no external resource, fetches
`/api/tables` and draws each table's physical partitions; what it shows must match
system_views. A screenshot is kept in target/test-output/dashboard.png."""

import html.parser
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cassandra.cluster import Cluster

from metrics_text import get
from rgtest import create_keyspace

OUTPUT = Path(os.environ.get("RINGGATE_TEST_OUTPUT", Path(__file__).resolve().parents[2] / "target" / "test-output"))


def chromium(*args):
    exe = shutil.which("chromium")
    if exe is None:
        pytest.fail("chromium is not installed (scripts/test installs the Debian package)")
    # --virtual-time-budget lets the page's fetch and first render finish before the dump.
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=4000",
           "--user-data-dir=" + str(OUTPUT / "chromium-profile"), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


class Rows(html.parser.HTMLParser):
    """The `<tr class="part" data-...>` rows the page rendered."""

    def __init__(self):
        super().__init__()
        self.parts = []
        self.external = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and a.get("class") == "part":
            self.parts.append(a)
        for key in ("src", "href"):
            if a.get(key, "").startswith(("http:", "https:", "//")):
                self.external.append(a[key])


def test_dashboard_shows_what_system_views_show(server_factory, unique_name):
    OUTPUT.mkdir(parents=True, exist_ok=True)
    srv = server_factory()
    c = Cluster(contact_points=[srv.host], port=srv.port)
    s = c.connect()
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text) WITH cosmosdb_provisioned_throughput = 30000")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, ?)")
    for k in range(300):
        s.execute(ins, (k, "v" * (k % 40)))
    status, ctype, page = get(srv, "/")
    assert status == 200 and ctype.startswith("text/html")
    # Self-contained: nothing loaded from elsewhere.
    static = Rows()
    static.feed(page)
    assert not static.external and "<script src" not in page

    url = f"http://{srv.host}:{srv.http_port}/"
    dom = Rows()
    dom.feed(chromium("--dump-dom", url))
    shown = {int(p["data-id"]): (int(p["data-bytes"]), int(p["data-logical"]))
             for p in dom.parts if p["data-table"] == f"{ks}.t"}
    views = {r.partition_id: (r.bytes, r.logical_partitions) for r in s.execute(
        "SELECT partition_id, bytes, logical_partitions FROM system_views.physical_partitions "
        "WHERE keyspace_name = %s AND table_name = %s", (ks, "t"))}
    assert len(views) == 3
    assert shown == views
    shot = OUTPUT / "dashboard.png"
    chromium("--window-size=1280,900", f"--screenshot={shot}", url)
    assert shot.stat().st_size > 10_000
    c.shutdown()
