"""Benchmarks: each compares pararl with its anchors in one run and writes tables and plots."""
