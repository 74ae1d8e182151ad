"""The package and the repository: what an install gives, one import root, the import layers, the
public API, a clone that stands alone."""
