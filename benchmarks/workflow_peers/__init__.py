"""The peers of benchmarks/workflows.py. Each module here runs under its peer's own virtual
environment (``.venv-peers/<peer>``, made by the harness), imports nothing of this project,
and prints its results as one JSON object on its last line of output."""
