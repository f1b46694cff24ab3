"""Hypothesis settings shared by the property-based tests of awa's input boundaries (#24)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

# No example database: a run does not replay or store earlier failures (Hypothesis still keeps
# its self-ignored constants cache in .hypothesis/), and a failure prints the example that
# reproduces it. No deadline: each example is a request against a real PostgreSQL on a machine
# shared with other work, whose timing says nothing about the code under test.
BOUNDARY = settings(
    database=None,
    deadline=None,
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
