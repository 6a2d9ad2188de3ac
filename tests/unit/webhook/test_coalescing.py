"""Response writes of one event loop step leave as one write; closing sends what is buffered first."""

from __future__ import annotations

import asyncio

from dralab.webhook.transport import Coalescing


class Recorder(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:  # type: ignore[override]
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 1) if name == "peername" else default


def test_headers_and_body_leave_in_one_write_and_close_flushes() -> None:
    async def scenario() -> Recorder:
        raw = Recorder()
        out = Coalescing(raw, asyncio.get_running_loop())
        out.write(b"HTTP/1.1 200 OK\r\n\r\n")
        out.write(memoryview(b'{"allowed":true}'))
        assert raw.writes == []  # nothing sent inside the step
        await asyncio.sleep(0)  # the next step of the loop
        assert raw.writes == [b'HTTP/1.1 200 OK\r\n\r\n{"allowed":true}']
        out.write(b"last")
        out.close()  # a close must not lose the buffered bytes
        assert raw.writes[-1] == b"last" and raw.closed
        assert out.get_extra_info("peername") == ("127.0.0.1", 1)  # everything else is the transport's
        return raw

    raw = asyncio.run(scenario())
    assert len(raw.writes) == 2
