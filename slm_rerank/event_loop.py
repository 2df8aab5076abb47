"""The guard every synchronous entry point to the model stage shares.

The model stage runs its own loop (``asyncio.run``), which cannot start on a thread whose
loop is running: there asyncio's own error ("cannot be called from a running event loop")
says nothing of the way out, and the coroutine made for it warns that it was never awaited.
"""

from __future__ import annotations


def refuse_running_loop(called: str, instead: str) -> None:
    """Raise one clear RuntimeError when called on a running event loop's thread: what was
    ``called`` there and what to do ``instead``."""
    # imported here: slm_rerank.search imports this module, and --fast starts no event loop
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(f"{called} was called inside a running event loop; {instead}")
