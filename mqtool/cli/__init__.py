"""The command line: main (the command group, outcomes to exit codes), options (click
declarations only), output (tables, JSON lines, progress) and heap (malloc tuning at start).
The subcommands themselves are mqtool/commands/, one thin module each.
"""
