"""Comparison framework: providers, accuracy checker, profiler, CLI (grows with every op)."""
