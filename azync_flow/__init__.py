"""azync_flow: durable execution for Python on PostgreSQL."""
