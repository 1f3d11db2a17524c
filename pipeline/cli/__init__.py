"""The `sftprep` command line: one module per subcommand, `main` wires them."""
