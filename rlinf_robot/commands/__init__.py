"""Subcommands of the ``rlinf-robot`` CLI; each module has HELP, add_arguments and run."""
