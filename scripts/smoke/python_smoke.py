"""Smoke test of the installed ticketing-client distribution against a real server."""

import asyncio
import os
import sys
from importlib.metadata import metadata, version

import ticketing_client
from ticketing_client import AsyncTicketBroker, LockTimeoutError, TicketBroker

addr = os.environ["TICKETING_ADDR"]
assert ticketing_client.__version__ == version("ticketing-client"), "__version__ differs from the metadata"
meta = metadata("ticketing-client")
assert meta["Requires-Python"] and meta["License-Expression"] == "Apache-2.0", dict(meta)
assert ticketing_client.__file__ is not None and "site-packages" in ticketing_client.__file__, ticketing_client.__file__

with TicketBroker(addr) as broker:
    broker.wait_ready(5)
    with broker.acquire("smoke/py", wait=0, lease=10) as first:
        try:
            broker.acquire("smoke/py", wait=0, lease=10)
            raise AssertionError("granted twice")
        except LockTimeoutError:
            pass
    second = broker.acquire("smoke/py", wait=0, lease=10)
    assert second.token > first.token
    assert second.release() == "released"


async def main() -> int:
    async with AsyncTicketBroker(f"ticketing://{addr}") as broker:
        await broker.wait_ready(5)
        ticket = await asyncio.create_task(broker.acquire("smoke/py-async", wait=0, lease=10))
        assert await ticket.release() == "released"
        return ticket.token


print(f"python {sys.version.split()[0]} ok, ticketing-client {ticketing_client.__version__}, token {asyncio.run(main())}")
