"""What the client and the server agree on: the catalogue, the calendar, the id rules, the wire shapes.

Imports nothing of metrics_kit's but ``errors``.
"""
