"""Pretraining data: create-pretraining-data (local and Beam, every sentence task, dynamic masking)
and the quickstart's corpus."""
