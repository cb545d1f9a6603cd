"""A counting TCP relay between a client and the engine: how many HTTP requests reach the
engine and how many bytes come back, measured on the wire, outside the code measured.

The relay runs its own event loop in a thread of the bench; a sidecar pointed at it as its
upstream sends every engine call through it (its callers' and its own: the vector store's).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

MAX_HEAD_BYTES = 1 << 20  # a request head (request line and headers) longer than this is junk


class FramingError(ValueError):
    """Bytes that are not HTTP/1.1 requests."""


class RequestCounter:
    """Finds the complete HTTP/1.1 requests in a client's byte stream, fed in pieces as
    they arrive: each request line and headers, then the body its `Content-Length` or
    `Transfer-Encoding: chunked` frames (chunks, the last one and its trailers)."""

    def __init__(self) -> None:
        self.requests = 0
        self._completed: list[str] = []
        self._request = ""  # the method and path of the request being read
        self._buffer = b""
        self._body_left = 0  # bytes of a Content-Length body, or of a chunk and its CRLF
        self._state = "head"  # head, body, chunk-size, chunk-data, trailers

    def feed(self, data: bytes) -> list[str]:
        """Take the next bytes of the stream; returns the requests they completed, each as
        its method and path (no query string)."""
        self._buffer += data
        while self._step():
            pass
        completed, self._completed = self._completed, []
        return completed

    def _step(self) -> bool:
        """Consume one framing element from the buffer; False when it needs more bytes."""
        if self._state in ("body", "chunk-data"):
            if len(self._buffer) < self._body_left:
                self._body_left -= len(self._buffer)
                self._buffer = b""
                return False
            self._buffer = self._buffer[self._body_left:]
            self._body_left = 0
            if self._state == "body":
                self._finish()
            else:
                self._state = "chunk-size"
            return True
        if self._state == "head":
            self._buffer = self._buffer.lstrip(b"\r\n")  # stray CRLFs between requests
        end = self._buffer.find(b"\r\n\r\n" if self._state == "head" else b"\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise FramingError("no end of request head")
            return False
        line, self._buffer = self._buffer[:end], self._buffer[end + 2:]
        if self._state == "head":
            self._buffer = self._buffer[2:]
            self._head(line)
        elif self._state == "chunk-size":
            size = _hex(line.split(b";", 1)[0])  # a chunk extension follows a ';'
            self._state, self._body_left = ("trailers", 0) if size == 0 else (
                "chunk-data", size + 2)
        elif not line:  # trailers end with an empty line
            self._finish()
        return True

    def _head(self, head: bytes) -> None:
        request_line, *lines = head.split(b"\r\n")
        method, _, target = request_line.decode("latin-1").partition(" ")
        self._request = f"{method} {target.split(' ', 1)[0].split('?', 1)[0]}"
        headers = {}
        for line in lines:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip().lower()
        if b"chunked" in headers.get(b"transfer-encoding", b""):
            self._state = "chunk-size"
            return
        length = headers.get(b"content-length", b"0")
        if not length.isdigit():
            raise FramingError(f"Content-Length {length!r}")
        self._body_left = int(length)
        if self._body_left:
            self._state = "body"
        else:
            self._finish()

    def _finish(self) -> None:
        self.requests += 1
        self._completed.append(self._request)
        self._state = "head"


def _hex(text: bytes) -> int:
    try:
        return int(text.strip(), 16)
    except ValueError:
        raise FramingError(f"chunk size {text!r}") from None


@dataclass
class Traffic:
    """What went through the relay since the last `reset`."""

    requests: int = 0
    bytes_sent: int = 0  # client -> engine
    bytes_received: int = 0  # engine -> client
    calls: Counter[str] = field(default_factory=Counter)  # "METHOD /path" -> requests


class CountingRelay:
    """A loopback TCP relay to the engine at `upstream` (http://host:port), counting
    requests and bytes; yields its URL. Meant for counting passes only: relaying adds a
    hop, so latencies measured through it are not the engine's."""

    def __init__(self, upstream: str):
        host, _, port = upstream.removeprefix("http://").rstrip("/").rpartition(":")
        self._target = (host, int(port))
        self.traffic = Traffic()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.url = ""

    def reset(self) -> Traffic:
        """The traffic so far, and start counting afresh."""
        with self._lock:
            counted, self.traffic = self.traffic, Traffic()
        return counted

    def __enter__(self) -> str:
        self._thread.start()
        self._ready.wait(timeout=10)
        return self.url

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", 0))
        port = server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self._ready.set()
        self._loop.run_forever()
        server.close()
        open_connections = asyncio.all_tasks(self._loop)
        for task in open_connections:  # each closes its sockets as it ends
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*open_connections, return_exceptions=True))
        self._loop.close()

    async def _connection(self, client_reader: asyncio.StreamReader,
                          client_writer: asyncio.StreamWriter) -> None:
        try:
            engine_reader, engine_writer = await asyncio.open_connection(*self._target)
        except OSError:
            client_writer.close()
            return
        counter = RequestCounter()

        def upstream(data: bytes) -> None:
            completed = counter.feed(data)
            with self._lock:
                self.traffic.requests += len(completed)
                self.traffic.calls.update(completed)
                self.traffic.bytes_sent += len(data)

        def downstream(data: bytes) -> None:
            with self._lock:
                self.traffic.bytes_received += len(data)

        await asyncio.gather(_pipe(client_reader, engine_writer, upstream),
                             _pipe(engine_reader, client_writer, downstream))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                count: Callable[[bytes], None]) -> None:
    """Copy until EOF, counting each piece; then close the other side's writer."""
    try:
        while data := await reader.read(65536):
            count(data)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, FramingError):
        pass
    finally:
        writer.close()
