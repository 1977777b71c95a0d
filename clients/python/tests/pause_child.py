"""A client process for the SIGSTOP test: acquires TICKETING_KEY (wait 3 s, lease 30 s) with the
asyncio broker and prints one JSON line per step; on a ticket, releases it."""

import asyncio
import json
import os
import sys

from ticketing_client import AsyncTicketBroker, TicketingError


def say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


async def main() -> None:
    async with AsyncTicketBroker(os.environ["TICKETING_ADDR"], on_error=lambda err: None) as broker:
        await broker.wait_ready(5)
        say(ready=True)
        sys.stdin.readline()  # "go": the key is held now
        task = asyncio.ensure_future(broker.acquire(os.environ["TICKETING_KEY"], wait=3, lease=30))
        await asyncio.sleep(0.3)
        say(sent=True)
        try:
            ticket = await task
        except TicketingError as err:
            say(error=err.code)
            return
        say(token=str(ticket.token), remaining=ticket.remaining())
        say(release=await ticket.release())


asyncio.run(main())
