"""External callbacks: parked and sequential waits on an outside system (docs/callbacks.md).

``tokens`` names a callback, ``signing`` authenticates HTTP callbacks, ``external`` resolves
callbacks from any process, ``waiting`` is the worker's side and ``views`` the HTTP endpoint.
"""
