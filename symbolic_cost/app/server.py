"""The HTTP side of the page: ``GET /`` sends ``page.html``, ``GET /api/choices`` the choices
the command line's parsers accept (presets, systems, ZeRO stages, ...), and ``POST /api/KIND``
runs the command of each of the page's requests (``app.commands.WORDS``: ``summary``, ``sweep``,
``layers``, ``search``, ``formula``, ``inference``).
The command line is handed in by the ``serve`` command (its ``main`` and ``build_parser``): the
page sits below it and imports none of it.

Built for a network that may be hostile:

* each connection is read by a thread of its own with a socket timeout (``READ_SECONDS``), so a
  client that sends half a request, or nothing, holds only its own thread, and a whole request
  (its line, headers and body) must arrive within ``REQUEST_SECONDS``, so one that trickles a byte
  at a time is cut off too; at most ``CONNECTIONS`` are open at once, and the next is answered
  ``503`` at once;
* a body must state its ``Content-Length`` once (an integer up to ``LARGEST_REQUEST``, else
  ``400`` or ``413``; none: ``411``), and a chunked body is refused (``411``), not misread;
* the ``Host`` header must name the address and port the page is served on, and an ``Origin``,
  when sent, must be that page (``403``): another site's script in the user's browser, or a DNS
  name rebound to this machine, gets no answer;
* the commands run one at a time in the main thread (``Jobs``): the command line's time budget
  (``budget.time_limit``, a CPU-time ``SIGPROF`` timer) limits each answer as it limits a command, and
  at most ``WAITING`` answers queue (``503`` beyond).
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import json
import os
import queue
import socket
import sys
import threading
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from symbolic_cost.app.commands import CHOICES, SERVING_CHOICES, WORDS, answer
from symbolic_cost import REPORT
from symbolic_cost.checks import InputError, repeated_keys
from symbolic_cost.digits import whole_number

PAGE = Path(__file__).with_name("page.html")
LARGEST_REQUEST = 1_000_000
"""Bytes a request body may hold (a config.json is a few kilobytes)."""
READ_SECONDS = 10
"""Seconds a connection may wait between the parts of its request before it is closed."""
REQUEST_SECONDS = 30
"""Seconds a whole request may take to arrive, from the wait for its first line to its body's last
byte (a client trickling a byte every few seconds never waits ``READ_SECONDS`` at once)."""
CONNECTIONS = 32
"""Connections read at once; the next is answered ``503``."""
WAITING = 8
"""Answers that may wait for the main thread; the next is answered ``503``."""


def parser_choices(build_parser, command: str) -> dict:
    """The choices of ``command``'s options, read from its parser (``build_parser(command)``, the
    command line's: so the page offers exactly what it accepts), with their defaults; a switch
    (``--flash``) has its default only.

    >>> from symbolic_cost.cli import build_parser
    >>> parser_choices(build_parser, "summary")["zero"]["choices"]
    [0, 1, 2, 3]
    """
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return {a.dest: {"choices": list(a.choices or ()), "default": a.default} for a in sub._actions
            if a.choices or isinstance(a, argparse.BooleanOptionalAction)}


def choices(build_parser) -> dict:
    """What ``GET /api/choices`` sends: the presets, the page's choices, flash attention's default,
    the formula fields and the serving view's formats and SLO percentiles."""
    summary, formula = parser_choices(build_parser, "summary"), parser_choices(build_parser, "formula")
    inference = parser_choices(build_parser, "inference")
    return {"preset": summary["preset"], **{name: summary[name] for name in (*CHOICES, "flash")},
            "field": formula["total"], **{name: inference[name] for name in SERVING_CHOICES}}


HTTP_STATUS = {0: 200, 2: 422}
"""The HTTP status of an answer by its command's exit status: 200 for an answer, 422 (Unprocessable
Content: the request was read, a value in it was refused) for a refusal, whose one line is its
``error``; anything else (3, an internal error) 500.  The body is the answer's JSON whatever the status."""


class Jobs:
    """The answers the connections' threads hand to the main thread, which runs them one at a
    time (``run_forever``): a command redirects the process's standard output and sets its
    ``SIGPROF`` budget, neither of which threads may share."""

    def __init__(self, size: int = WAITING):
        self.waiting = queue.Queue(size)

    def ask(self, work):
        """``work()``'s result, run in the main thread; ``None`` when the queue is full."""
        done, box = threading.Event(), {}
        try:
            self.waiting.put_nowait((work, box, done))
        except queue.Full:
            return None
        done.wait()
        if "error" in box:
            raise box["error"]
        return box["value"]

    def run_forever(self):
        while True:
            work, box, done = self.waiting.get()
            try:
                box["value"] = work()
            except Exception as error:        # handed back to the connection's thread
                box["error"] = error
            finally:
                done.set()


class Handler(BaseHTTPRequestHandler):
    """Answers the page's requests through the command line's ``main`` and ``build_parser`` (set by
    ``serve``, with the ``jobs`` queue and the ``origins`` allowed); logs nothing (the terminal
    shows the address only)."""

    main = build_parser = jobs = None
    origins: tuple | None = ()
    timeout = READ_SECONDS                    # StreamRequestHandler: the socket's read timeout

    def log_message(self, *args) -> None:
        pass

    def handle_one_request(self) -> None:
        """One request, whose arrival is cut off after ``REQUEST_SECONDS`` (its socket's reading
        side shut: the wait for more ends as the end of the stream); ``arrived`` stops the clock."""
        self.deadline = threading.Timer(REQUEST_SECONDS, self.cut_off)
        self.deadline.daemon = True
        self.deadline.start()
        try:
            super().handle_one_request()
        finally:
            self.deadline.cancel()

    def cut_off(self) -> None:
        try:
            self.connection.shutdown(socket.SHUT_RD)
        except OSError:
            pass
        self.close_connection = True

    def arrived(self) -> None:
        """The request has arrived whole: its answer is not raced by ``REQUEST_SECONDS``."""
        self.deadline.cancel()

    def send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, status: int, value) -> None:
        """``value`` as JSON; one holding NaN or Infinity (which Python writes and JSON has not: the
        page's ``JSON.parse`` would fail on it, and show no answer) is sent as an internal error."""
        try:
            body = json.dumps(value, allow_nan=False)
        except ValueError:
            status, body = 500, json.dumps({"error": f"symbolic-cost: internal error: the answer holds NaN or "
                                                     f"Infinity, which JSON has not; {REPORT}"})
        self.send(status, body.encode(), "application/json")

    def refused(self) -> bool:
        """Send ``403`` (and say so) when the ``Host`` is not one of ``origins`` (any, for a
        wildcard address: ``None``) or an ``Origin`` is not the page of that ``Host``."""
        host, origin = self.headers.get("Host"), self.headers.get("Origin")
        if (self.origins is not None and host not in self.origins) or (origin is not None and origin != f"http://{host}"):
            where = "this machine's addresses" if self.origins is None else self.origins[0]
            self.send_json(403, {"error": f"this page answers requests for {where} from its own page only"})
            return True
        return False

    def do_GET(self) -> None:
        self.arrived()
        if self.refused():
            return
        if self.path in ("/", "/index.html"):
            self.send(200, PAGE.read_bytes(), "text/html; charset=utf-8")
        elif self.path == "/api/choices":
            self.send_json(200, choices(self.build_parser))
        else:
            self.send_json(404, {"error": f"no page {self.path}"})

    def do_POST(self) -> None:
        if self.refused():
            return
        kind = self.path.removeprefix("/api/")
        if kind not in WORDS:
            return self.send_json(404, {"error": f"no request {self.path}"})
        size = self.body_size()
        if size is None:
            return
        body = self.rfile.read(size)
        self.arrived()
        if len(body) < size:                 # cut off (``REQUEST_SECONDS``) or the client left
            self.close_connection = True
            return self.send_json(408, {"error": f"the request's body ended before its Content-Length of {size:,} "
                                                 f"bytes, or did not arrive within {REQUEST_SECONDS} s"})
        try:        # a number with a fraction or an exponent kept as written (1e400 is no float's infinity)
            request = json.loads(body or b"{}", object_pairs_hook=unique_object, parse_float=Decimal)
        except RepeatedKey as error:
            return self.send_json(400, {"error": str(error)})
        except (ValueError, RecursionError) as error:     # not JSON, or nested past the parser's depth
            return self.send_json(400, {"error": unreadable(error)})
        try:
            answered = self.jobs.ask(lambda: answer(kind, request, self.main))
        except Exception as error:      # a bug of ours, as cli.main says of one: the server goes on
            return self.send_json(500, {"error": f"symbolic-cost: internal error: {type(error).__name__}: {error}; "
                                                 f"{REPORT}"})
        if answered is None:
            return self.send_json(503, {"error": f"{WAITING} answers are waiting already: try again"})
        self.send_json(HTTP_STATUS.get(answered["status"], 500), answered)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """``http.server``'s own refusals (a malformed request line, a method without a ``do_``
        handler) as JSON, as every other answer: a method other than GET and POST is ``405`` with
        ``Allow``, not an HTML page of ``501``."""
        if code == 501:
            code, message = 405, f"this page answers GET and POST, not {self.command}"
        self.close_connection = True
        body = json.dumps({"error": message or self.responses.get(code, ("refused",))[0]}).encode()
        self.send_response(code)
        if code == 405:
            self.send_header("Allow", "GET, POST")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def body_size(self) -> int | None:
        """The body's stated length, or ``None`` after refusing the request: chunked or without
        a length (411), a length that is not a whole number (400) or too large (413)."""
        if self.headers.get("Transfer-Encoding"):
            self.send_json(411, {"error": "a request states its Content-Length; a chunked body is not read"})
            return None
        if len(self.headers.get_all("Content-Length", [])) > 1:     # which one a proxy read, nobody knows
            self.send_json(400, {"error": "a request states its Content-Length once"})
            return None
        stated = self.headers.get("Content-Length")
        if stated is None:
            self.send_json(411, {"error": "a request states its Content-Length"})
            return None
        if not whole_number(stated):
            self.send_json(400, {"error": f"Content-Length must be a whole number of bytes, got {stated[:40]!r}"})
            return None
        size = int(stated)
        if size > LARGEST_REQUEST:
            self.send_json(413, {"error": f"a request holds at most {LARGEST_REQUEST:,} bytes, got {size:,}"})
            return None
        return size


class RepeatedKey(ValueError):
    """A request's object names a key twice."""


def unique_object(pairs) -> dict:
    """A request's JSON object, refused where it names a key twice (plain JSON keeps the last: a
    request naming ``preset`` twice was answered for the second, silently), as every file reader
    refuses it.

    >>> unique_object([("preset", "gpt2"), ("preset", "bert-base-uncased")])
    Traceback (most recent call last):
    ...
    symbolic_cost.app.server.RepeatedKey: the request names 'preset' twice in one object; which one it meant is not known
    """
    twice = repeated_keys(pairs)
    if twice:
        raise RepeatedKey(f"the request names {', '.join(map(repr, sorted(twice)))} twice in one object; which one "
                          f"it meant is not known")
    return dict(pairs)


def unreadable(error: Exception) -> str:
    """Why a request's body is not read: a number past the digits Python turns into an integer
    (``sys.get_int_max_str_digits``, 4,300), or not a JSON object at all.

    >>> unreadable(ValueError("Exceeds the limit (4300 digits) for integer string conversion"))
    'a number in the request has more than 4,300 digits'
    """
    if "digits" in str(error) and isinstance(error, ValueError):
        return f"a number in the request has more than {sys.get_int_max_str_digits():,} digits"
    return "a request is a JSON object"


class Server(ThreadingHTTPServer):
    """A thread for each connection, at most ``CONNECTIONS`` at once (the next is sent ``503`` and
    closed); threads do not keep the process alive."""

    daemon_threads = True

    def __init__(self, address, handler):
        self.open = threading.BoundedSemaphore(CONNECTIONS)
        super().__init__(address, handler)

    def process_request(self, request, client_address):
        if not self.open.acquire(blocking=False):
            busy = json.dumps({"error": f"{CONNECTIONS} connections are open already: try again"}).encode()
            try:
                request.sendall(b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                b"Content-Length: %d\r\n\r\n%s" % (len(busy), busy))
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.open.release()

    def handle_error(self, request, client_address):
        """A client that left before its answer (a broken pipe, a reset connection) is no error of the
        server's and prints nothing; anything else prints its traceback, as ``socketserver`` does."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class IPv6Server(Server):
    """The server on an IPv6 address (``--host ::1``)."""
    address_family = socket.AF_INET6


def loopback(host: str) -> bool:
    """Whether ``host`` names this machine only.

    >>> loopback("127.0.0.1"), loopback("localhost"), loopback("::1"), loopback("0.0.0.0")
    (True, True, True, False)
    """
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def origins(host: str, port: int) -> tuple | None:
    """The ``Host`` values the page answers on ``host:port``: that address, and for a loopback
    address the other names of this machine (``localhost``, ``127.0.0.1``, ``[::1]``); ``None``
    (any) for a wildcard address (``0.0.0.0``, ``::``), reached by whatever name the network gives.

    >>> origins("127.0.0.1", 8050)
    ('127.0.0.1:8050', 'localhost:8050', '[::1]:8050')
    >>> origins("0.0.0.0", 80) is None
    True
    """
    if host in ("0.0.0.0", "::"):
        return None
    shown = f"[{host}]" if ":" in host else host
    names = [shown] + (["localhost", "127.0.0.1", "[::1]"] if loopback(host) else [])
    return tuple(dict.fromkeys(f"{name}:{port}" for name in names))


def serve(host: str, port: int, main, build_parser) -> int:
    """Serve the page on ``host:port`` until interrupted, answering through the command line's
    ``main`` and ``build_parser``; the address goes to stdout as the first line (with ``port`` 0,
    the free port taken).  Hub ids are read from the local cache only."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")        # the page works offline: no download behind a field
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as error:
        raise InputError(f"--host {host!r} is not an address or a name this machine resolves "
                         f"({getattr(error, 'strerror', None) or error})", "host") from None
    jobs = Jobs()
    try:
        server = (IPv6Server if ":" in host else Server)((host, port), Handler)
    except OSError as error:        # the port taken or refused; an address not of this machine: the host
        blamed = "host" if error.errno == errno.EADDRNOTAVAIL else "port"
        raise InputError(f"cannot listen on {host}:{port}: {error.strerror or error}", blamed) from None
    if not loopback(host):
        print(f"symbolic-cost: warning: --host {host} is not a loopback address: anyone who can reach this "
              f"machine can use the page (it runs no code typed into it, but it has no password)", file=sys.stderr)
    bound = server.server_address[1]
    server.RequestHandlerClass = type("CommandHandler", (Handler,), {
        "main": staticmethod(main), "build_parser": staticmethod(build_parser), "jobs": jobs,
        "origins": origins(host, bound)})
    shown = f"[{host}]" if ":" in host else host
    print(f"serving the page on http://{shown}:{bound}/ (Ctrl-C stops)", flush=True)
    listener = threading.Thread(target=server.serve_forever, daemon=True)
    listener.start()
    try:
        jobs.run_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
    return 0
