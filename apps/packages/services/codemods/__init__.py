"""Codemods: source rewrites run over many packages through the one publish path."""
