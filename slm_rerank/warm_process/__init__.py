"""A warm local process that the command line's ``--fast`` searches and the prompt hook reuse.

A ``--fast`` search or a hook run is a whole Python process that spends about a quarter of
a second importing modules and loading plugins before it searches (issue 30). The first
such command starts a warm process (``server``) in the background and answers in its own
process; later ones hand their arguments, folder, environment and (for the hook) stdin to
it over a user-only Unix socket (``client``), and write what it answers. The warm process
runs each command in its worker, one long-lived process that has imported everything and
runs commands one after another, so what one keeps in memory (chunks, histories, the
hook's vocabulary, the loaded plugins) serves the next; each runs with the caller's
folder, environment and arguments, exactly as it would have run on its own, and the
worker is put back as it was after it. A command arriving while the worker is busy runs in
a fresh fork instead.

Modules: ``wire`` (the messages and their caps), ``client`` (standard library only: runs
before click is imported), ``server`` (the process itself), ``worker`` (its long-lived
worker), ``isolation`` (one command in the worker, and the worker put back after it),
``command_fork`` (one command in a fork), ``switch`` (the user's on/off and idle
settings: never a repository's).
"""
