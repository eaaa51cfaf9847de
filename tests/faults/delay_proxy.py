"""A TCP forwarder that delays what it forwards, for the delay and jitter rows of the fault matrix
(the kernel here has no ``netem`` qdisc). It runs on the learner host, in front of the bridge:

    python -m tests.faults.delay_proxy --listen 127.0.0.1:5556 --target 10.231.0.1:5555 --control FILE

Every piece of data read from one side is written to the other ``delay_ms`` later, plus a uniform
random ``±jitter_ms``, never before the piece read ahead of it (a TCP stream keeps its order: jitter
on the wire reaches a reader as bunched, late bytes, which is what this makes). The delay applies
to both directions. ``FILE`` holds ``{"delay_ms": .., "jitter_ms": ..}`` and is read again whenever it
changes, so the case driver turns the fault on and off while connections stay up. When either side
of a connection closes, both do. Bounded: it exits when its parent does (``--seconds``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from pathlib import Path


class Control:
    def __init__(self, path: Path):
        self.path, self.mtime, self.delay_s, self.jitter_s = path, None, 0.0, 0.0

    def refresh(self) -> None:
        try:
            mtime = self.path.stat().st_mtime_ns
            if mtime != self.mtime:
                raw = json.loads(self.path.read_text() or "{}")
                self.mtime = mtime
                self.delay_s = float(raw.get("delay_ms", 0.0)) / 1e3
                self.jitter_s = float(raw.get("jitter_ms", 0.0)) / 1e3
        except (OSError, ValueError):
            pass

    def release_at(self, now: float, previous: float) -> float:
        extra = self.delay_s + (random.uniform(-self.jitter_s, self.jitter_s) if self.jitter_s else 0.0)
        return max(previous, now + max(0.0, extra))


async def _pump(reader, writer, control: Control) -> None:
    queue: asyncio.Queue = asyncio.Queue()

    async def send() -> None:
        while True:
            at, data = await queue.get()
            if data is None:
                return
            wait = at - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(send())
    last = 0.0
    try:
        while data := await reader.read(65536):
            last = control.release_at(time.monotonic(), last)
            queue.put_nowait((last, data))
        queue.put_nowait((0.0, None))
        await sender
    except (OSError, asyncio.CancelledError):
        pass
    finally:
        sender.cancel()
        writer.close()


async def main(args) -> None:
    control = Control(Path(args.control))
    host, port = args.target.rsplit(":", 1)

    async def serve(c_reader, c_writer) -> None:
        try:
            u_reader, u_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            c_writer.close()
            return
        up = asyncio.create_task(_pump(c_reader, u_writer, control))
        down = asyncio.create_task(_pump(u_reader, c_writer, control))
        await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        for t in (up, down):
            t.cancel()
        for w in (u_writer, c_writer):
            w.close()

    lhost, lport = args.listen.rsplit(":", 1)
    server = await asyncio.start_server(serve, lhost, int(lport))
    parent, end = os.getppid(), time.monotonic() + args.seconds
    async with server:
        while time.monotonic() < end and os.getppid() == parent:
            control.refresh()
            await asyncio.sleep(0.02)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--control", required=True)
    ap.add_argument("--seconds", type=float, default=7200.0)
    asyncio.run(main(ap.parse_args()))
