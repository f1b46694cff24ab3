"""The values and pure functions the worker, the maintenance services, the callbacks and the
operator API share.

Below ``ops`` and above ``storage``: none of them imports another to reach these (see
CONTRIBUTING.md for the layer rule and its check).
"""
