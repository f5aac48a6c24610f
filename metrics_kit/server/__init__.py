"""The reference metrics service over HTTP: an ASGI app (``app``) and its runner (``run``)."""
