"""The worker process: dispatchers, executor, completer, notifier, promoter and shutdown."""
