"""The client: speaks the HTTP contract of ``GET /metrics`` through a transport; never imports the server."""
