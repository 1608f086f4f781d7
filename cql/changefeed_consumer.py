"""Follows the change feed of a table, as Azure Cosmos DB's API for Cassandra serves it and
ringgate does too: `SELECT ... WHERE COSMOS_CHANGEFEED_START_TIME() = '<time>'`, one page at a
time, sending back the paging state of the previous page for ever. Each page holds the latest
version of the rows changed since; an empty page means nothing changed yet (wait and ask again
with the same paging state).

    python3 cql/changefeed_consumer.py shop.orders --start '2026-11-23 10:00:00'
    python3 cql/changefeed_consumer.py shop.orders --state /tmp/orders.feed     # resumable
    python3 cql/changefeed_consumer.py shop.orders --token-range -9223372036854775808 0  # half

Prints one JSON object per changed row (its columns, plus `row_token`). With --state the paging
state is saved after every page, so a restarted consumer (or server) continues where it was.
--deletes adds `AND CHANGEFEED_DELETES() = true` (ringgate only): deleted rows appear with their
primary key and null columns. --token-range LO HI reads only tokens in (LO, HI] (LO included
when it is the lowest token), so a group of consumers can split a table's feed.

Do not iterate over the ResultSet of a feed query: every page has a paging state, so the
driver's automatic paging would never stop. Read `current_rows` and `paging_state` instead.
"""
import argparse
import datetime
import json
import os
import sys
import time

from cassandra.cluster import Cluster
from cassandra.metadata import protect_name
from cassandra.query import SimpleStatement

MIN_TOKEN = -(2**63)


def feed_query(table, start, columns, pk, deletes=False, token_range=None):
    q = (f"SELECT token({pk}) AS row_token, {columns} FROM {table} "
         f"WHERE COSMOS_CHANGEFEED_START_TIME() = '{start}'")
    if deletes:
        q += " AND CHANGEFEED_DELETES() = true"
    if token_range:
        lo, hi = token_range
        q += f" AND token({pk}) {'>=' if lo == MIN_TOKEN else '>'} {lo} AND token({pk}) <= {hi}"
    return q


def columns_and_key(session, keyspace, table):
    """All columns of a table and its partition key columns (for token()), as CQL lists."""
    meta = session.cluster.metadata.keyspaces[keyspace].tables[table]
    names = lambda cols: ", ".join(protect_name(c.name) for c in cols)
    return names(meta.columns.values()), names(meta.partition_key)


def load_state(path):
    try:
        with open(path) as f:
            return bytes.fromhex(f.read().strip()) or None
    except FileNotFoundError:
        return None


def save_state(path, state):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(state.hex())
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("table", help="keyspace.table")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9042)
    ap.add_argument("--start", help="UTC time 'YYYY-MM-DD HH:MM:SS[.fff]' (default: now)")
    ap.add_argument("--page", type=int, default=100, help="rows per page")
    ap.add_argument("--interval", type=float, default=0.5, help="seconds to wait after an empty page")
    ap.add_argument("--deletes", action="store_true")
    ap.add_argument("--token-range", nargs=2, type=int, metavar=("LO", "HI"))
    ap.add_argument("--state", help="file keeping the paging state between runs")
    ap.add_argument("--seconds", type=float, help="stop after this long (default: never)")
    args = ap.parse_args(argv)
    keyspace, table = args.table.split(".", 1)
    start = args.start or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    cluster = Cluster([args.host], port=args.port)
    session = cluster.connect()
    columns, pk = columns_and_key(session, keyspace, table)
    query = feed_query(args.table, start, columns, pk, args.deletes, args.token_range)
    state = load_state(args.state) if args.state else None
    deadline = time.monotonic() + args.seconds if args.seconds else None
    while deadline is None or time.monotonic() < deadline:
        rs = session.execute(SimpleStatement(query, fetch_size=args.page), paging_state=state)
        for row in rs.current_rows:
            print(json.dumps(row._asdict(), default=str), flush=True)
        state = rs.paging_state
        if args.state:
            save_state(args.state, state)
        if not rs.current_rows:
            time.sleep(args.interval)
    cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
