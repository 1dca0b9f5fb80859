"""The interactive page of ``symbolic-cost serve``: a small HTTP server of the standard library
(``app.server``) sends one static page (``page.html``, plain JavaScript and SVG, nothing fetched
from elsewhere) and answers its JSON requests by running the command line itself
(``app.commands``): the page's fields become the words of a ``summary``, ``formula`` or
``search`` command line, parsed and checked by the same parser, so a bad value is refused with
the command line's own message and nothing typed is ever evaluated."""
