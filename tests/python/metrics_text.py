"""Scraping ringgate's HTTP listener with a real HTTP client (urllib) and parsing the
Prometheus text format (version 0.0.4) it serves."""

import re
import urllib.request

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def get(srv, path):
    """(status, content type, body text) of GET http://<server's http.listen><path>."""
    url = f"http://{srv.host}:{srv.http_port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


class Metrics:
    """One scrape: samples by name, each a list of (labels dict, value); TYPE by family."""

    def __init__(self, text):
        self.samples = {}
        self.types = {}
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ", 3)
                assert name not in self.types, f"family {name} declared twice"
                self.types[name] = kind
                continue
            if not line or line.startswith("#"):
                continue
            m = SAMPLE.match(line)
            assert m, f"not a sample line: {line!r}"
            labels = dict(LABEL.findall(m.group(3) or ""))
            self.samples.setdefault(m.group(1), []).append((labels, float(m.group(4))))

    def series(self, name, **labels):
        """The samples of `name` whose labels include `labels`."""
        want = {k: str(v) for k, v in labels.items()}
        return [(l, v) for l, v in self.samples.get(name, [])
                if all(l.get(k) == x for k, x in want.items())]

    def value(self, name, **labels):
        """The one sample of `name` with these labels."""
        found = self.series(name, **labels)
        assert len(found) == 1, (name, labels, found)
        return found[0][1]

    def count(self):
        return sum(len(v) for v in self.samples.values())


def scrape(srv):
    status, ctype, body = get(srv, "/metrics")
    assert status == 200, (status, body)
    assert ctype.startswith("text/plain; version=0.0.4"), ctype
    return Metrics(body)
