"""The HTTP shell over the query layer: an ASGI app, its OpenAPI document, the runner."""
