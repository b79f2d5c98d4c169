"""Benchmarking tools: the HTTP load generator behind `polyvox bench`."""
