#!/usr/bin/env python3
"""Loads cql/10-multi-tenant-schema.cql's table with tenants of very different sizes.

Usage: python3 cql/multi_tenant_load.py [HOST] [PORT] [TENANTS]
Tenant 1 is big (many users and sessions); the others are small, so the big tenant spans
several physical partitions when the split threshold is small
(e.g. `ringgate serve --set partitions.physical_split_bytes=4MiB`).
"""
import random
import sys
from datetime import datetime, timedelta, timezone

from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args

host = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1"
port = int(sys.argv[2]) if len(sys.argv) > 2 else 9042
tenants = int(sys.argv[3]) if len(sys.argv) > 3 else 200

session = Cluster([host], port=port).connect()
insert = session.prepare(
    "INSERT INTO saas.events (tenant_id, user_id, session_id, ts, kind, payload) VALUES (?, ?, ?, ?, ?, ?)")
rng = random.Random(42)
start = datetime(2024, 1, 1, tzinfo=timezone.utc)
rows = []
for t in range(1, tenants + 1):
    users = 200 if t == 1 else rng.randint(1, 5)
    for u in range(1, users + 1):
        for s in range(1, rng.randint(1, 4) + 1):
            for e in range(rng.randint(1, 10)):
                rows.append((f"tenant-{t:04d}", f"user-{u:04d}", f"session-{s:04d}",
                             start + timedelta(seconds=rng.randint(0, 10**7)),
                             rng.choice(["click", "view", "buy"]), "x" * rng.randint(10, 500)))
execute_concurrent_with_args(session, insert, rows, concurrency=64)
print(f"loaded {len(rows)} rows for {tenants} tenants")
