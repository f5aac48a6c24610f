"""Command line, JupyterLab and reports, docs generation: tools that join the client and the server."""
