"""Fault tests: crashes at every durable step and damaged stores, through the real `till`."""
