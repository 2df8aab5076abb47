"""A warm local process that the command line's ``--fast`` searches and the prompt hook reuse.

A ``--fast`` search or a hook run is a whole Python process that spends about a quarter of
a second importing modules and loading plugins before it searches (issue 30). The first
such command starts a warm process (``server``) in the background and answers in its own
process; later ones hand their arguments, folder, environment and (for the hook) stdin to
it over a user-only Unix socket (``client``), and write what it answers. The warm process
forks once per request: each answer is computed by a fresh copy of a process that has
already imported everything, with the caller's folder and environment, exactly as the
command would have run on its own.

Modules: ``wire`` (the messages and their caps), ``client`` (standard library only: runs
before click is imported), ``server`` (the process itself), ``command_fork`` (one command
in a fork), ``switch`` (the user's on/off and idle settings: never a repository's).
"""
