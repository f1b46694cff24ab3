"""Cluster-wide maintenance: leader election and the tasks only the leader runs."""
