"""Building blocks of the ALBERT encoder, named after the original TF1 variable scopes."""
