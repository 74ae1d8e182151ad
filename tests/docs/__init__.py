"""The documentation checked like code: the site, its code blocks, the guides that run as written,
the notebooks."""
