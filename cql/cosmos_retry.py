"""A retry policy for the Python driver (cassandra-driver / scylla-driver) against Cosmos-style
rate limiting: ringgate (and Azure Cosmos DB's API for Cassandra) answers a request over its
table's throughput with Overloaded (0x1001) and `RetryAfterMs=<n>` in the message. The driver's
default policy moves such a request to the next host, and a one-node cluster has none
(NoHostAvailable). This policy waits RetryAfterMs (at least; a jittered backoff doubling from
10 ms when many clients contend) and retries on the same host.

    from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
    from cosmos_retry import CosmosRetryPolicy
    profile = ExecutionProfile(retry_policy=CosmosRetryPolicy())
    cluster = Cluster(["127.0.0.1"], execution_profiles={EXEC_PROFILE_DEFAULT: profile})

The wait happens on the driver's I/O thread, so it also pauses the session's other requests:
fine for a loader whose requests all go to the throttled table; an application mixing tables
may rather catch OverloadedErrorMessage in its own code, or run the server with
`throughput.server_side_retry = true`.
"""
import random
import re
import time

from cassandra.policies import RetryPolicy
from cassandra.protocol import OverloadedErrorMessage

RETRY_AFTER = re.compile(r"RetryAfterMs=(\d+)")


class CosmosRetryPolicy(RetryPolicy):
    def __init__(self, max_retries=20, max_wait_ms=5000):
        self.max_retries = max_retries
        self.max_wait_ms = max_wait_ms

    def on_request_error(self, query, consistency, error, retry_num):
        if isinstance(error, OverloadedErrorMessage) and retry_num < self.max_retries:
            m = RETRY_AFTER.search(str(error))
            hint_ms = int(m.group(1)) if m else 100
            # RetryAfterMs is when the budget has room for one request; many clients told the
            # same moment all come back at once and all but one are refused again. So wait at
            # least the hint, and at least a backoff doubling from 10 ms with jitter: 20
            # retries then span seconds of contention, not a fraction of one.
            backoff_ms = min(10 * 2 ** retry_num, self.max_wait_ms) * random.uniform(0.5, 1.0)
            wait_ms = max(hint_ms, backoff_ms)
            time.sleep(min(wait_ms, self.max_wait_ms) / 1000.0)
            return self.RETRY, consistency
        return super().on_request_error(query, consistency, error, retry_num)
