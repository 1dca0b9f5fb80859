"""The HTTP side of the page: ``GET /`` sends ``page.html``, ``GET /api/choices`` the choices
the command line's parsers accept (presets, systems, ZeRO stages, ...), and ``POST
/api/summary``, ``/api/formula`` and ``/api/search`` run those commands (``app.commands``).
The command line is handed in by the ``serve`` command (its ``main`` and ``build_parser``): the
page sits below it and imports none of it.

One request at a time, in the main thread: the command line's time budget
(``budget.time_limit``, a ``SIGALRM`` timer) then limits each answer as it limits a command."""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import socket
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

from symbolic_cost.app.commands import CHOICES, WORDS, answer
from symbolic_cost.checks import REPORT, InputError

PAGE = Path(__file__).with_name("page.html")
LARGEST_REQUEST = 1_000_000
"""Bytes a request body may hold (a config.json is a few kilobytes)."""


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
    """What ``GET /api/choices`` sends: the presets, the page's choices, flash attention's default
    and the formula fields."""
    summary, formula = parser_choices(build_parser, "summary"), parser_choices(build_parser, "formula")
    return {"preset": summary["preset"], **{name: summary[name] for name in (*CHOICES, "flash")},
            "field": formula["total"]}


class Handler(BaseHTTPRequestHandler):
    """Answers the page's requests through the command line's ``main`` and ``build_parser`` (set by
    ``serve``); logs nothing (the terminal shows the address only)."""

    main = build_parser = None

    def log_message(self, *args) -> None:
        pass

    def send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, status: int, value) -> None:
        self.send(status, json.dumps(value).encode(), "application/json")

    def do_GET(self) -> None:
        if self.path in ("/", "/index.html"):
            self.send(200, PAGE.read_bytes(), "text/html; charset=utf-8")
        elif self.path == "/api/choices":
            self.send_json(200, choices(self.build_parser))
        else:
            self.send_json(404, {"error": f"no page {self.path}"})

    def do_POST(self) -> None:
        kind = self.path.removeprefix("/api/")
        if kind not in WORDS:
            return self.send_json(404, {"error": f"no request {self.path}"})
        size = int(self.headers.get("Content-Length") or 0)
        if size > LARGEST_REQUEST:
            return self.send_json(413, {"error": f"a request holds at most {LARGEST_REQUEST:,} bytes, got {size:,}"})
        try:
            request = json.loads(self.rfile.read(size) or b"{}")
        except (ValueError, RecursionError):     # not JSON, or nested past the parser's depth
            return self.send_json(400, {"error": "a request is a JSON object"})
        try:
            self.send_json(200, answer(kind, request, self.main))
        except Exception as error:      # a bug of ours, as cli.main says of one: the server goes on
            self.send_json(500, {"error": f"symbolic-cost: internal error: {type(error).__name__}: {error}; {REPORT}"})


class IPv6Server(HTTPServer):
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


def serve(host: str, port: int, main, build_parser) -> int:
    """Serve the page on ``host:port`` until interrupted, answering through the command line's
    ``main`` and ``build_parser``; the address goes to stdout as the first line (with ``port`` 0,
    the free port taken).  Hub ids are read from the local cache only."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")        # the page works offline: no download behind a field
    if not loopback(host):
        print(f"symbolic-cost: warning: --host {host} is not a loopback address: anyone who can reach this "
              f"machine can use the page (it runs no code typed into it, but it has no password)", file=sys.stderr)
    try:
        handler = type("CommandHandler", (Handler,), {"main": staticmethod(main),
                                                      "build_parser": staticmethod(build_parser)})
        server = (IPv6Server if ":" in host else HTTPServer)((host, port), handler)
    except OSError as error:
        raise InputError(f"cannot listen on {host}:{port}: {error.strerror or error}", "port") from None
    shown = f"[{host}]" if ":" in host else host
    print(f"serving the page on http://{shown}:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
