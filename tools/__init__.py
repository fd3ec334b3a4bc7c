"""Repository tooling, not part of the wheel: `python -m tools.fixtures` records rust_fixtures/."""
