"""The implementation behind the user modules :mod:`azync_flow.workflow` and
:mod:`azync_flow.activity`: definitions and their registry, the workflow
context, child handles, query and update handlers, the history limit and the
context of a running activity attempt.

Users import from the user modules; the package's own runtimes, client and
testing kit import these modules directly.
"""
