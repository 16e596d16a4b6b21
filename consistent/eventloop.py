"""The event loop the long-running servers use: uvloop's when installed, else asyncio's.

uvloop (the ``fast`` extra) makes each socket read and write, and each turn of the loop,
several times cheaper than asyncio's pure-Python selector loop, which is most of the cost of a
short statement in the proxy and in the emulator.  Tests keep asyncio's loop unless they ask.
"""

from __future__ import annotations

import asyncio
import importlib

__all__ = ["new_event_loop"]


def new_event_loop(use_uvloop: bool = True) -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's when installed (and wanted), else asyncio's."""
    if use_uvloop:
        try:
            uvloop = importlib.import_module("uvloop")
        except ImportError:
            pass
        else:
            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
            return loop
    return asyncio.new_event_loop()
