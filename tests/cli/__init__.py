"""The command line as a whole: the parser, bad input on every command, progress, atomic outputs,
start-up noise, quickstart, benchmark."""
