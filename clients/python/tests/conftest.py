from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Any, Callable, Iterator

import pytest

from ticketing_client._timing import Timing, timing


@pytest.fixture(autouse=True)
def default_timing() -> Iterator[None]:
    """Tests may shorten the CLIENT.md timings; each test starts from the contract values."""
    saved = Timing(**vars(timing))
    yield
    for k, v in vars(saved).items():
        setattr(timing, k, v)


def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Any:
    """Runs ``async def`` tests in a fresh event loop (no plugin needed), bounded to 60 s."""
    fn = pyfuncitem.obj
    if inspect.iscoroutinefunction(fn):
        args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}

        async def bounded() -> None:
            await asyncio.wait_for(fn(**args), 60)

        asyncio.run(bounded())
        return True
    return None
