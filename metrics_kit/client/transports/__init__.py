"""How requests reach a service: the Transport protocol and its implementations.

- :class:`HTTPTransport`: a remote service over HTTP (requests + urllib3 ``Retry``).
- :class:`ASGITransport`: an ASGI application in this process, no socket (the embedded default).
- :class:`MockTransport`: a function of the request, for unit tests.

``Client(transport=...)`` takes any of them. A client given neither a base URL nor a transport uses
the default transport registered here with :func:`set_default_transport` (the package root
registers the embedded reference service; the client layer never imports the server).
:func:`pull_deadline` bounds every request made inside it by one deadline (HTTPTransport honours it).
Each of them also gives the answers of a batch as they come (``answers(requests)``, an :class:`Answers`),
so that an interrupted pull keeps every answer that had come.
"""

from metrics_kit.client.transports._asgi import ASGITransport
from metrics_kit.client.transports._base import (
    Answers,
    Clock,
    Deadline,
    Pacer,
    Reply,
    SaysSynthetic,
    Sleep,
    Transport,
    answers_of,
    current_deadline,
    default_transport,
    is_synthetic,
    pull_deadline,
    set_default_transport,
    within_deadline,
)
from metrics_kit.client.transports._http import HTTPTransport
from metrics_kit.client.transports._mock import MockTransport, Request, Response

__all__ = [
    "ASGITransport",
    "Answers",
    "Clock",
    "Deadline",
    "HTTPTransport",
    "MockTransport",
    "Pacer",
    "Reply",
    "Request",
    "Response",
    "SaysSynthetic",
    "Sleep",
    "Transport",
    "answers_of",
    "current_deadline",
    "default_transport",
    "is_synthetic",
    "pull_deadline",
    "set_default_transport",
    "within_deadline",
]
