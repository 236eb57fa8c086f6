"""One module per subcommand; each is thin and calls into the store modules."""
