from metrics_kit.tools.cli import run

run()
