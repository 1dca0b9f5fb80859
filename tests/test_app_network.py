"""The page's server against slow, malformed and foreign clients (issue 66), on 127.0.0.1, each
client bounded in count and time: a half request holds only its own connection, a body states a
whole-number length (no chunks), the ``Host`` and ``Origin`` must be the page's, and connections
past the limit are turned away at once.

The server runs in this process (its listener and the answering queue in threads), with the
limits made small here; the commands it answers are the command line's own."""

import contextlib
import io
import json
import socket
import threading

import pytest

from symbolic_cost.app import server
from symbolic_cost.cli import build_parser, main

WAIT = 60
"""Seconds a client waits for an answer: a bound on a hung test, never a timing assertion."""


@pytest.fixture
def page(monkeypatch):
    """A served page on a free port with at most 3 connections; its port."""
    monkeypatch.setattr(server, "CONNECTIONS", 3)
    httpd = server.Server(("127.0.0.1", 0), server.Handler)
    port = httpd.server_address[1]
    jobs = server.Jobs()
    httpd.RequestHandlerClass = type("Handler", (server.Handler,), {
        "main": staticmethod(main), "build_parser": staticmethod(build_parser), "jobs": jobs,
        "origins": server.origins("127.0.0.1", port), "timeout": WAIT})
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    threading.Thread(target=jobs.run_forever, daemon=True).start()
    yield port
    httpd.shutdown()
    httpd.server_close()


def ask(port, text: str) -> tuple[int, dict]:
    """Send ``text`` (``{port}`` filled in) as one raw request; the status and the JSON body."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as client:
        client.sendall(text.replace("{port}", str(port)).replace("\n", "\r\n").encode())
        reply = b""
        while chunk := client.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body) if body.startswith(b"{") else {}


def post(body: str, **headers) -> str:
    lines = ["POST /api/summary HTTP/1.1", "Host: 127.0.0.1:{port}", *(f"{k}: {v}" for k, v in headers.items())]
    return "\n".join(lines) + "\n\n" + body


def test_a_half_sent_request_holds_only_its_own_connection(page):
    with socket.create_connection(("127.0.0.1", page), timeout=WAIT) as slow:
        slow.sendall(b"POST /api/summary HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")     # and no more
        status, choices = ask(page, "GET /api/choices HTTP/1.1\nHost: 127.0.0.1:{port}\n\n")
    assert status == 200 and "gpt2" in choices["preset"]["choices"]


@pytest.mark.parametrize("request_, status, message", [
    (post("{}", **{"Content-Length": "abc"}), 400, "Content-Length must be a whole number of bytes, got 'abc'"),
    (post("{}", **{"Content-Length": "-2"}), 400, "Content-Length must be a whole number of bytes, got '-2'"),
    (post("2\n{}\n0\n", **{"Transfer-Encoding": "chunked"}), 411, "a chunked body is not read"),
    (post(""), 411, "a request states its Content-Length"),
    (post("", **{"Content-Length": "2000000"}), 413, "a request holds at most 1,000,000 bytes, got 2,000,000"),
    ("GET /api/choices HTTP/1.1\nHost: evil.example:{port}\n\n", 403, "answers requests for 127.0.0.1:"),
    (post("{}", **{"Content-Length": "2", "Origin": "http://evil.example"}), 403, "from its own page only"),
    # a number of 5,000 digits was told "a request is a JSON object"; a PUT got an HTML page of 501
    (post('{"b": ' + "9" * 5000 + "}", **{"Content-Length": "5007"}), 400, "has more than 4,300 digits"),
    ("PUT /api/summary HTTP/1.1\nHost: 127.0.0.1:{port}\nContent-Length: 0\n\n", 405, "answers GET and POST, not PUT"),
    ("DELETE / HTTP/1.1\nHost: 127.0.0.1:{port}\n\n", 405, "not DELETE"),
    ("GET /" + "a" * 70000 + " HTTP/1.1\n\n", 414, "URI Too Long"),
    # two lengths: which one a proxy in front read, nobody knows (the first was taken)
    ("POST /api/summary HTTP/1.1\nHost: 127.0.0.1:{port}\nContent-Length: 2\nContent-Length: 3\n\n{} ", 400,
     "states its Content-Length once"),
    # a key named twice was answered for its last value, silently, where every file reader refuses it
    (post('{"preset": "gpt2", "preset": "bert-base-uncased"}', **{"Content-Length": "49"}), 400,
     "names 'preset' twice in one object"),
])
def test_malformed_and_foreign_requests_are_refused_naming_the_rule(page, request_, status, message):
    got, body = ask(page, request_)
    assert got == status and message in body["error"], body


def test_a_length_of_a_digit_python_cannot_read_is_refused(page):
    """A fuzz of the server: ``Content-Length: ²`` (the byte 0xB2, a digit to ``str.isdigit`` but
    not to ``int``) got no answer and a traceback on the server's side."""
    with socket.create_connection(("127.0.0.1", page), timeout=WAIT) as client:
        client.sendall(b"POST /api/summary HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: \xb2\r\n\r\n{}" % page)
        reply = b""
        while chunk := client.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert int(head.split()[1]) == 400 and "Content-Length must be a whole number" in json.loads(body)["error"]


def test_a_request_from_the_page_itself_is_answered(page):
    body = json.dumps({"model": "preset", "preset": "gpt2"})
    status, answer = ask(page, post(body, **{"Content-Length": str(len(body)), "Origin": "http://localhost:{port}"})
                         .replace("Host: 127.0.0.1", "Host: localhost"))
    assert status == 200 and answer["status"] == 0 and answer["output"]["model"] == "gpt2"


def test_a_refused_value_comes_back_as_unprocessable(page):
    """A request read but refused by the command (exit status 2) is HTTP 422 with its one line, not a 200 a
    client reads as an answer."""
    body = json.dumps({"model": "preset", "preset": "gpt2", "set": {"b": 0}})
    status, answer = ask(page, post(body, **{"Content-Length": str(len(body))}))
    assert status == 422 and answer["status"] == 2 and "b" in answer["error"] and answer["output"] is None


def test_a_request_trickled_a_byte_at_a_time_is_cut_off(page, monkeypatch):
    """A byte every 0.2 s never lets the socket's read timeout pass, and 32 such clients held every
    connection of the server for as long as they went on; the whole request must arrive within
    ``REQUEST_SECONDS`` (1 s here), or the server closes it.  The client goes on for up to ``WAIT``
    seconds: the server, not the client, ends the exchange."""
    import time
    monkeypatch.setattr(server, "REQUEST_SECONDS", 1)
    with socket.create_connection(("127.0.0.1", page), timeout=WAIT) as slow:
        slow.sendall(b"POST /api/summary HTTP/1.1\r\n")
        start, closed = time.monotonic(), False
        while not closed and time.monotonic() - start < WAIT:
            try:
                slow.sendall(b"X")
                time.sleep(0.2)
            except OSError:            # reset: the server closed it
                closed = True
                break
            slow.setblocking(False)
            try:
                closed = slow.recv(65536) is not None
            except BlockingIOError:
                pass
            except OSError:
                closed = True
            slow.setblocking(True)
    assert closed
    status, choices = ask(page, "GET /api/choices HTTP/1.1\nHost: 127.0.0.1:{port}\n\n")
    assert status == 200


def test_a_body_shorter_than_its_length_is_refused(page):
    """Ten bytes stated, two sent, then the client stops writing: the read ends short, and the server
    says so (408) rather than parsing a cut body."""
    with socket.create_connection(("127.0.0.1", page), timeout=WAIT) as client:
        client.sendall(post("{}", **{"Content-Length": "10"}).replace("{port}", str(page)).replace("\n", "\r\n")
                       .encode())
        client.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := client.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert int(head.split()[1]) == 408 and "ended before its Content-Length of 10 bytes" in json.loads(body)["error"]


@pytest.mark.parametrize("kind, request_, unused", [
    ("summary", {"devices": "8"}, "devices"), ("summary", {"rate": "8", "grid": "b=1,2"}, "grid, rate"),
    ("inference", {"zero": "1"}, "zero"), ("inference", {"global_batch": "8"}, "global_batch"),
    ("layers", {"top": "3"}, "top"), ("formula", {"field": "total", "devices": "8"}, "devices"),
])
def test_a_field_its_command_does_not_read_is_refused(kind, request_, unused):
    """The page's fields are one set for every kind of request: a field one kind reads was dropped
    without a word by another (a summary of 'devices': 8 ran on the preset's own devices)."""
    from symbolic_cost.app.commands import answer
    got = answer(kind, {"model": "preset", "preset": "gpt2", **request_}, main)
    assert got["status"] == 2 and f"{unused}: a {kind} request has no" in got["error"], got


def test_connections_past_the_limit_are_turned_away_at_once(page):
    idle = [socket.create_connection(("127.0.0.1", page), timeout=WAIT) for _ in range(3)]
    try:
        status, body = ask(page, "GET / HTTP/1.1\nHost: 127.0.0.1:{port}\n\n")
        assert status == 503 and "3 connections are open already" in body["error"]
    finally:
        for client in idle:
            client.close()


def test_a_client_that_leaves_before_its_answer_is_no_error_of_the_server(page):
    """A client that closes its connection while its request is answered made the server print a
    ``BrokenPipeError`` traceback (found by hand: a page closed mid-request).  The server says nothing
    of a client that left, goes on answering, and still prints any other error in full."""
    body = json.dumps({"model": "preset", "preset": "gpt2"})
    with socket.create_connection(("127.0.0.1", page), timeout=WAIT) as gone:
        gone.sendall(post(body, **{"Content-Length": str(len(body)), "Content-Type": "application/json"})
                     .replace("{port}", str(page)).replace("\n", "\r\n").encode())
    status, answered = ask(page, post(body, **{"Content-Length": str(len(body)), "Content-Type": "application/json"}))
    assert status == 200 and answered["status"] == 0          # queued after the one whose client left
    quiet = server.Server(("127.0.0.1", 0), server.Handler)
    try:
        for error, printed in ((BrokenPipeError(32, "Broken pipe"), False), (ConnectionResetError(), False),
                               (ValueError("a bug"), True)):
            printing = io.StringIO()     # socketserver prints to sys.stderr as it is at the call
            with contextlib.redirect_stderr(printing):
                try:
                    raise error
                except Exception:
                    quiet.handle_error(None, ("127.0.0.1", 1))
            assert ("Traceback" in printing.getvalue()) == printed, error
    finally:
        quiet.server_close()
