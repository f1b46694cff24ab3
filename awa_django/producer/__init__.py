"""The producer: ``enqueue``, ``enqueue_many``, ``enqueue_on_commit``, the ``@awa.job`` and
``@awa.periodic`` decorators that give jobs their enqueue methods, and eager mode.

Just below the surfaces and above ``worker``: eager mode runs jobs with the worker's
in-process runner, imported directly.
"""
