"""The checks every part of the client shares: the key as a :class:`Secret`, base URLs (checked,
normalised, masked for messages), and numbers of seconds, counts and rates.

``settings.py`` checks a Client's settings with these, and the transports check their own
arguments with them; this module imports no other module of the client, so both can import it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import re
import string
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from metrics_kit.errors import ConfigurationError
from metrics_kit.spec.version import __version__
from metrics_kit.spec.wire import API_KEY, API_KEY_MIN_LENGTH

_VALID_KEY = API_KEY  # the wire's rule (spec/wire.py): visible ASCII, a header value that cannot be mangled
_USERINFO = re.compile(r"^((?:[A-Za-z][A-Za-z0-9+.-]*:)?//|)[^/?#@]*@")

USER_AGENT = f"metrics-kit/{__version__}"


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_int(name: str, value: object, *, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigurationError(f"{name} must be a whole number >= {minimum}, not {value!r}", argument=name)
    return value


def check_seconds(name: str, value: object, *, positive: bool) -> float:
    """A finite number of seconds, above 0 (``positive``) or at least 0."""
    if not _is_number(value) or not math.isfinite(value) or not (value > 0 if positive else value >= 0):  # type: ignore[arg-type, operator]
        allowed = "above 0" if positive else ">= 0"
        raise ConfigurationError(f"{name} must be a finite number of seconds {allowed}, not {value!r}", argument=name)
    return float(value)  # type: ignore[arg-type]


def check_rate(value: object) -> float | None:
    if value is None:
        return None
    if not _is_number(value) or not math.isfinite(value) or not value > 0:  # type: ignore[arg-type, operator]
        raise ConfigurationError(
            f"rate_limit must be a number of requests a second above 0, or None (no limit), not {value!r}",
            argument="rate_limit",
        )
    return float(value)  # type: ignore[arg-type]


def check_bool(name: str, value: object, *, allow_none: bool = False) -> bool | None:
    if isinstance(value, bool) or (allow_none and value is None):
        return value
    allowed = "True, False or None" if allow_none else "True or False"
    raise ConfigurationError(f"{name} must be {allowed}, not {value!r}", argument=name)


class Secret:
    """An API key that no repr, str, format, ``vars()`` dump or traceback local shows.

    :meth:`reveal` gives the key back; only the code that writes a request calls it, inline, so
    that not even a local variable of ours holds the plain key. :meth:`fingerprint` is what the
    cache files values under: one-way, keyed by the key. :meth:`mask` hides the key in a service's
    text (a vendor's 401 that repeats it) before that text goes into a message."""

    __slots__ = ("_masker", "_value")

    def __init__(self, value: str):
        self._value = value
        self._masker: _Masker | None = None  # what mask() looks for, made on first use

    @classmethod
    def of(cls, value: str | Secret | None) -> Secret | None:
        """``value`` as a Secret (None and "" stay None)."""
        if value is None or isinstance(value, Secret):
            return value
        return cls(value) if value else None

    def reveal(self) -> str:
        return self._value

    def well_formed(self) -> bool:
        """Whether the key can travel in a header unmangled (visible ASCII, no space or line break).
        Checked here, on the key itself, so that no frame of the caller holds it plain to check it."""
        return isinstance(self._value, str) and _VALID_KEY.fullmatch(self._value) is not None

    def maskable(self) -> bool:
        """Whether the key is long enough to be told apart from the rest of a text (API_KEY_MIN_LENGTH):
        a shorter one ("demo", "2025") is also a project name, a date or a word of a message."""
        return len(self._value) >= API_KEY_MIN_LENGTH

    def mask(self, text: str) -> str:
        """``text`` with the key replaced by ``***`` wherever a service may echo it (see :class:`_Masker`):
        in any case; as it is, percent-encoded, JSON-escaped, as HTML character references or any mix
        of these, character by character; base64-encoded (standard or URL-safe, at any alignment);
        and any run of at least max(8, half its length) consecutive characters of it in any of these
        forms (a key cut short, or split between two fields).

        For messages only, never for a value that is parsed: a short key may also be part of a date."""
        if self._masker is None:
            self._masker = _Masker(self._value)
        return self._masker.mask(text)

    def fingerprint(self, service: str) -> str:
        """The hex HMAC-SHA256 of the normalised ``service`` address, keyed by the key: the same
        service and key give the same fingerprint, another key or service another one, and the key
        cannot be recovered from it."""
        message = b"metrics-kit value cache\x00" + normalise_url(service).encode()
        return hmac.new(self._value.encode(), message, hashlib.sha256).hexdigest()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("an API key (Secret) is not pickled or copied out of the process")


# The escapes a service's text may write a character of the key in: percent-encoding (either case of
# hex), JSON's \uXXXX, \", \\ and \/, HTML's numeric and named character references.
_ESCAPE = re.compile(
    r"%([0-9A-Fa-f]{2})|\\u([0-9A-Fa-f]{4})|&#0*([0-9]{1,7});|&#[xX]0*([0-9A-Fa-f]{1,6});"
    r"|&(quot|amp|lt|gt|apos);|\\([\"\\/])",
    re.IGNORECASE,
)
_NAMED = {"quot": '"', "amp": "&", "lt": "<", "gt": ">", "apos": "'"}
# Only ASCII letters change case: the text keeps its length, so a position in it is one in the original.
_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
PIECE = 8  # the shortest run of a key's characters masked on its own (else half the key, if longer)
RECENT = 64  # texts a key's masker remembers having masked (a cache: each is masked the same way again)


def _decoded(text: str) -> tuple[str, list[tuple[int, int]] | None]:
    """``text`` with every escape of :data:`_ESCAPE` written as the character it stands for, and where
    each character of the result came from in ``text`` (None: nowhere else than the same place)."""
    pieces: list[str] = []
    spans: list[tuple[int, int]] = []
    last = 0
    for found in _ESCAPE.finditer(text):
        start, end = found.span()
        pieces.append(text[last:start])
        spans.extend((i, i + 1) for i in range(last, start))
        hexa, unicode, decimal, hexadecimal, named, escaped = found.groups()
        if named is not None:
            character = _NAMED[named.lower()]
        elif escaped is not None:
            character = escaped
        else:
            code = int(decimal, 10) if decimal is not None else int(hexa or unicode or hexadecimal, 16)
            character = chr(code) if code <= 0x10FFFF else "\ufffd"
        pieces.append(character)
        spans.append((start, end))
        last = end
    if not spans:
        return text, None
    pieces.append(text[last:])
    spans.extend((i, i + 1) for i in range(last, len(text)))
    return "".join(pieces), spans


def _base64_forms(key: bytes) -> list[str]:
    """The base64 text of ``key`` as it stands in the encoding of a longer blob that holds it: for each
    of the three byte alignments, the characters that depend on the key's bytes alone, standard and
    URL-safe."""
    forms = []
    for before in range(3):
        encoded = base64.b64encode(b"\0" * before + key).decode()
        first, last = -(-8 * before // 6), 8 * (before + len(key)) // 6  # characters within the key's bits
        forms += [encoded[first:last], encoded[first:last].translate(str.maketrans("+/", "-_"))]
    return forms


class _Masker:
    """Finds a key in a text (see :meth:`Secret.mask`).

    The text is decoded once (every escape written as its character, letters in lower case) and
    searched for every run of ``PIECE`` or more characters (half the form's length, if longer) of each
    form of the key: the key, the key decoded (a key that holds a ``%41`` of its own), its base64
    texts; a key shorter than ``PIECE`` is searched for whole. Each run found is masked where it
    stands in the text as it came, escapes and all. A search is a ``str.find`` per run length and
    place in the key, so masking costs a few dozen searches of the text."""

    def __init__(self, key: str) -> None:
        forms = {key.translate(_LOWER), _decoded(key)[0].translate(_LOWER)}
        runs: dict[int, set[str]] = {}
        for form in forms:
            self._add(runs, form, min(len(form), max(PIECE, len(key) // 2)))
        if len(key) >= PIECE:  # a shorter key's base64 is a few characters any word may hold
            for form in _base64_forms(key.encode("utf-8", "surrogatepass")):
                if len(form) >= PIECE:
                    self._add(runs, form.translate(_LOWER), max(PIECE, len(form) // 2))
        self._runs = [sorted(found) for _, found in sorted(runs.items())]
        # Texts masked lately, and what they became: most answers repeat one (their data version).
        self._recent: dict[str, str] = {}

    @staticmethod
    def _add(runs: dict[int, set[str]], form: str, length: int) -> None:
        if length:
            runs.setdefault(length, set()).update(form[i : i + length] for i in range(len(form) - length + 1))

    def mask(self, text: str) -> str:
        masked = self._recent.get(text)
        if masked is None:
            if len(self._recent) >= RECENT:
                self._recent.clear()
            masked = self._recent[text] = self._masked(text)
        return masked

    def _masked(self, text: str) -> str:
        decoded, spans = _decoded(text)
        lowered = decoded.translate(_LOWER)
        covered: list[tuple[int, int]] = []
        for same_length in self._runs:
            for run in same_length:
                at = lowered.find(run)
                while at >= 0:
                    covered.append((at, at + len(run)))
                    at = lowered.find(run, at + 1)
        if not covered:
            return text
        covered.sort()
        merged = [covered[0]]
        for start, end in covered[1:]:
            if start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        out, last = [], 0
        for start, end in merged:
            first, after = (spans[start][0], spans[end - 1][1]) if spans is not None else (start, end)
            out += [text[last:first], "***"]
            last = after
        out.append(text[last:])
        return "".join(out)


def normalise_url(base_url: str) -> str:
    """Lower-case scheme and host, no default port, no trailing slash, no fragment."""
    parts = urlsplit(base_url.strip())
    scheme = parts.scheme.lower()
    netloc = parts.netloc
    try:
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number: keep the URL as written
        host, port = None, None
    if host is not None:
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        userinfo = netloc.rpartition("@")[0]
        default = {"http": 80, "https": 443}.get(scheme)
        netloc = (
            (userinfo + "@" if userinfo else "") + host + (f":{port}" if port is not None and port != default else "")
        )
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def cache_identity(service: str, key: Secret | None) -> str:
    """``service#fingerprint``: what a transport files cached values under (see :meth:`Secret.fingerprint`).
    Without a key (a service in this process that needs none), the service names itself."""
    return f"{service}#{(key or Secret(service)).fingerprint(service)}"


def check_api_key(value: object) -> Secret:
    # The key is checked by the Secret itself: no local here holds it plain (a verbose traceback of
    # the error below shows every local), and the error never echoes it (a real key with a stray newline).
    key = Secret(value) if isinstance(value, str) else value
    del value
    if not isinstance(key, Secret) or not key.well_formed():
        raise ConfigurationError(
            "api_key must be a non-empty string of visible ASCII characters (no spaces or line breaks)",
            argument="api_key",
        )
    return key


# A path segment that may be a key: long, of token characters, with letters and digits in it.
_TOKEN = re.compile(r"(?=[\w.~+=-]*[0-9])(?=[\w.~+=-]*[A-Za-z])[\w.~+=-]{20,}")


def masked_url(value: str, key: Secret | None = None) -> str | None:
    """``value`` with whatever in it may be a key masked: a user name or password (``***@``), the
    query and the fragment, a long token-like path segment, the key itself. None when ``value`` is
    not an address at all (it may be a key given in the wrong place: nothing of it is shown)."""
    text = value.strip()
    parts = urlsplit(text)
    if not parts.scheme or "://" not in text:
        return None
    netloc = _USERINFO.sub(r"\1***@", "//" + parts.netloc)[2:]
    path = "/".join("***" if _TOKEN.fullmatch(segment) else segment for segment in parts.path.split("/"))
    shown = urlunsplit((parts.scheme, netloc, path, "***" if "?" in text else "", "***" if "#" in text else ""))
    return key.mask(shown) if key is not None else shown


def shown_url(value: object, limit: int = 80, key: Secret | None = None) -> str:
    """A base URL for a message: quoted and masked (:func:`masked_url`), or, for a value that is not
    an address, only its length."""
    if not isinstance(value, str):
        return f"a {type(value).__name__}"
    shown = masked_url(value, key)
    if shown is None:
        return f"a value of {len(value.strip())} characters that is not an address (not shown: it may be a key)"
    return repr(shown[:limit] + ("..." if len(shown) > limit else ""))


def shown_service(base_url: str) -> str:
    """A client's service for a message or a repr: "embedded" as it is, any other address with
    anything in it that may be a key masked (:func:`masked_url`)."""
    return base_url if base_url == "embedded" else masked_url(base_url) or "(an address not shown)"


def shown_request(url: str) -> str:
    """A request URL of ours (base URL, path, and the query we wrote: metric, project, granularity,
    date) for a message or an error's ``url``: the base URL's part masked as :func:`masked_url`
    masks it (a token-like path segment, say), the query kept."""
    head, mark, query = url.partition("?")
    return (masked_url(head) or "(an address not shown)") + mark + query


class Address(str):
    """A base URL not yet known to be free of secrets (a key given in its place, a ``?api_key=``):
    a string whose repr masks whatever in it may be a key (:func:`shown_url`), so that a traceback's
    locals (``%xmode Verbose``, ``pytest --showlocals``) never show it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return shown_url(str(self))


def address(value: Any) -> Any:
    """``value`` as an :class:`Address` when it is a string (anything else as it is)."""
    return Address(value) if isinstance(value, str) and not isinstance(value, Address) else value


def check_base_url(value: object, key: Secret | None = None) -> str:
    value = address(value)
    text = Address(value.strip().rstrip("/")) if isinstance(value, str) else Address("")
    if "://" in text and text.partition("://")[0].lower() in ("http", "https"):  # case-insensitive (RFC 3986)
        # Inline, no local holding a part of the text: it may hold a key (a verbose traceback shows locals).
        text = Address(text.partition("://")[0].lower() + text[text.index("://") :])
    if isinstance(value, str) and "@" in urlsplit(text).netloc:
        # Refused, not used as basic auth: the key travels in x-api-key, and a password in a URL ends
        # up in logs, reprs and shell history. The message never repeats what preceded the '@'.
        raise ConfigurationError(
            f"base_url must not hold a user name or password (user:password@host): got {shown_url(text, key=key)}. "
            "Give the service's address alone, and the key as api_key= or in METRICS_KIT_API_KEY",
            argument="base_url",
        )
    if not text.startswith(("http://", "https://")) or "?" in text or "#" in text or len(text) <= len("https://"):
        raise ConfigurationError(
            "base_url must be an http:// or https:// address without a query or fragment, such as "
            f"https://metrics.example.com/v1; got {shown_url(value, key=key)}",
            argument="base_url",
        )
    if key is not None and key.reveal() in text:
        raise ConfigurationError(
            f"base_url must not hold the API key: got {shown_url(text, key=key)}; the key travels in a header only",
            argument="base_url",
        )
    try:
        urlsplit(text).port  # noqa: B018 (urllib checks the port when asked for it)
    except ValueError:
        raise ConfigurationError(
            f"base_url has a port that is not a number from 0 to 65535: got {shown_url(text, key=key)}",
            argument="base_url",
        ) from None
    return str(text)
