"""The values and pure functions the worker, the maintenance services and the callbacks share.

Below ``worker``, ``maintenance`` and ``callbacks`` and above ``storage``: none of them imports
another to reach these (see CONTRIBUTING.md for the layer rule and its check).
"""
