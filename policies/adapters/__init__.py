"""Adapters to real VLA backbones: a transformers VLM (hf_vla) and openpi's policy server."""
