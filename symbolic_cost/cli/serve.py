"""A local web page over the command line: pick a model (a bundled preset, a pasted
config.json or a cached hub id) and a system.  The training view gives a verdict (fits, or the
smallest layout that does), the memory per device and the step time by part, curves against the
micro-batch and the sequence length, each operation of a layer on the roofline, the layout search
and a whole-model formula; the serving view gives the request rate an SLO allows and the latency
against the rate.  Each answer is what ``summary``, ``sweep``, ``table``, ``search``, ``formula`` and
``inference`` print for the same choices (``symbolic_cost.app``): the page builds their command
lines from its fields and shows their refusals word for word."""

from __future__ import annotations

from symbolic_cost.cli import options

EXAMPLES = [
    "symbolic-cost serve",
    "symbolic-cost serve --port 8051",
    "symbolic-cost serve --host 0.0.0.0 --port 8080",
]

PORT = 8050
HOST = "127.0.0.1"
"""Defaults of ``--port`` and ``--host``: the loopback interface, reachable from this machine only."""


def add_arguments(parser) -> None:
    options.option(parser, "--port", type=options.integer(0, 65535), default=PORT,
                   help="the TCP port to listen on (0: any free port, printed at start)")
    options.option(parser, "--host", default=HOST,
                   help="the address to listen on; one that is not a loopback address opens the page to the "
                        "network, with a warning")


def run(args) -> int:
    from symbolic_cost import cli
    from symbolic_cost.app import server      # imported here: the other commands never need it
    return server.serve(args.host, args.port, cli.main, cli.build_parser)
