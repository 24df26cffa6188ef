"""Test-only helpers of operator_runtime: case types, the shared pytest
harness that turns an operator's case tables into tests, and its entry point."""
